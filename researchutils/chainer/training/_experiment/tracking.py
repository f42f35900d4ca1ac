"""The experiment's ``tracking`` setting: which trackers a run reports to, and their extensions.

``tracking`` turns on :class:`~researchutils.chainer.training.extensions.TensorBoardReport`
(event files in each run's ``tensorboard`` folder: one per fold of a k-fold, one per
trial of a search) and :class:`~researchutils.chainer.training.extensions.MLflowReport`
(one MLflow run per run, fold or trial, in the MLflow experiment named after the
experiment). :func:`check_tracking` keeps it as plain data (it is saved in
``experiment.json``); the search adds what its trials need (the parent run, the study and
trial tags, the run name) under :data:`TRIAL_KEYS`, which the user does not give.
:func:`extensions` builds the extensions of one run for the trainer (``trainer.py``).
Tests: ``tests/chainer/training/_experiment/test_tracking.py``.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from researchutils.chainer.training.extensions.mlflow_report import MLflowReport
from researchutils.chainer.training.extensions.tensorboard_report import TensorBoardReport

if TYPE_CHECKING:
    from researchutils.chainer.training._experiment.protocol import Experiment

TRACKERS = ('tensorboard', 'mlflow')
USER_KEYS = ('tensorboard', 'mlflow', 'mlflow_experiment')
# Set by the search for its trials (objective.py), never by the user.
TRIAL_KEYS = ('parent_run_id', 'run_name', 'tags')
TENSORBOARD_FOLDER = 'tensorboard'


def check_tracking(tracking: object) -> dict[str, Any] | None:
    """``tracking`` as kept: None (no tracking) or ``{"tensorboard": bool, "mlflow": False,
    True (MLflow's default tracking URI) or a tracking URI, "mlflow_experiment": str or
    None}``, with the search's keys when it set them.

    ``"tensorboard"`` and ``"mlflow"`` are shorthands for that tracker alone; a list of them
    turns on both.

    Example:
        >>> check_tracking('tensorboard')
        {'tensorboard': True, 'mlflow': False, 'mlflow_experiment': None}
        >>> check_tracking({'mlflow': 'http://127.0.0.1:5000'})['mlflow']
        'http://127.0.0.1:5000'
    """
    if tracking is None:
        return None
    message = ("tracking must be None, 'tensorboard', 'mlflow', a list of them, or a dict "
               "with 'tensorboard' (bool), 'mlflow' (bool or a tracking URI) and "
               "'mlflow_experiment' (str), got {!r}".format(tracking))
    if isinstance(tracking, str):
        tracking = [tracking]
    if isinstance(tracking, (list, tuple)):
        if not tracking or not all(isinstance(name, str) and name in TRACKERS
                                   for name in tracking):
            raise ValueError(message)
        tracking = {name: True for name in tracking}
    if not isinstance(tracking, dict) or not set(tracking) <= set(USER_KEYS + TRIAL_KEYS):
        raise TypeError(message) if not isinstance(tracking, dict) else ValueError(message)
    kept: dict[str, Any] = {'tensorboard': tracking.get('tensorboard', False),
                            'mlflow': tracking.get('mlflow', False),
                            'mlflow_experiment': tracking.get('mlflow_experiment')}
    if not isinstance(kept['tensorboard'], bool):
        raise TypeError(message)
    mlflow = kept['mlflow']
    if not (isinstance(mlflow, bool) or (isinstance(mlflow, str) and mlflow)):
        raise TypeError(message)
    experiment_name = kept['mlflow_experiment']
    if experiment_name is not None and not (isinstance(experiment_name, str)
                                            and experiment_name):
        raise TypeError(message)
    if not kept['tensorboard'] and not kept['mlflow']:
        raise ValueError(message + ': it turns no tracker on (None does that)')
    kept.update((key, tracking[key]) for key in TRIAL_KEYS if key in tracking)
    return kept


def mlflow_experiment_name(experiment: Experiment, tracking: dict[str, Any]) -> str:
    """The MLflow experiment of ``experiment``'s runs: the one given, else its name."""
    return str(tracking.get('mlflow_experiment') or experiment.name.replace(os.sep, '/'))


def sub_run(experiment: Experiment, run_name: str, **trial: Any) -> dict[str, Any] | None:
    """The tracking of a run within ``experiment`` (a fold, a combination of a grid, a
    trial): in the MLflow experiment of ``experiment``, under its own run name, with the
    search's ``trial`` keys (``parent_run_id``, ``tags``)."""
    tracking = experiment.tracking
    if tracking is None:
        return None
    return dict(tracking, mlflow_experiment=mlflow_experiment_name(experiment, tracking),
                run_name=run_name, **trial)


def mlflow_uri(tracking: dict[str, Any]) -> str | None:
    uri = tracking['mlflow']
    return uri if isinstance(uri, str) else None


def extensions(experiment: Experiment) -> list[Any]:
    """The tracking extensions of one run of ``experiment`` (rank 0's), to follow its
    LogReport."""
    tracking = experiment.tracking
    if tracking is None:
        return []
    built: list[Any] = []
    if tracking['tensorboard']:
        built.append(TensorBoardReport(TENSORBOARD_FOLDER, parameters=experiment.params,
                                       step='epoch'))
    if tracking['mlflow']:
        built.append(MLflowReport(
            mlflow_uri(tracking), mlflow_experiment_name(experiment, tracking),
            run_name=tracking.get('run_name') or os.path.basename(experiment.output_dir),
            parameters=experiment.params, tags=tracking.get('tags'),
            parent_run_id=tracking.get('parent_run_id'), step='epoch'))
    return built
