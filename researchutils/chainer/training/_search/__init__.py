"""ChainerExperiment.search: hyper-parameter search on Optuna, one experiment per trial.

Imported by :meth:`ChainerExperiment.search
<researchutils.chainer.training.ChainerExperiment.search>` only, once it has found Optuna
(the ``search`` extra), which these modules import at their top. One job per module:
``space`` (the variable parameters as Optuna suggestions, and back), ``studies`` (the
storage, opening the study, its identity, trials of dead processes), ``folders`` (which
folder belongs to which trial), ``objective`` (a trial's run and the ChainerMN exchange)
and ``summary`` (``search.json`` and the figures). Here: the checks of the arguments and
the search in one process or on each ChainerMN rank. What a search does is told in
``docs/tutorials/search.rst``. Tests: ``tests/chainer/training/test_search.py`` and
``test_search_mpi.py``.
"""
import optuna

from researchutils._checks import check_positive_float, check_positive_int
from researchutils.chainer.training._search import objective, studies, summary
from researchutils.chainer.training._search.space import Space

_STATES = optuna.trial.TrialState


def _check_arguments(experiment, val, n_trials, timeout, sampler, pruner, storage):
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


def search(experiment, train, val, *, n_trials, timeout, sampler, pruner, storage):
    """:meth:`ChainerExperiment.search`, whose docstring says what each argument does."""
    n_trials, timeout = _check_arguments(experiment, val, n_trials, timeout, sampler, pruner,
                                         storage)
    space = Space(experiment.params)
    summary.check_saveable(experiment)
    if experiment.comm is not None and experiment.comm.rank != 0:
        return objective.follow(experiment, train, val)
    if experiment.comm is None:
        return _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner, storage)
    result = None
    try:
        result = _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner,
                       storage)
    finally:
        # The other ranks wait for a trial or the end.
        objective.end_followers(experiment, result)
    return result


def _check_trials(study, space):
    """Refuses a study holding trials of another space, or values this space does not allow,
    before any trial trains."""
    for trial in study.get_trials(deepcopy=False):
        if not objective.surplus(trial):
            space.read(trial, study.study_name)


def _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner, storage):
    """The search in one process, or on ChainerMN rank 0, which asks Optuna."""
    study = studies.open_study(experiment, storage, sampler, pruner)
    studies.study_id(study)  # stored now, when a new study has none, not at its first trial
    _check_trials(study, space)
    studies.fail_dead_trials(study)
    finished = len(study.get_trials(deepcopy=False, states=(_STATES.COMPLETE,
                                                            _STATES.PRUNED)))
    remaining = None if n_trials is None else n_trials - finished
    if remaining is None or remaining > 0:
        callbacks = [] if n_trials is None else [optuna.study.MaxTrialsCallback(
            n_trials, states=(_STATES.COMPLETE, _STATES.PRUNED))]
        study.optimize(objective.objective(experiment, space, train, val, n_trials),
                       n_trials=remaining, timeout=timeout, catch=(objective.SurplusTrial,),
                       callbacks=callbacks)
    result = summary.summarize(experiment, study, space)
    summary.write_summary(experiment, study, result, studies.study_id(study))
    summary.write_figures(experiment, study)
    result['study'] = study
    return result
