"""ChainerExperiment.search in this process: its arguments checked before anything is opened,
the heartbeat it gives a storage it builds, the study's trials checked before any trial
trains, dead trials retried first, the finished trials counted towards n_trials, timeout
alone, and what it returns and writes; real Optuna studies (in memory, or SQLite files in
tmp_path) and the tiny task of tests/chainer/training/search_tasks.py. The ChainerMN
search (its other ranks) is tested by tests/chainer/training/test_search_mpi.py."""
import json
import os
import re
import socket
import subprocess
import sys
import time

import chainer
import pytest

from researchutils.chainer.training._experiment.search import studies
from tests.chainer.training import search_tasks, tasks
from tests.support import search_studies

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

# A search that ends with fewer than two complete trials warns that it draws no parameter
# importances (tested by test_summary.py); these searches are about other things.
pytestmark = pytest.mark.filterwarnings(
    'ignore:search. search_importances.png is drawn from 2 finished trials:RuntimeWarning')

LR = search_tasks.LR_KEY
LEARNING_RATES = [0.01, 0.03, 0.1]
STATES = optuna.trial.TrialState
# More trials than any test here trains: a search that would not end fails at once.
TRIAL_BOUND = 4
# The age of a trial's last heartbeat in the heartbeat tests: past a grace period of three
# 2 s beats, within one of 30 s.
SILENT_SECONDS = 10


class TrialBound(chainer.training.Extension):
    """Fails the trial past ``limit`` trials of the search, so that a search that would run
    on (no n_trials and no timeout reaching it) stops the test rather than training on."""

    trigger = 1, 'epoch'

    def __init__(self, limit=TRIAL_BOUND):
        self.limit, self.trials = limit, 0

    def initialize(self, trainer):
        self.trials += 1
        if self.trials > self.limit:
            raise RuntimeError('the search started trial {} of at most {}'.format(
                self.trials, self.limit))

    def __call__(self, trainer):
        pass


class OutlastTrial(chainer.training.Extension):
    """Makes the first trial last ``seconds`` at least (the search's timeout): once it ends,
    the timeout has passed."""

    trigger = 1, 'iteration'

    def __init__(self, seconds):
        self.seconds, self.waited = seconds, False

    def __call__(self, trainer):
        if not self.waited:
            self.waited = True
            time.sleep(self.seconds)


class RecordingSampler(optuna.samplers.RandomSampler):
    """Optuna's random sampler, recording the study's id as each trial draws its value."""

    def __init__(self):
        super().__init__(seed=0)
        self.ids_seen = []

    def sample_independent(self, study, trial, param_name, param_distribution):
        self.ids_seen.append(study.user_attrs.get(studies.STUDY_ID_ATTR))
        return super().sample_independent(study, trial, param_name, param_distribution)


def _experiment(tmp_path, extensions=(), **kwargs):
    """The task's search over LEARNING_RATES, one epoch a trial, in ``tmp_path/exp``."""
    return tasks.experiment(tmp_path, search_tasks.search_params(1, LEARNING_RATES),
                            val_score_key=kwargs.pop('val_score_key', 'MSE'),
                            extensions=[TrialBound(), *extensions], **kwargs)


def _search(experiment, **kwargs):
    """``experiment.search`` on the task's batches; by default in a new in-memory study,
    without pruning."""
    kwargs.setdefault('storage', optuna.storages.InMemoryStorage())
    kwargs.setdefault('pruner', optuna.pruners.NopPruner())
    return experiment.search(*search_tasks.search_managers(), **kwargs)


def _study(storage):
    """The experiment's study in ``storage``, made beforehand."""
    return optuna.create_study(storage=storage, study_name='exp')


def _add(study, state, lr=0.01, name=LR, **user_attrs):
    """Adds a finished trial of ``state`` to ``study``: ``name=lr`` (a candidate of the
    space, or a value of another distribution), with ``user_attrs``."""
    distribution = (optuna.distributions.CategoricalDistribution(LEARNING_RATES)
                    if lr in LEARNING_RATES else optuna.distributions.FloatDistribution(0, 1))
    study.add_trial(optuna.trial.create_trial(
        state=state, params={name: lr}, distributions={name: distribution},
        user_attrs=user_attrs, value=1.0 if state == STATES.COMPLETE else None))


def _trial_folders(tmp_path):
    """The trial folders made in the experiment's folder."""
    return sorted(os.path.relpath(os.path.join(root, name), str(tmp_path / 'exp'))
                  for root, names, _ in os.walk(str(tmp_path / 'exp')) for name in names
                  if name.startswith('trial_'))


def _names(message, name):
    """Whether ``message`` names ``name`` as a word of its own."""
    return re.search(r'(?<![A-Za-z0-9_]){}(?![A-Za-z0-9_])'.format(re.escape(name)),
                     message) is not None


def _refused(tmp_path, error, experiment=None, **kwargs):
    """The message of ``error``, raised by a search with ``kwargs`` before it opened or made
    anything."""
    experiment = experiment or _experiment(tmp_path)
    kwargs.setdefault('storage', None)
    with pytest.raises(error) as raised:
        experiment.search(*search_tasks.search_managers(), **kwargs)
    assert not (tmp_path / 'exp').exists()
    return str(raised.value)


def _gone_pid():
    """The pid of a process of this host that has ended."""
    gone = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          check=True, capture_output=True, text=True)
    return int(gone.stdout)


# -- The arguments, checked before anything is opened ------------------------------------

def test_a_search_needs_a_val_score_key_and_a_validation_manager(tmp_path):
    message = _refused(tmp_path, ValueError, _experiment(tmp_path, val_score_key=None),
                       n_trials=1)
    assert _names(message, 'val_score_key')
    with pytest.raises(ValueError) as raised:
        _experiment(tmp_path).search(search_tasks.search_managers()[0], None, n_trials=1)
    assert _names(str(raised.value), 'val_score_key')
    assert not (tmp_path / 'exp').exists()


@pytest.mark.parametrize('kwargs, error, name', [
    ({'n_trials': 0}, ValueError, 'n_trials'),
    ({'n_trials': -2}, ValueError, 'n_trials'),
    ({'n_trials': 1.5}, TypeError, 'n_trials'),
    ({'n_trials': True}, TypeError, 'n_trials'),
    ({'timeout': 0}, ValueError, 'timeout'),
    ({'timeout': -1.0}, ValueError, 'timeout'),
    ({'timeout': float('nan')}, ValueError, 'timeout'),
    ({'n_trials': 1, 'timeout': '10'}, TypeError, 'timeout'),
    ({'n_trials': 1, 'sampler': 'tpe'}, TypeError, 'sampler'),
    ({'n_trials': 1, 'sampler': optuna.pruners.NopPruner()}, TypeError, 'sampler'),
    ({'n_trials': 1, 'pruner': object()}, TypeError, 'pruner'),
    ({'n_trials': 1, 'pruner': optuna.samplers.RandomSampler()}, TypeError, 'pruner'),
    ({'n_trials': 1, 'storage': 3}, TypeError, 'storage'),
    ({'n_trials': 1, 'storage': b'sqlite://'}, TypeError, 'storage'),
])
def test_a_bad_argument_is_refused_naming_it(tmp_path, kwargs, error, name):
    message = _refused(tmp_path, error, **kwargs)
    assert _names(message, name)
    assert repr(kwargs[name]) in message


def test_a_search_without_n_trials_or_timeout_is_refused_naming_both(tmp_path):
    message = _refused(tmp_path, ValueError)
    assert _names(message, 'n_trials') and _names(message, 'timeout')


def test_a_storage_that_is_no_url_is_refused_naming_it_before_it_is_opened(tmp_path):
    message = _refused(tmp_path, ValueError, n_trials=1, storage='search.db')
    assert 'search.db' in message and _names(message, 'storage')


# -- The heartbeat -----------------------------------------------------------------------

@pytest.mark.parametrize('kwargs, error, names', [
    ({'heartbeat_interval': 0}, ValueError, ['heartbeat_interval']),
    ({'heartbeat_interval': 2.5}, TypeError, ['heartbeat_interval']),
    ({'grace_period': 0}, ValueError, ['grace_period']),
    ({'grace_period': 90.0}, TypeError, ['grace_period']),
    ({'heartbeat_interval': None, 'grace_period': 30}, ValueError,
     ['grace_period', 'heartbeat_interval']),
    ({'heartbeat_interval': 10, 'grace_period': 10}, ValueError,
     ['grace_period', 'heartbeat_interval']),
    ({'heartbeat_interval': 10, 'grace_period': 9}, ValueError,
     ['grace_period', 'heartbeat_interval']),
    ({'grace_period': 60}, ValueError, ['grace_period', 'heartbeat_interval']),
])
@pytest.mark.parametrize('storage', ['default', 'url'])
def test_a_bad_heartbeat_is_refused_naming_its_arguments(tmp_path, kwargs, error, names,
                                                         storage):
    url = None if storage == 'default' else 'sqlite:///' + str(tmp_path / 'study.db')
    message = _refused(tmp_path, error, n_trials=1, storage=url, **kwargs)
    assert all(_names(message, name) for name in names)
    for value in kwargs.values():
        assert value is None or str(value) in message
    assert not (tmp_path / 'study.db').exists()


@pytest.mark.parametrize('kwargs', [
    {'heartbeat_interval': 30}, {'heartbeat_interval': 61}, {'heartbeat_interval': None},
    {'grace_period': 120}, {'heartbeat_interval': 60, 'grace_period': 61}])
def test_a_storage_object_with_a_heartbeat_of_the_search_s_is_refused_naming_it(tmp_path,
                                                                                 kwargs):
    message = _refused(tmp_path, ValueError, n_trials=1,
                       storage=optuna.storages.InMemoryStorage(), **kwargs)
    assert all(_names(message, name) for name in kwargs)
    assert 'InMemoryStorage' in message


def test_a_storage_object_is_used_as_it_is_with_the_default_heartbeat(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    result = _search(_experiment(tmp_path), n_trials=1, storage=storage,
                     heartbeat_interval=studies.HEARTBEAT_INTERVAL)
    study = optuna.load_study(study_name='exp', storage=storage)
    assert [trial.state for trial in study.trials] == [STATES.COMPLETE]
    assert result['study'].trials[0].value == study.trials[0].value
    # The study is the storage's: the search made no file of its own.
    assert not (tmp_path / 'exp' / studies.STUDY_FILE).exists()


@pytest.mark.parametrize('storage, heartbeat, state', [
    ('url', (2, None), STATES.FAIL),  # three beats of 2 s: past
    ('default', (2, None), STATES.FAIL),
    ('url', (2, 3), STATES.FAIL),  # one second over the interval: accepted, and past
    ('url', (2, 30), STATES.RUNNING),
    ('default', (2, 30), STATES.RUNNING),
    ('url', (None, None), STATES.RUNNING),  # no heartbeat: never failed for its silence
])
def test_the_heartbeat_reaches_the_storage_the_search_builds(tmp_path, storage, heartbeat,
                                                              state):
    if storage == 'default':
        url, path = None, tmp_path / 'exp' / studies.STUDY_FILE
    else:
        path = tmp_path / 'study.db'
        url = 'sqlite:///' + str(path)
    interval, grace = heartbeat
    result = _search(_experiment(tmp_path), n_trials=1, storage=url,
                     heartbeat_interval=interval, grace_period=grace)
    study = result['study']
    assert [trial.state for trial in study.trials] == [STATES.COMPLETE]
    assert path.is_file()
    assert search_studies.state_after_silence(path, study, SILENT_SECONDS) == state


# -- What a search returns and writes ----------------------------------------------------

def test_a_search_returns_its_summary_and_study_and_writes_search_json(tmp_path):
    sampler, pruner = optuna.samplers.RandomSampler(seed=1), optuna.pruners.NopPruner()
    result = _search(_experiment(tmp_path), n_trials=2, sampler=sampler, pruner=pruner)
    assert sorted(result) == ['best_params', 'best_score', 'best_trial', 'results', 'study',
                              'trials']
    study = result['study']
    assert isinstance(study, optuna.Study) and study.study_name == 'exp'
    assert study.sampler is sampler and study.pruner is pruner
    # n_trials trials trained, and no third one asked for and stopped as surplus.
    assert [trial.state for trial in study.trials] == [STATES.COMPLETE] * 2
    assert [trial['number'] for trial in result['trials']] == [0, 1]
    assert result['best_trial'] == min(study.trials, key=lambda t: t.value).number
    assert result['best_score'] == study.best_value
    with open(str(tmp_path / 'exp' / 'search.json'), encoding='utf-8') as stream:
        written = json.load(stream)
    assert written['study_name'] == 'exp'
    assert written['study_id'] == study.user_attrs[studies.STUDY_ID_ATTR]
    assert written['best_trial'] == result['best_trial']
    assert written['trials'] == json.loads(json.dumps(result['trials']))
    assert len(_trial_folders(tmp_path)) == 2


def test_a_new_study_has_its_id_before_its_first_trial_draws_a_value(tmp_path):
    sampler = RecordingSampler()
    result = _search(_experiment(tmp_path), n_trials=1, sampler=sampler)
    study_id = result['study'].user_attrs[studies.STUDY_ID_ATTR]
    assert sampler.ids_seen == [study_id]


# -- The study's trials, checked before any trial trains ---------------------------------

@pytest.mark.parametrize('add', [
    lambda study: _add(study, STATES.COMPLETE, 0.5, name='model/width'),
    lambda study: _add(study, STATES.FAIL, 0.5, name='model/width'),
    lambda study: _add(study, STATES.COMPLETE, 0.5),  # no candidate of this space
])
def test_a_study_with_a_trial_of_another_space_is_refused_before_any_trial_trains(tmp_path,
                                                                                  add):
    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    _add(study, STATES.COMPLETE, 0.03)
    add(study)
    with pytest.raises(ValueError) as raised:
        _search(_experiment(tmp_path), n_trials=3, storage=storage)
    message = str(raised.value)
    assert "trial 1 of the study 'exp'" in message
    assert len(study.trials) == 2 and _trial_folders(tmp_path) == []


def test_surplus_trials_are_not_checked_against_the_space(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    # A surplus trial stops before it draws anything; one holding values of another space
    # is still not the search's to judge, as it counts for nothing.
    _add(study, STATES.FAIL, 0.5, name='model/width', surplus=True)
    result = _search(_experiment(tmp_path), n_trials=1, storage=storage)
    assert [trial.state for trial in study.trials] == [STATES.FAIL, STATES.COMPLETE]
    assert [trial['number'] for trial in result['trials']] == [1]


# -- Dead trials, and the trials that count ----------------------------------------------

def test_a_dead_trial_is_failed_and_retried_before_new_trials(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    running = study.ask()
    lr = running.suggest_categorical(LR, LEARNING_RATES)
    running.set_user_attr('worker', {'host': socket.gethostname(), 'pid': _gone_pid(),
                                     'started': 1, 'trial': running.number})
    result = _search(_experiment(tmp_path), n_trials=2, storage=storage)
    assert [trial.state for trial in study.trials] == [STATES.FAIL] + [STATES.COMPLETE] * 2
    # The next trial is the retry, with the dead trial's value; then a new one.
    retry, new = study.trials[1:]
    assert retry.params == {LR: lr} and retry.system_attrs['retry_history'] == [0]
    assert 'retry_history' not in new.system_attrs
    assert [trial['number'] for trial in result['trials']] == [1, 2]


@pytest.mark.parametrize('n_trials, trained', [(2, 0), (3, 1), (4, 2)])
def test_complete_and_pruned_trials_count_towards_n_trials_failed_ones_do_not(
        tmp_path, n_trials, trained):
    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    for state in (STATES.COMPLETE, STATES.PRUNED, STATES.FAIL):
        _add(study, state)
    result = _search(_experiment(tmp_path), n_trials=n_trials, storage=storage)
    assert len(study.trials) == 3 + trained
    assert [trial.state for trial in study.trials[3:]] == [STATES.COMPLETE] * trained
    assert len(_trial_folders(tmp_path)) == trained
    assert len(result['trials']) == 3 + trained


def test_a_search_with_its_trials_met_trains_nothing_and_one_short_trains_the_rest(tmp_path):
    url = 'sqlite:///' + str(tmp_path / 'study.db')
    first = _search(_experiment(tmp_path), n_trials=2, storage=url)
    assert len(first['study'].trials) == 2
    again = _search(_experiment(tmp_path), n_trials=2, storage=url)
    assert len(again['study'].trials) == 2
    assert again['trials'] == first['trials']
    more = _search(_experiment(tmp_path), n_trials=3, storage=url)
    assert [trial.state for trial in more['study'].trials] == [STATES.COMPLETE] * 3
    assert len(_trial_folders(tmp_path)) == 3


def test_a_running_trial_takes_a_place_and_the_trial_asked_past_it_ends_as_surplus(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    running = study.ask()  # of another worker, alive
    running.set_user_attr('worker', {'host': 'another-host-' + socket.gethostname(),
                                     'pid': 1, 'started': 1})
    result = _search(_experiment(tmp_path), n_trials=1, storage=storage)
    # The search asked for a trial, found the place taken, and stopped it as surplus.
    assert [trial.state for trial in study.trials] == [STATES.RUNNING, STATES.FAIL]
    assert study.trials[1].user_attrs['surplus'] is True
    assert [trial['number'] for trial in result['trials']] == [0]
    assert _trial_folders(tmp_path) == []


def test_a_timeout_alone_ends_the_search_after_the_trial_running_then(tmp_path):
    timeout = 0.2
    result = _search(_experiment(tmp_path, extensions=[OutlastTrial(timeout)]),
                     timeout=timeout)
    assert [trial.state for trial in result['study'].trials] == [STATES.COMPLETE]


# -- Tracking ----------------------------------------------------------------------------

@pytest.mark.slow(reason='MLflow takes seconds to import')
def test_a_tracked_search_trains_its_trials_as_child_runs_of_the_study_s_run(
        tmp_path, monkeypatch):
    mlflow = pytest.importorskip('mlflow')
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')  # a file store of the test's own
    store = (tmp_path / 'mlruns').as_uri()
    result = _search(_experiment(tmp_path, tracking={'mlflow': store}), n_trials=1)
    client = mlflow.MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name('exp').experiment_id])
    parent, = [run for run in runs if 'mlflow.parentRunId' not in run.data.tags]
    assert parent.info.run_name == 'exp'
    assert parent.data.tags['researchutils.study_id'] == result['study'].user_attrs[
        studies.STUDY_ID_ATTR]
    child, = [run for run in runs if run is not parent]
    assert child.data.tags['mlflow.parentRunId'] == parent.info.run_id
    assert child.data.tags['trial'] == '0'
