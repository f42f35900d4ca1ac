"""ChainerExperiment.search: hyper-parameter search on Optuna, one experiment per trial.

Imported by :meth:`ChainerExperiment.search
<researchutils.chainer.training.ChainerExperiment.search>` only, once it has found Optuna
(the ``search`` extra), which these modules import at their top. One job per module:
``space`` (the variable parameters as Optuna suggestions, and back), ``studies`` (the
storage, its heartbeat, opening the study, its identity), ``retries`` (trials of dead
workers, failed and retried), ``folders`` (which folder belongs to which trial, and which
retry takes one up), ``objective`` (a trial's run and the ChainerMN exchange) and
``summary`` (``search.json`` and the figures). Here: the checks of the arguments and
the search in one process or on each ChainerMN rank. What a search does is told in
``docs/tutorials/search.rst``. Tests: ``tests/chainer/training/test_search.py`` and
``test_search_mpi.py``.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import optuna

from researchutils._checks import check_positive_float, check_positive_int
from researchutils.chainer.training._experiment.search import (
    full_study,
    objective,
    retries,
    studies,
    summary,
    tracking,
)
from researchutils.chainer.training._experiment.search.space import Space
from researchutils.chainer.training._ranks import is_rank_zero

if TYPE_CHECKING:
    from researchutils.chainer.data_loading import DataManager
    from researchutils.chainer.training._experiment.protocol import Experiment

_STATES = optuna.trial.TrialState


def _check_arguments(experiment: Experiment, val: DataManager | None,
                     n_trials: int | None, timeout: float | None,
                     sampler: optuna.samplers.BaseSampler | None,
                     pruner: optuna.pruners.BasePruner | None, storage: studies.Storage | None
                     ) -> tuple[int | None, float | None]:
    if experiment.val_score_key is None or val is None:
        raise ValueError('search scores each trial by the val_score_key metric on val: set '
                         'val_score_key and pass a validation manager')
    n_trials = check_positive_int(n_trials, 'n_trials', allow_none=True)
    timeout = check_positive_float(timeout, 'timeout', allow_none=True)
    if n_trials is None and timeout is None:
        raise ValueError('search needs n_trials or timeout (or both), or it would never end')
    if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
        raise TypeError('sampler must be None (TPE) or an optuna.samplers sampler, got '
                        '{!r}'.format(sampler))
    if pruner is not None and not isinstance(pruner, optuna.pruners.BasePruner):
        raise TypeError('pruner must be None (median pruning) or an optuna.pruners pruner, '
                        'got {!r}'.format(pruner))
    if storage is not None and not isinstance(storage, (str, optuna.storages.BaseStorage)):
        raise TypeError('storage must be None (an SQLite file in the experiment folder), an '
                        'Optuna storage URL or an optuna.storages storage, got {!r}'.format(
                            storage))
    return n_trials, timeout


def _check_heartbeat(storage: studies.Storage | None, heartbeat_interval: int | None,
                     grace_period: int | None) -> studies.Heartbeat:
    """``(heartbeat_interval, grace_period)`` checked: whole seconds, the grace longer than
    the interval, and given only for a storage the search builds (a URL or the default)."""
    heartbeat_interval = check_positive_int(heartbeat_interval, 'heartbeat_interval',
                                            allow_none=True)
    grace_period = check_positive_int(grace_period, 'grace_period', allow_none=True)
    if grace_period is not None:
        if heartbeat_interval is None:
            raise ValueError('grace_period={} needs a heartbeat: give heartbeat_interval too'
                             .format(grace_period))
        if grace_period <= heartbeat_interval:
            raise ValueError('grace_period={} must be longer than heartbeat_interval={}, or a '
                             'trial alive would be failed between two beats'.format(
                                 grace_period, heartbeat_interval))
    if isinstance(storage, optuna.storages.BaseStorage) and (
            heartbeat_interval != studies.HEARTBEAT_INTERVAL or grace_period is not None):
        raise ValueError('heartbeat_interval and grace_period set the heartbeat of a storage '
                         'the search builds from a URL (or the default file); the storage '
                         '{} given is used as it is: set its heartbeat where you build it'
                         .format(type(storage).__name__))
    return heartbeat_interval, grace_period


def search(experiment: Experiment, train: DataManager, val: DataManager, *,
           n_trials: int | None, timeout: float | None,
           sampler: optuna.samplers.BaseSampler | None, pruner: optuna.pruners.BasePruner | None,
           storage: studies.Storage | None,
           heartbeat_interval: int | None = studies.HEARTBEAT_INTERVAL,
           grace_period: int | None = None) -> dict[str, Any]:
    """:meth:`ChainerExperiment.search`, whose docstring says what each argument does."""
    n_trials, timeout = _check_arguments(experiment, val, n_trials, timeout, sampler, pruner,
                                         storage)
    heartbeat = _check_heartbeat(storage, heartbeat_interval, grace_period)
    studies.check_storage(storage)
    space = Space(experiment.params)
    summary.check_saveable(experiment)
    if not is_rank_zero(experiment.comm):
        return objective.follow(experiment, train, val)
    if experiment.comm is None:
        return _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner, storage,
                     heartbeat)
    result = None
    try:
        result = _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner,
                       storage, heartbeat)
    finally:
        # The other ranks wait for a trial or the end.
        objective.end_followers(experiment, result)
    return result


def _check_trials(study: optuna.Study, space: Space) -> None:
    """Refuses a study holding trials of another space, or values this space does not allow,
    before any trial trains."""
    for trial in study.get_trials(deepcopy=False):
        if not objective.surplus(trial):
            space.read(trial, study.study_name)


def _lead(experiment: Experiment, space: Space, train: DataManager, val: DataManager,
          n_trials: int | None, timeout: float | None,
          sampler: optuna.samplers.BaseSampler | None, pruner: optuna.pruners.BasePruner | None,
          storage: studies.Storage | None, heartbeat: studies.Heartbeat) -> dict[str, Any]:
    """The search in one process, or on ChainerMN rank 0, which asks Optuna."""
    with studies.opened_study(experiment, storage, sampler, pruner, heartbeat) as study:
        studies.study_id(study)  # stored now, when a new study has none, not at its first trial
        experiment = tracking.with_parent_run(experiment, study, studies.study_id(study))
        _check_trials(study, space)
        retries.fail_dead_trials(study)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            finished = len(study.get_trials(deepcopy=False, states=(_STATES.COMPLETE,
                                                                    _STATES.PRUNED)))
            left = None if deadline is None else deadline - time.monotonic()
            if (n_trials is not None and finished >= n_trials) or (left is not None
                                                                   and left <= 0):
                break
            # No count of this process's own: MaxTrialsCallback and the surplus trial end the
            # loop once the study has its n_trials, and a duplicate retry, which ends at once,
            # takes none of them.
            callbacks = [] if n_trials is None else [optuna.study.MaxTrialsCallback(
                n_trials, states=(_STATES.COMPLETE, _STATES.PRUNED))]
            with full_study.one_line_per_surplus_trial():
                study.optimize(objective.objective(experiment, space, train, val, n_trials),
                               timeout=left, catch=(objective.SurplusTrial,),
                               callbacks=callbacks)
            # The study's best is known once the trials others still run have ended.
            if n_trials is None or not full_study.wait_for_others(
                    study, n_trials, deadline, experiment.comm):
                break
        result = summary.summarize(experiment, study, space)
        summary.write_summary(experiment, study, result, studies.study_id(study))
        summary.write_figures(experiment, study)
    result['study'] = study
    return result
