"""Worker processes and the signals that stop a job (researchutils/_process_worker.py).

A cluster signals every process of the job: the workers leave the stop signals to the
main process from their first instruction (the pool starts them with the signals
blocked), end when the main process itself sends SIGTERM (as ``multiprocessing`` does at
exit), and follow a main process that dies, even while busy in a task that never ends.
The signals come from another process (``kill``), as a cluster's do. Tested through the
two owners of worker processes, DataManager and DecorableMultiprocessIterator.
"""
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.iterators import DecorableMultiprocessIterator
from tests.support.iterators import index_and_pid
from tests.support.processes import REPO, is_running, wait_until_gone, wait_until_taken
from tests.support.start_methods import START_METHODS, using_start_method

pytestmark = pytest.mark.timeout(180)
# Generous: what these waits allow is never what they normally take.
DEADLINE = 60.
# How clusters, terminals and users stop a job: scancel and time limits (TERM), SLURM's
# warning (USR1, or USR2), Ctrl-C (INT), a closed terminal (HUP).
STOP_SIGNALS = {signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2}


@pytest.fixture(params=START_METHODS)
def start_method(request):
    with using_start_method(request.param) as method:
        yield method


def _signal_from_another_process(pid, signal_number):
    """Sends ``signal_number`` to ``pid`` from a ``kill`` process, as a cluster would."""
    subprocess.run(['kill', '-s', signal.Signals(signal_number).name[3:], str(pid)],
                   check=True, timeout=DEADLINE)


def _new_children(before):
    return sorted(set(multiprocessing.active_children()) - before, key=lambda p: p.pid)


def _blocked(pid):
    """The signals process ``pid`` blocks in its main thread (Linux: /proc/PID/status)."""
    with open('/proc/{}/status'.format(pid)) as status:
        mask = int(next(line for line in status if line.startswith('SigBlk:')).split()[1], 16)
    return {number for number in signal.valid_signals() if mask >> (number - 1) & 1}


def test_stop_signals_from_another_process_are_left_to_the_main_process(start_method):
    before = set(multiprocessing.active_children())
    with DecorableMultiprocessIterator(list(range(64)), 4, shuffle=False, n_processes=2,
                                       decor_fun=index_and_pid) as it:
        batches = [it.next()]
        pids = {worker.pid for worker in _new_children(before)}
        assert len(pids) == 2
        for pid in pids:
            assert STOP_SIGNALS <= _blocked(pid)
            for number in sorted(STOP_SIGNALS):
                _signal_from_another_process(pid, number)
            # Taken by the worker, which still runs.
            wait_until_taken(pid, STOP_SIGNALS, DEADLINE)
        batches += [it.next() for _ in range(8)]
        assert {worker.pid for worker in _new_children(before)} == pids
    items = [item for batch in batches for item, _ in batch]
    assert items == list(range(len(items)))


def _start_in_thread(iterator):
    got = []
    thread = threading.Thread(target=lambda: got.append(iterator.next()))
    thread.start()
    return thread, got


@pytest.mark.parametrize('method', ['spawn', 'forkserver'])
def test_a_stop_signal_while_the_workers_start_is_left_to_the_main_process(method):
    # A spawned worker takes a while to start (a new interpreter, imports): the signal
    # finds it before it has run a line of the pool's code, and it does not die of it.
    before = set(multiprocessing.active_children())
    with using_start_method(method):
        manager = DataManager([{'x': np.float32(i)} for i in range(8)], 2,
                              n_process_augmentation=2)
        iterator = manager.get_iterator()
    try:
        thread, got = _start_in_thread(iterator)
        signalled = set()
        deadline = time.monotonic() + DEADLINE
        while len(signalled) < 2:
            assert time.monotonic() < deadline, 'the workers did not start'
            for child in _new_children(before):
                if child.pid not in signalled and child.name.startswith('DataManager'):
                    _signal_from_another_process(child.pid, signal.SIGTERM)
                    signalled.add(child.pid)
        thread.join(DEADLINE)
        assert [batch['x'].tolist() for batch in got] == [[0., 1.]]
        assert [iterator.next()['x'].tolist() for _ in range(3)] == [[2., 3.], [4., 5.],
                                                                     [6., 7.]]
        assert all(is_running(pid) for pid in signalled)
    finally:
        iterator.finalize()


def test_sigterm_from_the_main_process_ends_a_worker_despite_a_handler_it_forked_with():
    # multiprocessing ends daemon workers this way at exit; a forked worker has the main
    # process's handler (PreemptionSnapshot's only notes the signal).
    before = set(multiprocessing.active_children())
    previous = signal.signal(signal.SIGTERM, lambda number, frame: None)
    try:
        with using_start_method('fork'):
            iterator = DataManager([{'x': 1}] * 4, 2, n_process_augmentation=2).get_iterator()
        try:
            iterator.next()
            workers = _new_children(before)
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.join(DEADLINE)
        finally:
            iterator.finalize()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [worker.exitcode for worker in workers] == [-signal.SIGTERM] * 2


BUSY_WHEN_KILLED = textwrap.dedent('''
    import multiprocessing, sys, time
    from researchutils.chainer.iterators import DecorableMultiprocessIterator
    from tests.support.iterators import BlocksFrom, block_forever
    if __name__ == '__main__':
        multiprocessing.set_start_method(sys.argv[1])
        it = DecorableMultiprocessIterator(BlocksFrom(range(400), 4, sys.argv[2]), 4,
                                           shuffle=False, n_processes=2,
                                           decor_fun=block_forever)
        it.next()  # the next batch, made ahead, never ends
        print(' '.join(str(child.pid) for child in multiprocessing.active_children()
                       if child.name.startswith('Decorable')), flush=True)
        time.sleep(600)
''')


@pytest.mark.slow  # a Python process of its own per case, six cases
@pytest.mark.parametrize('signal_number', [signal.SIGTERM, signal.SIGKILL])
def test_workers_busy_in_an_endless_task_follow_a_main_process_that_dies(
        start_method, tmp_path, signal_number):
    # SIGTERM without PreemptionSnapshot (the whole job stops), or SIGKILL (an OOM killer).
    script = tmp_path / 'script.py'
    script.write_text(BUSY_WHEN_KILLED)
    main = subprocess.Popen([sys.executable, str(script), start_method, str(tmp_path)],
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                            stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in main.stdout.readline().split()]
        assert len(pids) == 2
        deadline = time.monotonic() + DEADLINE
        while not all((tmp_path / 'blocking_{}'.format(pid)).exists() for pid in pids):
            assert time.monotonic() < deadline, 'the workers did not start the endless task'
            time.sleep(0.01)
        main.send_signal(signal_number)
        assert main.wait(DEADLINE) == -signal_number
    finally:
        if main.poll() is None:
            main.kill()
            main.wait(DEADLINE)
        main.stdout.close()
    wait_until_gone(pids, DEADLINE)
