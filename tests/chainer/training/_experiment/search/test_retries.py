"""Retries of failed trials: a series of retries leads back to its first trial."""
import contextlib
import os
import subprocess
import sys
import warnings

import pytest

from researchutils.chainer.training._experiment.search import retries

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _fail_the_next_trial(study):
    """Asks for the next trial (the waiting retry, when there is one), and fails it as a
    worker's death does."""
    trial = study.ask({'x': optuna.distributions.FloatDistribution(0.0, 1.0)})
    retries.fail_and_retry(study, trial)
    return trial.number


def test_a_trial_retried_twice_records_the_first_trial_of_its_series():
    study = optuna.create_study()
    first = _fail_the_next_trial(study)
    first_retry = _fail_the_next_trial(study)
    second_retry = _fail_the_next_trial(study)
    waiting, = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting.system_attrs[retries.FAILED_TRIAL] == first
    assert retries.history(waiting) == [first, first_retry, second_retry]
    # Optuna's own reader of retries follows it back to the origin as well.
    callback = optuna.storages.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        assert callback.retried_trial_number(waiting) == first
        assert callback.retry_history(waiting) == [first, first_retry, second_retry]
    assert len({trial.params['x'] for trial in study.trials}) == 1


def test_a_first_failure_is_its_own_origin():
    study = optuna.create_study()
    first = _fail_the_next_trial(study)
    waiting, = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting.system_attrs[retries.FAILED_TRIAL] == first
    assert retries.history(waiting) == [first]


_X = {'x': optuna.distributions.FloatDistribution(0.0, 1.0)}
_STATES = optuna.trial.TrialState


def _add(study, state=_STATES.FAIL, x=0.5, **system_attrs):
    """Adds a trial of ``state`` with ``x``; returns its number."""
    study.add_trial(optuna.trial.create_trial(state=state, params={'x': x}, distributions=_X,
                                              system_attrs=system_attrs,
                                              **({'value': 0.0} if state == _STATES.COMPLETE
                                                 else {})))
    return study.trials[-1].number


def _ended_process():
    """The pid of a process that has ended (free now, or, rarely, given to a later one)."""
    child = subprocess.Popen([sys.executable, '-c', 'import os; print(os.getpid())'],
                             stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=60)
    return int(out)


def _running(study, worker):
    trial = study.ask(_X)
    trial.set_user_attr(retries.WORKER_ATTR, worker)
    return trial.number


def test_the_worker_record_names_this_host_process_its_start_and_trial():
    import socket
    record = retries.worker(7)
    assert record == {'host': socket.gethostname(), 'pid': os.getpid(),
                      'started': record['started'], 'trial': 7}
    # Linux: clock ticks since boot, the 22nd field of /proc/<pid>/stat.
    with open('/proc/self/stat') as stream:
        assert record['started'] == int(stream.read().rsplit(')', 1)[1].split()[19])


def test_a_running_trial_whose_process_ended_is_failed_and_retried_with_its_parameters():
    study = optuna.create_study()
    # A start time no process has: dead even if the pid went to a later process.
    number = _running(study, dict(retries.worker(0), pid=_ended_process(), started=-1))
    retries.fail_dead_trials(study)
    assert study.trials[number].state == _STATES.FAIL
    waiting, = study.get_trials(states=(_STATES.WAITING,))
    assert waiting.params == study.trials[number].params
    assert retries.history(waiting) == [number]


@contextlib.contextmanager
def _living_worker():
    """A process that answers "alive" on its stdout once it reads a line: yields
    ``answer()``, which asks it, '' when it was ended meanwhile."""
    child = subprocess.Popen(
        [sys.executable, '-c', 'import sys; print("ready", flush=True); sys.stdin.readline(); '
                               'print("alive", flush=True)'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == 'ready\n'
        yield child.pid, lambda: child.communicate('\n', timeout=60)[0]
    finally:
        child.kill()
        child.wait()


def test_a_trial_of_a_living_process_stays_running_and_the_process_is_left_alone():
    study = optuna.create_study()
    with _living_worker() as (pid, answer):
        number = _running(study, dict(retries.worker(0), pid=pid, started=None))
        retries.fail_dead_trials(study)
        assert answer() == 'alive\n'   # the check sent it no signal
    assert study.trials[number].state == _STATES.RUNNING
    assert not study.get_trials(states=(_STATES.WAITING,))


def test_a_record_naming_no_trial_is_taken_for_the_trial_it_is_on():
    study = optuna.create_study()
    record = dict(retries.worker(0), pid=_ended_process(), started=-1)
    del record['trial']
    number = _running(study, record)
    retries.fail_dead_trials(study)
    assert study.trials[number].state == _STATES.FAIL


def test_the_start_time_of_a_process_whose_name_holds_parentheses_and_spaces():
    # /proc/<pid>/stat puts the name in parentheses, unescaped: the start time is counted
    # from the last ")".
    expected = retries.worker(0)['started']
    with open('/proc/self/comm') as stream:
        name = stream.read().rstrip('\n')
    try:
        with open('/proc/self/comm', 'w') as stream:
            stream.write('w) 1 2) 3 (4')
        started = retries.worker(0)['started']
    finally:
        with open('/proc/self/comm', 'w') as stream:
            stream.write(name)
    assert started == expected


@pytest.mark.parametrize('change', [
    {'host': 'another-host'},             # a pid of another host says nothing here
    {'trial': 5},                         # a record copied from another trial
    {'pid': True},                        # not a pid
    {'pid': str(os.getpid())},            # not a pid
])
def test_a_record_that_says_nothing_of_this_trial_here_leaves_it_running(change):
    study = optuna.create_study()
    record = dict(retries.worker(0), pid=_ended_process(), started=None)
    record.update(change)
    number = _running(study, record)
    retries.fail_dead_trials(study)
    assert study.trials[number].state == _STATES.RUNNING
    assert not study.get_trials(states=(_STATES.WAITING,))


def test_a_trial_without_a_worker_record_stays_running():
    study = optuna.create_study()
    _running(study, 'not a record')
    study.ask(_X)  # and one with no record at all
    retries.fail_dead_trials(study)
    assert [t.state for t in study.trials] == [_STATES.RUNNING] * 2


def test_a_pid_given_to_a_later_process_is_dead_by_its_start_time():
    study = optuna.create_study()
    with _living_worker() as (pid, answer):
        # A start time before the living process's: the trial's process was an earlier one.
        number = _running(study, dict(retries.worker(0), pid=pid, started=0))
        retries.fail_dead_trials(study)
        assert answer() == 'alive\n'
    assert study.trials[number].state == _STATES.FAIL


def test_a_trial_finished_meanwhile_is_neither_failed_nor_retried():
    study = optuna.create_study()
    trial = study.ask(_X)
    study.tell(trial, 1.0)
    retries.fail_and_retry(study, trial)
    assert study.trials[trial.number].state == _STATES.COMPLETE
    assert not study.get_trials(states=(_STATES.WAITING,))


@pytest.mark.parametrize('history', [
    'not a list', [], [0, True], [1, 0], [0, 0], [-1, 0], [0, 3], [0, 1.0]])
def test_a_history_that_is_no_list_of_earlier_trial_numbers_is_none(history):
    study = optuna.create_study()
    for _ in range(3):
        _add(study)
    number = _add(study, _STATES.WAITING, retry_history=history)
    assert retries.history(study.trials[number]) == []
    assert retries.failed_chain(study, number) == []


def test_the_failed_chain_is_the_earlier_trials_when_each_failed_with_the_same_parameters():
    study = optuna.create_study()
    first, second = _add(study), _add(study)
    number = _add(study, _STATES.WAITING, retry_history=[first, second])
    assert [t.number for t in retries.failed_chain(study, number)] == [first, second]


@pytest.mark.parametrize('other', [{'state': _STATES.COMPLETE}, {'x': 0.25}])
def test_a_chain_through_a_trial_not_failed_with_the_same_parameters_is_none(other):
    study = optuna.create_study()
    first, second = _add(study), _add(study, **other)
    number = _add(study, _STATES.WAITING, retry_history=[first, second])
    assert retries.failed_chain(study, number) == []
    assert retries.failed_chain(study, first) == []


def _frozen(number, worker):
    trial = optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING,
                                      user_attrs={} if worker is None else {'worker': worker})
    trial.number = number
    return trial


@pytest.mark.parametrize('change, alive', [
    ({}, True),                                     # this very process, trial 3
    ({'trial': 4}, False),                          # a record copied from another trial
    ({'host': 'another-host'}, False),              # not judged from here
    ({'pid': 'x'}, False),
    ({'pid': 'ended'}, False),                      # its process is gone
    (None, False),                                  # no record at all
])
def test_alive_here_only_for_a_live_process_of_this_host_running_that_trial(change, alive):
    worker = None if change is None else dict(retries.worker(3), **change)
    if worker is not None and worker['pid'] == 'ended':
        worker.update(pid=_ended_process(), started=-1)
    assert retries.alive_here(_frozen(3, worker)) is alive
