"""The process that finds the study full: one line, no traceback, and the study's best.

The end-to-end case runs two real search workers (tests/support/search_worker.py) on one
SQLite study: the first paused inside the study's only trial, the second finding the study
full; the other cases drive the module on studies in memory.
"""
import json
import logging
import os
import socket

import optuna
import pytest

from researchutils.chainer.training._experiment.search import full_study, objective
from tests.support import search_nodes

pytestmark = pytest.mark.timeout(900)
_STATES = optuna.trial.TrialState


@pytest.mark.slow(reason='two search processes on one study, one paused in its trial')
def test_the_process_finding_the_study_full_says_so_in_one_line_and_returns_its_best(
        tmp_path):
    shared = str(tmp_path / 'shared')
    os.makedirs(shared)
    first = search_nodes.start_worker(tmp_path / 'first', 'default', shared, 1,
                                      '--pause-at', '1')
    processes = [first]
    try:
        search_nodes.paused(tmp_path / 'first', processes)
        second = search_nodes.start_worker(tmp_path / 'second', 'default', shared, 1)
        processes.append(second)
        # Its first line, while the first worker is still paused in trial 0.
        waiting = second.stdout.readline()
        search_nodes.release(tmp_path / 'first')
        assert search_nodes.finish(first)['best_trial'] == 0
        out, err = second.communicate(timeout=search_nodes.WORKER_TIMEOUT)
    finally:
        search_nodes.end(processes)
    assert second.returncode == 0, err[-3000:]
    assert waiting == ("search: the study 'exp' has its n_trials=1 trials; waiting for "
                       "trial(s) [0], run by other processes, to end, to return the study's "
                       "best\n")
    assert json.loads(out.strip().splitlines()[-1])['best_trial'] == 0
    said = [line for line in err.splitlines() if 'Trial 1' in line or 'trial 1' in line]
    assert len(said) == 1
    assert said[0].endswith('search: trial 1 was not run: the study has its n_trials=1 '
                            'trials already')
    assert 'Traceback' not in err


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def optuna_records():
    """What Optuna logs meanwhile (its loggers do not propagate to pytest's)."""
    handler = _Records()
    logger = logging.getLogger('optuna')
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def test_a_surplus_trial_is_one_warning_without_traceback_and_other_failures_keep_theirs(
        optuna_records):
    def run_trial(trial):
        if trial.number == 0:
            raise objective.SurplusTrial('the study has its n_trials=3 trials already', 0)
        raise KeyError('a bug')

    study = optuna.create_study()
    with full_study.one_line_per_surplus_trial():
        study.optimize(run_trial, n_trials=2, catch=(objective.SurplusTrial, KeyError))
    messages = [(record.getMessage(), record.exc_info is not None)
                for record in optuna_records if record.levelno == logging.WARNING]
    assert messages[0] == ('search: trial 0 was not run: the study has its n_trials=3 '
                           'trials already', False)
    assert messages[1][0].startswith('Trial 1 failed with parameters: {} because of the '
                                     "following error: KeyError('a bug')")
    assert messages[1][1] is True
    assert messages[2] == ('Trial 1 failed with value None.', False)
    assert len(messages) == 3
    assert not logging.getLogger('optuna.study._optimize').filters


def _study_with(*states, **user_attrs):
    study = optuna.create_study()
    for state in states:
        study.add_trial(optuna.trial.create_trial(
            state=state, user_attrs=user_attrs,
            **({'value': 1.0} if state == _STATES.COMPLETE else {})))
    return study


def test_a_free_place_in_the_study_asks_for_trials_again(capsys):
    study = _study_with(_STATES.COMPLETE, _STATES.FAIL)
    assert full_study.wait_for_others(study, 2, None, None) is True
    assert capsys.readouterr().out == ''


def test_a_full_study_with_nothing_running_is_summarized_at_once(capsys):
    study = _study_with(_STATES.COMPLETE, _STATES.PRUNED)
    assert full_study.wait_for_others(study, 2, None, None) is False
    assert capsys.readouterr().out == ''


def test_a_trial_of_another_host_is_not_waited_for_and_the_line_says_so(capsys):
    study = _study_with(_STATES.COMPLETE)
    study.add_trial(optuna.trial.create_trial(state=_STATES.RUNNING, user_attrs={
        'worker': {'host': 'another-' + socket.gethostname(), 'pid': os.getpid(),
                   'trial': 1}}))
    assert full_study.wait_for_others(study, 2, None, None) is False
    assert capsys.readouterr().out == (
        "search: trial(s) [1] of the study '{}' still run in other processes and are left "
        "out of this summary (another host's, which this one cannot tell from a dead one)\n"
        .format(study.study_name))


def test_a_live_trial_of_this_host_is_not_waited_for_past_the_timeout(capsys):
    study = _study_with(_STATES.COMPLETE)
    study.add_trial(optuna.trial.create_trial(state=_STATES.RUNNING, user_attrs={
        'worker': {'host': socket.gethostname(), 'pid': os.getpid(), 'trial': 1}}))
    assert full_study.wait_for_others(study, 2, 0.0, None) is False
    assert capsys.readouterr().out == (
        "search: trial(s) [1] of the study '{}' still run in other processes and are left "
        'out of this summary (the timeout has passed)\n'.format(study.study_name))


def test_a_surplus_trial_takes_no_place_of_the_study():
    study = _study_with(_STATES.COMPLETE)
    study.add_trial(optuna.trial.create_trial(state=_STATES.PRUNED, user_attrs={
        'surplus': True}))
    assert full_study.wait_for_others(study, 2, None, None) is True
