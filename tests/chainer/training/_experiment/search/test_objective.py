"""A search's trials, run in this process by the objective Optuna calls: each trains in its
folder and is scored, pruned when it diverges, stopped as surplus past ``n_trials``, and a
retry takes up the folder of the trial it retries (or ends as a duplicate)."""
import json
import math
import os
import re
import signal

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import _ownership
from researchutils.chainer.training._experiment import settings as experiment_settings
from researchutils.chainer.training._experiment.search import (
    folders,
    objective,
    retries,
    studies,
    tracking,
)
from researchutils.chainer.training._experiment.search.space import Space
from researchutils.chainer.training.extensions.preemption_snapshot import Preempted
from tests.chainer.training import search_tasks, tasks

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

NAME = 'search'
# lr=100 diverges on purpose: NumPy computes inf and NaN in its forward and update.
DIVERGING = 100.0
# The task's batches: 128 training samples in batches of 32.
ITERATIONS_PER_EPOCH = 4


class DieAfterEpoch(chainer.training.Extension):
    """Raises RuntimeError at the first iteration after epoch ``epoch`` (whose snapshot is
    written), as a worker that dies there."""

    trigger = 1, 'iteration'

    def __init__(self, epoch):
        self.epoch = epoch

    def __call__(self, trainer):
        if trainer.updater.iteration > self.epoch * ITERATIONS_PER_EPOCH:
            raise RuntimeError('the worker dies after epoch {}'.format(self.epoch))


class SignalAt(chainer.training.Extension):
    """Sends this process ``signal_number`` at iteration ``iteration``, as a cluster's
    scheduler does to preempt a job."""

    trigger = 1, 'iteration'

    def __init__(self, iteration, signal_number=signal.SIGTERM):
        self.iteration, self.signal_number = iteration, signal_number

    def __call__(self, trainer):
        if trainer.updater.iteration == self.iteration:
            os.kill(os.getpid(), self.signal_number)


def nan_metric(pred, label):
    """A validation metric that is NaN, whatever the model predicts."""
    return math.nan


def _numbers(message):
    """The numbers a message names."""
    return {int(number) for number in re.findall('[0-9]+', message)}


def _experiment(tmp_path, learning_rates=(0.01,), num_epochs=1, extensions=(), **training):
    params = search_tasks.search_params(num_epochs, list(learning_rates))
    if training:
        params = tasks.make_params(
            num_epochs=num_epochs, optimizer_cls=chainer.optimizers.SGD, optimizer_params={},
            variable={'training': {'optimizer_params': {'lr': list(learning_rates)}}},
            **training)
    return search_tasks.search_experiment(str(tmp_path), params, extensions=extensions)


def _objective(experiment, n_trials=None):
    return objective.objective(experiment, Space(experiment.params),
                               *search_tasks.search_managers(), n_trials)


def _study():
    return optuna.create_study(study_name=NAME, pruner=optuna.pruners.NopPruner())


def _folder(experiment, trial):
    return os.path.join(experiment.output_dir, trial.user_attrs[folders.FOLDER_ATTR])


def _record(folder):
    with open(os.path.join(folder, folders.OWNER_FILE), encoding='utf-8') as stream:
        return json.load(stream)


# -- A trial -----------------------------------------------------------------------------

def test_a_trial_trains_in_its_own_folder_and_returns_its_validation_score(tmp_path):
    experiment, study = _experiment(tmp_path), _study()
    trial = study.ask()
    score = _objective(experiment)(trial)
    frozen = study.trials[0]
    study_id = studies.study_id(study)
    assert frozen.user_attrs[folders.STUDY_ID_ATTR] == study_id
    assert frozen.user_attrs[folders.FOLDER_ATTR] == folders.relative_folder(study_id, 0)
    folder = _folder(experiment, frozen)
    assert _record(folder) == folders.owner(NAME, study_id, 0)
    # It trained there, with the chosen learning rate, reporting its score each epoch.
    log = tasks.read_log(folder)
    assert [entry['epoch'] for entry in log] == [1]
    assert frozen.intermediate_values == {1: pytest.approx(log[-1]['val/MSE'])}
    assert math.isfinite(score) and score == pytest.approx(log[-1]['val/MSE'])
    assert frozen.params == {search_tasks.LR_KEY: 0.01}
    assert 'resumed_at' not in frozen.user_attrs
    worker = frozen.user_attrs[retries.WORKER_ATTR]
    assert worker == retries.worker(0)
    assert worker['pid'] == os.getpid() and worker['trial'] == 0


def test_trials_train_the_parameters_chosen_for_them(tmp_path):
    experiment = _experiment(tmp_path, learning_rates=(0.01, 0.03))
    study = optuna.create_study(study_name=NAME, sampler=optuna.samplers.GridSampler(
        {search_tasks.LR_KEY: [0.01, 0.03]}))
    study.optimize(_objective(experiment), n_trials=2)
    scores = {trial.params[search_tasks.LR_KEY]: trial.value for trial in study.trials}
    assert sorted(scores) == [0.01, 0.03]
    # The higher rate learns faster: the trials did not train one and the same model.
    assert scores[0.03] < scores[0.01]
    first, second = (_folder(experiment, trial) for trial in study.trials)
    assert first != second and os.path.isdir(first) and os.path.isdir(second)


def test_a_diverged_trial_is_pruned_with_its_reason(tmp_path):
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    with np.errstate(over='ignore', invalid='ignore'):
        study.optimize(_objective(experiment), n_trials=1)
    trial, = study.trials
    assert trial.state == optuna.trial.TrialState.PRUNED
    assert 'diverged' in trial.user_attrs['diverged']
    assert os.path.isdir(_folder(experiment, trial))


def test_a_diverged_trial_is_pruned_naming_itself_and_the_divergence(tmp_path):
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    for _ in range(12):
        study.ask()  # held by other workers
    trial = study.ask()
    with pytest.raises(optuna.TrialPruned) as raised, np.errstate(over='ignore',
                                                                  invalid='ignore'):
        _objective(experiment)(trial)
    message = str(raised.value)
    assert 12 in _numbers(message)
    assert study.trials[12].user_attrs['diverged'] in message


def test_a_trial_whose_score_is_nan_is_pruned_naming_the_key(tmp_path):
    experiment = _experiment(tmp_path, val_metrics={'MSE': nan_metric})
    study = _study()
    for _ in range(12):
        study.ask()  # held by other workers
    with pytest.raises(optuna.TrialPruned) as raised:
        _objective(experiment)(study.ask())
    assert 'MSE' in study.trials[12].user_attrs['diverged']
    assert 'NaN' in study.trials[12].user_attrs['diverged']
    message = str(raised.value)
    assert 12 in _numbers(message) and 'MSE' in message and 'NaN' in message


def test_a_failing_trial_raises_its_error_and_keeps_its_folder(tmp_path):
    experiment = _experiment(tmp_path, num_epochs=2, extensions=[DieAfterEpoch(1)])
    study = _study()
    with pytest.raises(RuntimeError, match='dies after epoch 1'):
        _objective(experiment)(study.ask())
    frozen = study.trials[0]
    assert 'diverged' not in frozen.user_attrs
    assert os.path.isfile(os.path.join(_folder(experiment, frozen), 'snapshot_epoch_1'))


# -- n_trials ----------------------------------------------------------------------------

_STATES = optuna.trial.TrialState


def _add(study, state, **user_attrs):
    study.add_trial(optuna.trial.create_trial(
        state=state, user_attrs=user_attrs,
        **({'value': 1.0} if state == _STATES.COMPLETE else {})))


def _run_until_stopped(experiment, study, n_trials):
    """Optimizes as the search does (surplus trials caught) for at most 3 more trials; the
    new trials."""
    before = len(study.trials)
    with np.errstate(over='ignore', invalid='ignore'):
        study.optimize(_objective(experiment, n_trials), n_trials=3,
                       catch=(objective.SurplusTrial,))
    return study.trials[before:]


def test_a_trial_past_n_trials_is_surplus_and_stops_the_search(tmp_path):
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    _add(study, _STATES.COMPLETE)
    new, = _run_until_stopped(experiment, study, n_trials=1)
    assert new.state == _STATES.FAIL
    assert new.user_attrs['surplus'] is True
    assert folders.FOLDER_ATTR not in new.user_attrs


def test_a_surplus_trial_names_n_trials(tmp_path):
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    for _ in range(12):
        _add(study, _STATES.COMPLETE)
    with pytest.raises(objective.SurplusTrial) as raised:
        study.optimize(_objective(experiment, n_trials=12), n_trials=1)
    assert 12 in _numbers(str(raised.value))
    assert study.trials[-1].user_attrs['surplus'] is True


def test_n_trials_counts_finished_and_running_trials_but_not_surplus_or_failed(tmp_path):
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    _add(study, _STATES.COMPLETE)
    _add(study, _STATES.PRUNED)
    _add(study, _STATES.RUNNING)
    _add(study, _STATES.FAIL)
    _add(study, _STATES.PRUNED, surplus=True)
    _add(study, _STATES.FAIL, surplus=True)
    # Three taken: the fourth trial runs, and the fifth is surplus.
    first, second = _run_until_stopped(experiment, study, n_trials=4)
    assert first.state == _STATES.PRUNED and 'surplus' not in first.user_attrs
    assert second.state == _STATES.FAIL and second.user_attrs['surplus'] is True


@pytest.mark.parametrize('marked', [1, 'true', [True], {'surplus': True}])
def test_only_a_plain_true_marks_a_trial_surplus(tmp_path, marked):
    # User attributes come from whoever shares the study.
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    _add(study, _STATES.PRUNED, surplus=marked)
    assert not objective.surplus(study.trials[0])
    new, = _run_until_stopped(experiment, study, n_trials=1)
    assert new.user_attrs['surplus'] is True


def test_trials_numbered_after_a_trial_are_not_counted_against_it(tmp_path):
    # Trial 0 was asked for first; trial 1, asked for since, runs elsewhere: trial 0 is
    # within n_trials=1 and runs.
    experiment, study = _experiment(tmp_path, learning_rates=(DIVERGING,)), _study()
    trial = study.ask()
    study.ask()
    with pytest.raises(optuna.TrialPruned), np.errstate(over='ignore', invalid='ignore'):
        _objective(experiment, n_trials=1)(trial)
    assert 'surplus' not in study.trials[0].user_attrs


# -- Retries -----------------------------------------------------------------------------

def _failed_and_retried(tmp_path, study):
    """Trial 0 of ``study`` trains 1 of 2 epochs and its worker dies; it is failed and a
    retry enqueued, as for a dead worker. The experiment of 2 epochs."""
    dying = _experiment(tmp_path, num_epochs=2, extensions=[DieAfterEpoch(1)])
    trial = study.ask()
    with pytest.raises(RuntimeError):
        _objective(dying)(trial)
    retries.fail_and_retry(study, trial)
    return _experiment(tmp_path, num_epochs=2)


def test_a_retry_resumes_in_the_folder_of_the_trial_it_retries(tmp_path):
    study = _study()
    experiment = _failed_and_retried(tmp_path, study)
    folder = _folder(experiment, study.trials[0])
    retry = study.ask()
    assert retry.number == 1
    score = _objective(experiment)(retry)
    frozen = study.trials[1]
    assert _folder(experiment, frozen) == folder
    assert frozen.user_attrs[folders.FOLDER_ATTR] == study.trials[0].user_attrs[
        folders.FOLDER_ATTR]
    assert frozen.user_attrs[folders.STUDY_ID_ATTR] == studies.study_id(study)
    assert _record(folder) == folders.owner(NAME, studies.study_id(study), 0, 1)
    assert frozen.user_attrs['resumed_at'] == {'iteration': ITERATIONS_PER_EPOCH, 'epoch': 1}
    # It trained the second epoch only, there, and is scored by it.
    log = tasks.read_log(folder)
    assert [entry['epoch'] for entry in log] == [1, 2]
    assert frozen.intermediate_values == {2: pytest.approx(log[-1]['val/MSE'])}
    assert score == pytest.approx(log[-1]['val/MSE'])
    # No folder of its own was made.
    assert sorted(os.listdir(os.path.dirname(folder))) == sorted([os.path.basename(folder),
                                                                  folders.RETRIES_FOLDER])


def test_a_retry_of_a_trial_that_took_no_folder_trains_in_its_own(tmp_path):
    experiment, study = _experiment(tmp_path), _study()
    retries.fail_and_retry(study, study.ask())
    retry = study.ask()
    _objective(experiment)(retry)
    frozen = study.trials[1]
    study_id = studies.study_id(study)
    assert frozen.user_attrs[folders.FOLDER_ATTR] == folders.relative_folder(study_id, 1)
    assert _record(_folder(experiment, frozen)) == folders.owner(NAME, study_id, 1)
    assert 'resumed_at' not in frozen.user_attrs


@pytest.mark.parametrize('other', [7, None])
def test_a_second_retry_of_a_trial_is_a_duplicate_and_trains_nothing(tmp_path, other):
    study = _study()
    experiment = _failed_and_retried(tmp_path, study)
    folder = _folder(experiment, study.trials[0])
    study_id = studies.study_id(study)
    # Another process's retry took trial 0 up already (its file unreadable, for None).
    if other is None:
        lineage = os.path.join(os.path.dirname(folder), folders.RETRIES_FOLDER)
        os.makedirs(lineage)
        with open(os.path.join(lineage, 'trial_0_1.json'), 'w', encoding='utf-8') as stream:
            stream.write('{')
    else:
        assert folders.take_up(experiment.output_dir, NAME, study_id, [0], other)[0]
    retry = study.ask()
    with pytest.raises(objective.DuplicateRetry) as raised:
        _objective(experiment)(retry)
    assert isinstance(raised.value, objective.SurplusTrial)
    # It names itself, the trial it retries, and the retry that took it up when known.
    message = str(raised.value)
    assert _numbers(message) == {retry.number, 0} | ({other} if other is not None else set())
    assert 'None' not in message
    frozen = study.trials[retry.number]
    assert frozen.user_attrs['surplus'] is True
    assert frozen.user_attrs['duplicate_of'] == other
    assert folders.FOLDER_ATTR not in frozen.user_attrs
    assert _record(folder) == folders.owner(NAME, study_id, 0)
    assert [entry['epoch'] for entry in tasks.read_log(folder)] == [1]


def test_a_retry_trains_when_its_lineage_was_written_for_it(tmp_path):
    # A retry of trial 0 and of this retry wrote this retry's lineage file on its behalf.
    study = _study()
    experiment = _failed_and_retried(tmp_path, study)
    retry = study.ask()
    assert folders.take_up(experiment.output_dir, NAME, studies.study_id(study), [0],
                           retry.number)[0]
    _objective(experiment)(retry)
    assert _folder(experiment, study.trials[retry.number]) == _folder(experiment,
                                                                      study.trials[0])
    assert 'surplus' not in study.trials[retry.number].user_attrs


def test_a_preempted_trial_is_retried_at_once_and_the_retry_resumes_where_it_stopped(
        tmp_path):
    study = _study()
    preempted = _experiment(tmp_path, extensions=[SignalAt(1)])
    with pytest.raises(Preempted):
        _objective(preempted)(study.ask())
    # Failed, and its retry waits for any worker.
    assert [trial.state for trial in study.trials] == [_STATES.FAIL, _STATES.WAITING]
    retry = study.ask()
    assert retry.number == 1 and retries.history(study.trials[1]) == [0]
    experiment = _experiment(tmp_path)
    _objective(experiment)(retry)
    first, frozen = study.trials
    assert _folder(experiment, frozen) == _folder(experiment, first)
    assert frozen.user_attrs['resumed_at'] == {'iteration': 1, 'epoch': 0}
    assert frozen.state == _STATES.RUNNING  # the caller, Optuna, tells its score


# -- A trial's run -----------------------------------------------------------------------

@pytest.mark.parametrize('wait', [0.0, _ownership.GRACE_PERIOD + 30])
def test_a_trial_run_waits_at_least_the_grace_of_the_run_it_takes_over(tmp_path, wait):
    experiment = experiment_settings.replace(_experiment(tmp_path), wait_for_folder=wait)
    study = _study()
    trial = study.ask()
    params = experiment.params.choose(Space(experiment.params).suggest(trial))
    run = objective._trial_run(experiment, params, 'study_0123abcd/trial_0', trial)
    assert run.wait_for_folder == max(wait, _ownership.GRACE_PERIOD)
    assert run.output_dir == os.path.join(experiment.output_dir, 'study_0123abcd/trial_0')
    assert run.params.choice == params.choice
    assert list(run.extensions[:len(experiment.extensions)]) == list(experiment.extensions)
    assert run.tracking is None


def test_a_trial_run_is_tracked_as_the_trial_in_its_folder(tmp_path):
    experiment = tasks.experiment(tmp_path, search_tasks.search_params(1, [0.01]),
                                  val_score_key='MSE', tracking={'tensorboard': True})
    study = _study()
    for _ in range(3):
        study.ask()
    trial = study.ask()
    params = experiment.params.choose(Space(experiment.params).suggest(trial))
    run = objective._trial_run(experiment, params, 'study_0123abcd/trial_3', trial)
    assert run.tracking['run_name'] == 'trial_3'
    assert run.tracking['tags']['trial'] == '3'
    assert run.tracking['tags'][tracking.FOLDER_TAG] == 'study_0123abcd/trial_3'


def test_a_tracked_trial_writes_its_tensorboard_folder_in_its_own(tmp_path):
    pytest.importorskip('tensorboardX')
    experiment = tasks.experiment(tmp_path, search_tasks.search_params(1, [0.01]),
                                  val_score_key='MSE', tracking={'tensorboard': True})
    study = _study()
    _objective(experiment)(study.ask())
    assert os.path.isdir(os.path.join(_folder(experiment, study.trials[0]), 'tensorboard'))


class AlwaysPrune(optuna.pruners.BasePruner):
    """Prunes every trial at its first report."""

    def prune(self, study, trial):
        return True


# MLflow's SQLAlchemy models use a loader strategy that SQLAlchemy 2.1 deprecates.
@pytest.mark.filterwarnings(
    'ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning')
@pytest.mark.slow
def test_each_trial_marks_its_mlflow_run_with_how_it_ended(tmp_path):
    # MLflow's own SQLite store, in this process: the marks are the same as on a server
    # (tests/chainer/training/test_tracking_mlflow.py runs the search against a real one),
    # without a server's start for each mutant of mutation testing.
    mlflow = pytest.importorskip('mlflow')
    uri = 'sqlite:///' + str(tmp_path / 'mlflow.db')
    name = 'objective'
    ends = {}
    for end, learning_rate, extensions, training, pruner in (
            ('COMPLETE', 0.01, (), {}, optuna.pruners.NopPruner()),
            ('diverged', DIVERGING, (), {}, optuna.pruners.NopPruner()),
            ('NaN', 0.01, (), {'val_metrics': {'MSE': nan_metric}}, optuna.pruners.NopPruner()),
            ('pruned', 0.01, (), {}, AlwaysPrune()),
            ('FAIL', 0.01, (DieAfterEpoch(1),), {}, optuna.pruners.NopPruner())):
        experiment = experiment_settings.replace(
            _experiment(tmp_path / end, learning_rates=(learning_rate,), num_epochs=2,
                        extensions=extensions, **training),
            tracking={'mlflow': uri, 'mlflow_experiment': name,
                      'tensorboard': False})
        study = optuna.create_study(study_name=end, pruner=pruner)
        with np.errstate(over='ignore', invalid='ignore'):
            study.optimize(_objective(experiment), n_trials=1, catch=(RuntimeError,))
        ends[end] = study.trials[0].user_attrs[folders.FOLDER_ATTR]
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    marked = {}
    for run in runs:
        marked.setdefault(run.data.tags['study'], []).append(
            (run.data.tags[tracking.FOLDER_TAG], run.data.tags.get('trial_state'),
             run.info.status))
    assert marked == {
        'COMPLETE': [(ends['COMPLETE'], 'COMPLETE', 'FINISHED')],
        'diverged': [(ends['diverged'], 'PRUNED', 'KILLED')],
        'NaN': [(ends['NaN'], 'PRUNED', 'KILLED')],
        'pruned': [(ends['pruned'], 'PRUNED', 'KILLED')],
        'FAIL': [(ends['FAIL'], 'FAIL', 'FAILED')]}
