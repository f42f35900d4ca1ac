"""A search's trials: the objective Optuna calls, and the ChainerMN ranks that follow it.

Each trial is an experiment of its own (the chosen parameters, a ChainerPruningExtension
reporting ``val/<val_score_key>`` each epoch) in its own folder (``folders.py``), scored
by ``val_score_key`` on ``val``; a trial whose training diverged or whose score is NaN ends
PRUNED with the reason in its ``diverged`` user attribute. ``n_trials`` counts the study's
finished and running trials, whoever runs them: a process that asks for a trial when the
others took the last one marks it ``surplus`` and stops. Under ChainerMN rank 0 runs the
objective and broadcasts each trial (number, choice, folder) to the other ranks, which
train it with rank 0 and learn the end of the search the same way.
Tests: ``tests/chainer/training/test_search.py`` and ``test_search_mpi.py``.
"""
import math
import os

import optuna

from researchutils.chainer.training._experiment import settings as _experiment_settings
from researchutils.chainer.training._experiment.model_selection import score_model
from researchutils.chainer.training._search import folders, studies
from researchutils.chainer.training.extensions.chainer_pruning_extension import (
    ChainerPruningExtension,
)
from researchutils.chainer.training.extensions.stop_on_non_number import TrainingDiverged

_COUNTED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
            optuna.trial.TrialState.RUNNING)


class SurplusTrial(Exception):
    """A trial asked for when the study already had n_trials finished or running."""


def surplus(trial):
    # User attributes come from whoever shares the study: only a plain True counts.
    return trial.user_attrs.get('surplus') is True


def _taken(study, before):
    """How many trials numbered below ``before`` finished or run (surplus ones left out)."""
    return sum(1 for trial in study.get_trials(deepcopy=False, states=_COUNTED)
               if trial.number < before and not surplus(trial))


def _trial_run(experiment, params, folder, trial):
    """The experiment of a trial: its folder, its parameters, the pruning extension (on every
    ChainerMN rank, which it keeps in step; only rank 0 holds the trial)."""
    pruning = ChainerPruningExtension(trial, 'val/' + experiment.val_score_key, (1, 'epoch'),
                                      comm=experiment.comm)
    return _experiment_settings.replace(
        experiment, params=params, extensions=list(experiment.extensions) + [pruning],
        name=os.path.join(experiment.name, folder))


def objective(experiment, space, train, val, n_trials):
    """The function ``study.optimize`` calls for each trial (in one process, or rank 0)."""
    key = experiment.val_score_key

    def run_trial(trial):
        study = trial.study
        trial.set_user_attr('worker', studies.worker())
        studies.fail_dead_trials(study)
        if n_trials is not None and _taken(study, trial.number) >= n_trials:
            # Another process took the last trial between our count and our ask.
            trial.set_user_attr('surplus', True)
            study.stop()
            raise SurplusTrial('the study has its n_trials={} trials already'.format(n_trials))
        study_id = studies.study_id(study)
        folder = folders.relative_folder(study_id, trial.number)
        trial.set_user_attr(folders.STUDY_ID_ATTR, study_id)
        trial.set_user_attr(folders.FOLDER_ATTR, folder)
        params = experiment.params.choose(space.suggest(trial))
        folders.claim(os.path.join(experiment.output_dir, folder),
                      folders.owner(study.study_name, study_id, trial.number))
        if experiment.comm is not None:
            experiment.comm.bcast_obj(('trial', folder, params.choice), root=0)
        run = _trial_run(experiment, params, folder, trial)
        try:
            model = run.run(train, val)
        except TrainingDiverged as error:
            trial.set_user_attr('diverged', str(error))
            raise optuna.TrialPruned('trial {} diverged: {}'.format(trial.number, error)
                                     ) from error
        score = score_model(run, model, val, params.training)
        if math.isnan(score):
            trial.set_user_attr('diverged', '{} is NaN'.format(key))
            raise optuna.TrialPruned('trial {}: {} is NaN'.format(trial.number, key))
        return score
    return run_trial


def follow(experiment, train, val):
    """A ChainerMN rank other than 0: runs the trials rank 0 sends, until it sends the end."""
    comm = experiment.comm
    while True:
        message = comm.bcast_obj(None, root=0)
        if message[0] == 'end':
            if message[1] is None:
                raise RuntimeError('search: rank 0 stopped the search with an error (its '
                                   'traceback says which); rank {} stops too'.format(comm.rank))
            return message[1]
        _, folder, choice = message
        try:
            _trial_run(experiment, experiment.params.choose(choice), folder, None).run(
                train, val)
        except (TrainingDiverged, optuna.TrialPruned):
            pass  # rank 0 records it; every rank stopped at the same iteration


def end_followers(experiment, summary):
    """Rank 0 tells the other ranks the search ended: the summary (without the study), or
    None when it stopped with an error."""
    experiment.comm.bcast_obj(('end', None if summary is None else dict(summary, study=None)),
                              root=0)
