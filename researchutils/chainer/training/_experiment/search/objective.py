"""A search's trials: the objective Optuna calls, and the ChainerMN ranks that follow it.

Each trial is an experiment of its own (the chosen parameters, a ChainerPruningExtension
reporting ``val/<val_score_key>`` each epoch) in its own folder (``folders.py``), scored
by ``val_score_key`` on ``val``; a trial whose training diverged or whose score is NaN ends
PRUNED with the reason in its ``diverged`` user attribute. ``n_trials`` counts the study's
finished and running trials, whoever runs them: a process that asks for a trial when the
others took the last one marks it ``surplus`` and stops. Under ChainerMN rank 0 runs the
objective and broadcasts each trial (number, choice, folder) to the other ranks, which
train it with rank 0 and learn the end of the search the same way.

A retry (``retries.py``) trains in the folder of the trials it retries, when the lineage
lets it take that folder up (``folders.py``), and the experiment's ``run`` resumes from the
newest snapshot there; its pruning reports go on from the epoch resumed, and its user
attribute ``resumed_at`` records the iteration and epoch it resumed at. A duplicate retry
ends at once, marked ``surplus`` and ``duplicate_of`` the trial that took the series up. A
trial stopped by a signal (``Preempted``: the snapshot is written, the process exits with
status 75) is failed and retried before the process exits, so that any worker takes it up.
Tests: ``tests/chainer/training/test_search.py``, ``test_search_resume.py`` and
``test_search_mpi.py``.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import chainer
import optuna

from researchutils.chainer.training import _ownership
from researchutils.chainer.training._experiment import settings as _experiment_settings
from researchutils.chainer.training._experiment.model_selection import score_model
from researchutils.chainer.training._experiment.search import folders, retries, studies, tracking
from researchutils.chainer.training.extensions.chainer_pruning_extension import (
    ChainerPruningExtension,
)
from researchutils.chainer.training.extensions.preemption_snapshot import Preempted
from researchutils.chainer.training.extensions.stop_on_non_number import TrainingDiverged

if TYPE_CHECKING:
    from researchutils.chainer.data_loading import DataManager
    from researchutils.chainer.training._experiment.protocol import Experiment
    from researchutils.chainer.training._experiment.search.space import Space
    from researchutils.chainer.training.parameters import Parameters

_COUNTED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
            optuna.trial.TrialState.RUNNING)


class SurplusTrial(Exception):
    """A trial asked for when the study already had n_trials finished or running.

    Args:
        message (str): Why the trial is not run.
        number (int): The trial's number.
    """

    def __init__(self, message: str, number: int) -> None:
        super().__init__(message)
        self.number = number


class DuplicateRetry(SurplusTrial):
    """A second retry of failed trials that another retry took up already."""


class _ResumePoint(chainer.training.Extension):
    """Records on the trial the iteration and epoch its Trainer resumed at (from a
    snapshot of its folder), when it did not start at the beginning."""

    trigger = 1, 'epoch'

    def __init__(self, trial: optuna.Trial | None) -> None:
        self._trial = trial

    def initialize(self, trainer: chainer.training.Trainer) -> None:
        updater = trainer.updater
        if self._trial is not None and updater.iteration > 0:
            self._trial.set_user_attr('resumed_at', {'iteration': updater.iteration,
                                                     'epoch': updater.epoch})

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        pass


def surplus(trial: optuna.trial.FrozenTrial) -> bool:
    # User attributes come from whoever shares the study: only a plain True counts.
    return trial.user_attrs.get('surplus') is True


def _taken(study: optuna.Study, before: int) -> int:
    """How many trials numbered below ``before`` finished or run (surplus ones left out)."""
    return sum(1 for trial in study.get_trials(deepcopy=False, states=_COUNTED)
               if trial.number < before and not surplus(trial))


def _trial_run(experiment: Experiment, params: Parameters, folder: str,
               trial: optuna.Trial | None) -> Experiment:
    """The experiment of a trial: its folder, its parameters, the pruning extension (on every
    ChainerMN rank, which it keeps in step; only rank 0 holds the trial)."""
    key = experiment.val_score_key
    assert key is not None  # search refuses an experiment without one, on every rank
    pruning = ChainerPruningExtension(trial, 'val/' + key, (1, 'epoch'), comm=experiment.comm)
    # The search gave the folder to this trial already: a retry waits for the claim of the
    # run it takes over from (another host's, whose heartbeat stopped) to expire.
    # Only rank 0 (which holds the trial) tracks.
    return _experiment_settings.replace(
        experiment, params=params,
        extensions=list(experiment.extensions) + [pruning, _ResumePoint(trial)],
        name=os.path.join(experiment.name, folder),
        wait_for_folder=max(experiment.wait_for_folder, _ownership.GRACE_PERIOD),
        tracking=None if trial is None else tracking.trial_tracking(experiment, trial, folder))


def _take_folder(experiment: Experiment, study: optuna.Study, study_id: str,
                 trial: optuna.Trial) -> str:
    """The folder ``trial`` trains in, within the experiment's: for a retry, the folder of
    the trials it retries when it may take it up; else a new folder of its own."""
    output_dir, name = experiment.output_dir, study.study_name
    chain = retries.failed_chain(study, trial.number)
    if chain:
        series = [failed.number for failed in chain]
        taken, other = folders.take_up(output_dir, name, study_id, series, trial.number)
        if not taken:
            trial.set_user_attr('surplus', True)
            trial.set_user_attr('duplicate_of', other)
            raise DuplicateRetry('trial {} retries trial {}, which {} took up already'.format(
                trial.number, series[-1], 'another trial' if other is None else
                'trial {}'.format(other)), trial.number)
        path = folders.retried_folder(output_dir, name, study_id, chain)
        if path is not None:
            folder = os.path.relpath(path, output_dir).replace(os.sep, '/')
            trial.set_user_attr(folders.STUDY_ID_ATTR, study_id)
            trial.set_user_attr(folders.FOLDER_ATTR, folder)
            folders.hand_over(path, name, study_id, folders.maker_of(path), trial.number)
            return folder
    folder = folders.relative_folder(study_id, trial.number)
    trial.set_user_attr(folders.STUDY_ID_ATTR, study_id)
    trial.set_user_attr(folders.FOLDER_ATTR, folder)
    folders.claim(os.path.join(output_dir, folder),
                  folders.owner(name, study_id, trial.number))
    return folder


def objective(experiment: Experiment, space: Space, train: DataManager, val: DataManager,
              n_trials: int | None) -> Callable[[optuna.Trial], float]:
    """The function ``study.optimize`` calls for each trial (in one process, or rank 0)."""
    key = experiment.val_score_key

    def run_trial(trial: optuna.Trial) -> float:
        study = trial.study
        trial.set_user_attr(retries.WORKER_ATTR, retries.worker(trial.number))
        retries.fail_dead_trials(study)
        if n_trials is not None and _taken(study, trial.number) >= n_trials:
            # Another process took the last trial between our count and our ask.
            trial.set_user_attr('surplus', True)
            study.stop()
            raise SurplusTrial('the study has its n_trials={} trials already'.format(n_trials),
                               trial.number)
        params = experiment.params.choose(space.suggest(trial))
        folder = _take_folder(experiment, study, studies.study_id(study), trial)
        if experiment.comm is not None:
            experiment.comm.bcast_obj(('trial', folder, params.choice), root=0)
        run = _trial_run(experiment, params, folder, trial)
        try:
            model = run.run(train, val)
        except TrainingDiverged as error:
            trial.set_user_attr('diverged', str(error))
            tracking.mark_trial(experiment, folder, 'PRUNED')
            raise optuna.TrialPruned('trial {} diverged: {}'.format(trial.number, error)
                                     ) from error
        except optuna.TrialPruned:
            tracking.mark_trial(experiment, folder, 'PRUNED')
            raise
        except Preempted:
            # The snapshot is written and this process exits: the retry is enqueued now,
            # for any worker, rather than after a heartbeat's grace period.
            retries.fail_and_retry(study, trial)
            raise
        except Exception:
            tracking.mark_trial(experiment, folder, 'FAIL')
            raise
        score = score_model(run, model, val, params.training)
        if math.isnan(score):
            trial.set_user_attr('diverged', '{} is NaN'.format(key))
            tracking.mark_trial(experiment, folder, 'PRUNED')
            raise optuna.TrialPruned('trial {}: {} is NaN'.format(trial.number, key))
        tracking.mark_trial(experiment, folder, 'COMPLETE')
        return score
    return run_trial


def follow(experiment: Experiment, train: DataManager, val: DataManager
           ) -> dict[str, Any]:
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


def end_followers(experiment: Experiment, summary: dict[str, Any] | None) -> None:
    """Rank 0 tells the other ranks the search ended: the summary (without the study), or
    None when it stopped with an error."""
    experiment.comm.bcast_obj(('end', None if summary is None else dict(summary, study=None)),
                              root=0)
