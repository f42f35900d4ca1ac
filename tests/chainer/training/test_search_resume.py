"""A search trial interrupted mid-run resumes from its snapshot, in a retry of its own.

Real worker processes (tests/support/search_worker.py) train a trial of the synthetic
search task; each pauses at a moment it reports (the end of its 6th iteration, mid-epoch
2, after epoch 1's snapshot) and is stopped there by a real signal: SIGKILL (nothing
written) or SIGTERM (the preemption snapshot, exit status 75). Then the same command run
again (the default SQLite study), or a worker of another host (a PostgreSQL study; where
the tests run as root the hosts are network namespaces with host names of their own, so
that the killed trial is found by Optuna's heartbeat, not by its pid), takes the trial up
and resumes from the newest snapshot. The trial's value, reported values, log and model
files are then compared, bit for bit, with the same trial trained by a worker never
stopped.
"""
import os
import signal
import time

import pytest

from researchutils.chainer.training import load_json
from researchutils.chainer.training._experiment.search import folders
from tests.support import search_nodes, search_studies

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

STATES = optuna.trial.TrialState
RATE = 0.1
PAUSE = 6  # mid-epoch 2: epoch 1's snapshot holds iteration 4
HEARTBEAT = ['--heartbeat', '1', '--grace', '3']
GRACE = 3
# Where the retry resumes: SIGKILL writes nothing (epoch 1's snapshot), SIGTERM writes the
# state after the paused iteration.
RESUMED_AT = {signal.SIGKILL: 4, signal.SIGTERM: PAUSE}
pytestmark = [pytest.mark.slow(reason='three worker processes train one trial each, one '
                                      'stopped by a signal: 20-60 s on two busy cores'),
              pytest.mark.timeout(900)]


def stop_paused(folder, process, signal_number):
    """Signals the worker paused in ``folder``; returns its trial folder and the newest
    snapshot's iteration there when it is stopped."""
    point = search_nodes.paused(folder, [process])
    assert point['pid'] == process.pid and point['iteration'] == PAUSE
    process.send_signal(signal_number)
    if signal_number == signal.SIGTERM:
        search_nodes.release(folder)  # the iteration ends, then the preemption snapshot
        stderr = search_nodes.finish(process, 75)
        assert 'PreemptionSnapshot: SIGTERM received' in stderr
    else:
        search_nodes.finish(process, -signal.SIGKILL)
    return point['folder'], search_nodes.newest_snapshot_iteration(point['folder'])


def assert_resumed_exactly(shared, study, report, reference, signal_number):
    """The interrupted trial 0 was retried by trial 1, which resumed in its folder and
    ended as a trial never stopped."""
    resumed_at = RESUMED_AT[signal_number]
    original, retry = study.trials
    assert (original.state, retry.state) == (STATES.FAIL, STATES.COMPLETE)
    # The study shows the retry: Optuna's retry history, and the same parameters.
    assert retry.system_attrs['retry_history'] == [0]
    assert retry.system_attrs['failed_trial'] == 0
    assert retry.params == original.params == {'training/optimizer_params/lr': RATE}
    # The retry trained in the interrupted trial's folder, which its record now says it
    # holds, from the snapshot there: the worker's Trainer started at that iteration.
    exp = shared / 'exp'
    assert retry.user_attrs['folder'] == original.user_attrs['folder']
    folder = folders.folder_of(str(exp), 'exp', retry)
    assert folder == str(exp / original.user_attrs['folder'])
    assert folders.folder_of(str(exp), 'exp', original) is None
    assert report['trained'] == [{'trial': 1, 'folder': 'trial_0',
                                  'start_iteration': resumed_at}]
    assert retry.user_attrs['resumed_at'] == {'iteration': resumed_at, 'epoch': 1}
    # Bit-identical to the trial never stopped: value, model files, log.
    assert retry.value == reference['value']
    assert search_nodes.arrays(os.path.join(folder, 'best_model.npz')) == \
        reference['best_model']
    assert search_nodes.arrays(os.path.join(folder, 'final_model.npz')) == \
        reference['final_model']
    assert search_nodes.log_rows(folder) == reference['log']
    # The reports go on from the epoch resumed: epoch 1 by the interrupted trial, 2 and 3
    # by its retry, each the value the trial never stopped reported.
    assert original.intermediate_values == {1: reference['reported'][1]}
    assert retry.intermediate_values == {step: reference['reported'][step]
                                         for step in (2, 3)}
    # search.json counts the trial once: the retry's entry, naming the trial it retries.
    saved = load_json(exp / 'search.json')
    assert [(t['number'], t['state'], t['retry_of'], t['resumed_at'], t['score'], t['folder'])
            for t in saved['trials']] == [(1, 'COMPLETE', [0], resumed_at, reference['value'],
                                           original.user_attrs['folder'])]
    assert saved['best_trial'] == 1 and saved['best_score'] == reference['value']


@pytest.mark.parametrize('signal_number', [signal.SIGKILL, signal.SIGTERM],
                         ids=['SIGKILL', 'SIGTERM'])
def test_a_trial_stopped_mid_run_resumes_when_the_search_runs_again(
        tmp_path, tmp_path_factory, signal_number):
    reference = search_nodes.uninterrupted(tmp_path_factory, RATE)
    shared = tmp_path / 'shared'
    url = search_nodes.default_url(shared)
    search_nodes.enqueue(url, [RATE])
    processes = [search_nodes.start_worker(tmp_path / 'first', 'default', shared, 1,
                                           '--pause-at', PAUSE)]
    try:
        stop_paused(tmp_path / 'first', processes[0], signal_number)
        study = search_studies.load(url)
        # SIGKILL leaves the trial RUNNING; SIGTERM failed it and enqueued its retry.
        assert [t.state for t in study.trials] == (
            [STATES.RUNNING] if signal_number == signal.SIGKILL
            else [STATES.FAIL, STATES.WAITING])
        # The same command again: the trial's process is gone from this host.
        processes.append(search_nodes.start_worker(tmp_path / 'again', 'default', shared, 1))
        report = search_nodes.finish(processes[1])
    finally:
        search_nodes.end(processes)
    study = search_studies.load(url)
    assert_resumed_exactly(shared, study, report, reference, signal_number)


def wait_until_stale(server, database, number):
    """Waits until trial ``number``'s last heartbeat is older than the grace period (by the
    server's clock, as Optuna judges it)."""
    query = ('SELECT EXTRACT(EPOCH FROM now()::timestamp - h.heartbeat) FROM '
             'trial_heartbeats h JOIN trials t ON t.trial_id = h.trial_id '
             'WHERE t.number = {}'.format(number))
    deadline = time.monotonic() + search_nodes.EVENT_TIMEOUT
    while True:
        seconds = server.psql(query, database).strip()
        if seconds and float(seconds) > GRACE + 0.5:
            return
        assert time.monotonic() < deadline, 'the heartbeat of trial {} is {!r} s old'.format(
            number, seconds)
        time.sleep(0.2)


@pytest.mark.parametrize('signal_number', [signal.SIGKILL, signal.SIGTERM],
                         ids=['SIGKILL', 'SIGTERM'])
def test_a_trial_stopped_mid_run_resumes_on_another_host_of_a_postgresql_study(
        tmp_path, tmp_path_factory, postgres_server, postgres_database, host_network, nodes,
        signal_number):
    pytest.importorskip('psycopg', reason='needs the search-db extra (psycopg)')
    reference = search_nodes.uninterrupted(tmp_path_factory, RATE)
    shared = tmp_path / 'shared'
    os.makedirs(shared)
    search_nodes.enqueue(postgres_server.url(postgres_database), [RATE])
    url = postgres_server.url(postgres_database, host=(
        '127.0.0.1' if host_network is None else host_network.server_address))
    named = search_nodes.can_name_hosts()
    processes = [search_nodes.start_worker(
        tmp_path / 'a', url, shared, 1, '--pause-at', PAUSE, *HEARTBEAT, host=nodes[0],
        hostname='node-a' if named else None)]
    try:
        stop_paused(tmp_path / 'a', processes[0], signal_number)
        if signal_number == signal.SIGKILL and named:
            # Another host cannot judge the trial by its pid: it waits for the heartbeat.
            wait_until_stale(postgres_server, postgres_database, 0)
        processes.append(search_nodes.start_worker(
            tmp_path / 'b', url, shared, 1, *HEARTBEAT, host=nodes[1],
            hostname='node-b' if named else None))
        report = search_nodes.finish(processes[1])
    finally:
        search_nodes.end(processes)
    if named:
        assert report['host'] == 'node-b'
    study = search_studies.load(postgres_server.url(postgres_database))
    assert_resumed_exactly(shared, study, report, reference, signal_number)
