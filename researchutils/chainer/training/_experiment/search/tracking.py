"""A search's MLflow runs: one parent run per study, a child run per trial, marked at its end.

The parent run is found by the study's identity (the tag ``researchutils.study_id``) or
made, once per study, by whichever process leads the search; each trial's MLflowReport
(``_experiment/tracking.py``) logs to a child of it (MLflow's ``mlflow.parentRunId`` tag)
tagged with the study and the trial, and a trial that was pruned or failed is marked so
(the tag ``trial_state``; a pruned one ends ``KILLED``). A retried trial trains in its
folder and resumes its snapshot, whose MLflowReport continues the trial's run. Talking to
MLflow here is synchronous but brief (a few requests per study and trial), and a failure
is a logged warning: tracking never stops a search. Tests:
``tests/chainer/training/test_search_tracking.py``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from researchutils.chainer.training._experiment import settings
from researchutils.chainer.training._experiment import tracking as experiment_tracking
from researchutils.chainer.training._mlflow_runs import (
    PARENT_TAG,
    end_run,
    find_or_create_run,
    mlflow_client_class,
)

if TYPE_CHECKING:
    import optuna

    from researchutils.chainer.training._experiment.protocol import Experiment

logger = logging.getLogger('researchutils.chainer.training.experiment')
STUDY_TAG = 'researchutils.study_id'
FOLDER_TAG = 'researchutils.trial_folder'
STATE_TAG = 'trial_state'


def _mlflow_on(experiment: Experiment) -> bool:
    return experiment.tracking is not None and bool(experiment.tracking['mlflow'])


def _client(experiment: Experiment) -> Any:
    assert experiment.tracking is not None
    return mlflow_client_class('search with MLflow tracking')(
        tracking_uri=experiment_tracking.mlflow_uri(experiment.tracking))


def with_parent_run(experiment: Experiment, study: optuna.Study, study_id: str
                    ) -> Experiment:
    """``experiment`` with its study's MLflow parent run (found or made) in its tracking."""
    if not _mlflow_on(experiment):
        return experiment
    assert experiment.tracking is not None
    name = experiment_tracking.mlflow_experiment_name(experiment, experiment.tracking)
    parent = {'tracking_uri': experiment_tracking.mlflow_uri(experiment.tracking),
              'experiment_name': name, 'run_name': study.study_name,
              'run_key': 'study-' + study_id,
              'tags': {STUDY_TAG: study_id, 'study': study.study_name}}
    try:
        run_id = find_or_create_run(_client(experiment), parent)
    except Exception as error:
        logger.warning('search: the MLflow parent run of study %r could not be made (%s: %s); '
                       'its trials log as runs of their own', study.study_name,
                       type(error).__name__, error)
        return settings.replace(experiment, tracking=dict(experiment.tracking,
                                                          mlflow_experiment=name))
    return settings.replace(experiment, tracking=dict(
        experiment.tracking, mlflow_experiment=name, parent_run_id=run_id))


def trial_tracking(experiment: Experiment, trial: optuna.Trial, folder: str
                   ) -> dict[str, Any] | None:
    """The tracking of ``trial``'s run: a child of the study's run, tagged with the study and
    trial numbers and the trial's folder, named after the trial."""
    if experiment.tracking is None:
        return None
    tags = {'study': trial.study.study_name, 'trial': str(trial.number), FOLDER_TAG: folder}
    if experiment.tracking.get('parent_run_id'):
        tags[PARENT_TAG] = experiment.tracking['parent_run_id']
    return experiment_tracking.sub_run(experiment, 'trial_{}'.format(trial.number), tags=tags)


def mark_trial(experiment: Experiment, folder: str, state: str) -> None:
    """Tags the MLflow run of the trial trained in ``folder`` with ``state`` (``COMPLETE``,
    ``PRUNED``, ``FAIL``); a pruned one ends ``KILLED``."""
    if not _mlflow_on(experiment):
        return
    assert experiment.tracking is not None
    try:
        client = _client(experiment)
        found = client.get_experiment_by_name(
            experiment_tracking.mlflow_experiment_name(experiment, experiment.tracking))
        runs = [] if found is None else client.search_runs(
            [found.experiment_id], "tags.`{}` = '{}'".format(FOLDER_TAG, folder))
        for run in runs:
            client.set_tag(run.info.run_id, STATE_TAG, state)
            if state == 'PRUNED':
                end_run(client, run.info.run_id, 'KILLED')
    except Exception as error:
        logger.warning('search: the MLflow run of trial folder %r could not be marked %s '
                       '(%s: %s)', folder, state, type(error).__name__, error)
