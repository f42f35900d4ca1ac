"""The MLflow runs MLflowReport and the search share: the client, a run found by its key.

A run is known by a key its maker chooses (the tag ``researchutils.run_key``) before the
server gives it an id: :func:`find_or_create_run` finds the run of a key in its MLflow
experiment, or makes it. MLflowReport keys each training run so (the key is in the Trainer's
snapshot from the start); the search keys a study's parent run by the study's identity.
mlflow is imported when a client is made. Tests:
tests/chainer/training/extensions/test_mlflow_report.py, test_search_tracking.py.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mlflow

# The tag that finds a run again whose id the snapshot could not hold yet.
RUN_KEY_TAG = 'researchutils.run_key'
PARENT_TAG = 'mlflow.parentRunId'  # MLflow's own link of a child run to its parent


def mlflow_client_class(who: str) -> type[mlflow.MlflowClient]:
    """``mlflow.MlflowClient``; an ImportError naming the extra when mlflow is missing."""
    try:
        from mlflow import MlflowClient
    except ImportError as error:
        raise ImportError('{} needs mlflow: pip install researchutils[mlflow]'.format(who)
                          ) from error
    return MlflowClient


def _experiment_id(client: Any, experiment_name: str | None, create: bool) -> str | None:
    """The id of the MLflow experiment named (None: MLflow's Default); made when missing and
    ``create``, else None."""
    if experiment_name is None:
        return '0'  # MLflow's Default experiment
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        return str(experiment.experiment_id)
    if not create:
        return None
    try:
        return str(client.create_experiment(experiment_name))
    except Exception:
        # Made meanwhile by another process (the trials of a search).
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment is None:
            raise
        return str(experiment.experiment_id)


def find_run(client: Any, run: Mapping[str, Any]) -> Any:
    """The MLflow run (``mlflow.entities.Run``) of ``run``: by its id when known, else the
    one tagged ``run['run_key']`` in its experiment; None when the server has none."""
    if run.get('run_id'):
        from mlflow.exceptions import MlflowException
        try:
            return client.get_run(run['run_id'])
        except MlflowException:
            pass  # deleted, or of another server: found by its key, or none
    experiment_id = _experiment_id(client, run['experiment_name'], create=False)
    if experiment_id is None:
        return None
    found = client.search_runs([experiment_id], "tags.`{}` = '{}'".format(
        RUN_KEY_TAG, run['run_key']), max_results=1)
    return found[0] if found else None


def find_or_create_run(client: Any, run: Mapping[str, Any]) -> str:
    """The id of the run tagged ``run['run_key']`` in its experiment, set running again;
    made when none is."""
    experiment_id = _experiment_id(client, run['experiment_name'], create=True)
    found = client.search_runs([experiment_id], "tags.`{}` = '{}'".format(
        RUN_KEY_TAG, run['run_key']), max_results=1)
    if found:
        run_id = str(found[0].info.run_id)
        if found[0].info.status != 'RUNNING':
            client.update_run(run_id, status='RUNNING')
        return run_id
    return create_run(client, run, str(experiment_id))


def create_run(client: Any, run: Mapping[str, Any], experiment_id: str | None = None) -> str:
    """A new run tagged with ``run['run_key']``; its id."""
    if experiment_id is None:
        experiment_id = _experiment_id(client, run['experiment_name'], create=True)
    tags = dict(run.get('tags') or {})
    tags[RUN_KEY_TAG] = run['run_key']
    created = client.create_run(experiment_id, tags=tags, run_name=run.get('run_name'))
    return str(created.info.run_id)


def end_run(client: Any, run_id: str, status: str, end_time: int | None = None) -> None:
    """Marks run ``run_id`` ended with ``status`` (``FINISHED``, ``FAILED``, ``KILLED``).

    ``MlflowClient.set_terminated`` also asks for the run once more and prints its URL on
    stdout: from a background thread that line would land anywhere in the training's own
    output. The client's store is told directly where the client has one (MLflow 2 and 3).
    """
    store = getattr(getattr(client, '_tracking_client', None), 'store', None)
    if store is None or not hasattr(store, 'update_run_info'):
        client.set_terminated(run_id, status, end_time)
        return
    from mlflow.entities import RunStatus
    store.update_run_info(run_id, run_status=RunStatus.from_string(status),
                          end_time=end_time if end_time is not None else int(
                              time.time() * 1000), run_name=None)
