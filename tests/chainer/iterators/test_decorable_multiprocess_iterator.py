import collections
import copy
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy
import pytest
from chainer import serializers

from researchutils.chainer.iterators import DecorableMultiprocessIterator, DecorableSerialIterator
from tests.support.iterators import (
    BIG_EXAMPLE_BYTES,
    BigExampleOnSignal,
    BlocksFrom,
    OnlyHere,
    block_forever,
    exit_at_four,
    exit_while_sending,
    fail_at_five,
    index_and_pid,
    kill_self_at_four,
    pid_after_sleep,
    plus_uniform,
    raise_two_argument_error,
    random_integers,
    slow_item,
    square,
    unpicklable_example,
)
from tests.support.processes import is_running
from tests.support.start_methods import (
    PICKLING_START_METHODS,
    START_METHODS,
    using_start_method,
)

pytestmark = pytest.mark.timeout(120)
# Seconds a wait for an event may take on a busy machine (it normally takes milliseconds).
DEADLINE = 60

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.fixture(params=START_METHODS)
def start_method(request):
    with using_start_method(request.param) as method:
        yield method


@pytest.fixture(params=PICKLING_START_METHODS)
def pickling(request):
    """A start method that sends the workers their dataset and decor_fun pickled."""
    with using_start_method(request.param) as method:
        yield method


@pytest.fixture
def fork():
    with using_start_method('fork') as method:
        yield method


def take(it, n):
    return [it.next() for _ in range(n)]


def pid_in(path):
    text = path.read_text() if path.exists() else ''
    return int(text) if text else None


def wait_until(condition, what):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def waiting_for_a_task(pid):
    """Whether worker ``pid`` waits for a task: it reads the task queue's pipe (holding
    the queue's read lock) or waits for that lock (a futex). Linux: /proc/PID/wchan."""
    with open('/proc/{}/wchan'.format(pid)) as f:
        wchan = f.read()
    return 'pipe_read' in wchan or 'pipe_wait' in wchan or 'futex' in wchan


def worker_pids(before):
    """The pids of the worker processes started since ``before`` (a set of children)."""
    return sorted(child.pid for child in set(multiprocessing.active_children()) - before)


# --- where and how examples are made ------------------------------------------------------

def test_examples_are_made_in_worker_processes(start_method):
    with DecorableMultiprocessIterator(list(range(8)), 4, n_processes=2,
                                       decor_fun=pid_after_sleep) as it:
        pids = {pid for batch in take(it, 4) for pid in batch}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 2


def test_batches_equal_serial_iterator_batches(start_method):
    dataset = numpy.arange(30)
    with DecorableMultiprocessIterator(dataset, 7, shuffle=False, n_processes=3, n_prefetch=2,
                                       decor_fun=square, end_index=25) as it:
        got = take(it, 8)
    expected = take(DecorableSerialIterator(dataset, 7, shuffle=False, decor_fun=square,
                                            end_index=25), 8)
    assert got == expected


def test_seeded_batches_of_pickled_workers_equal_serial_batches(pickling):
    def batches(it):
        with it:
            return numpy.array(take(it, 5))

    got = batches(DecorableMultiprocessIterator(numpy.arange(10.), 4, n_processes=3,
                                                decor_fun=plus_uniform, seed=9))
    expected = batches(DecorableSerialIterator(numpy.arange(10.), 4, decor_fun=plus_uniform,
                                               seed=9))
    numpy.testing.assert_array_equal(got, expected)


def test_unseeded_workers_never_repeat_random_draws():
    # Chainer's forked workers share one NumPy state and draw the same numbers.
    with DecorableMultiprocessIterator(list(range(40)), 8, n_processes=2,
                                       decor_fun=random_integers) as it:
        draws = [x for batch in take(it, 5) for x in batch]
    assert len(set(draws)) == len(draws)


# --- pickling under spawn and forkserver ----------------------------------------------------

def test_unpicklable_decor_fun_is_type_error_at_construction(pickling):
    with pytest.raises(TypeError, match='decor_fun .* cannot be pickled') as info:
        DecorableMultiprocessIterator(list(range(4)), 2, decor_fun=lambda d, i: d[i])
    assert repr(pickling) in str(info.value)


def test_unpicklable_dataset_is_type_error_at_construction(pickling):
    class Local(list):
        pass

    with pytest.raises(TypeError, match='dataset cannot be pickled'):
        DecorableMultiprocessIterator(Local(range(4)), 2)


def test_dataset_failing_to_unpickle_in_worker_is_reported(pickling):
    with DecorableMultiprocessIterator(OnlyHere(range(4)), 2, n_processes=1) as it:
        with pytest.raises(RuntimeError, match='(?s)could not start.*cannot be loaded'):
            it.next()


def test_lambda_decor_fun_works_under_fork(fork):
    with DecorableMultiprocessIterator(list(range(4)), 2, shuffle=False, n_processes=1,
                                       decor_fun=lambda d, i: d[i] + 1) as it:
        assert it.next() == [1, 2]


# --- failures ---------------------------------------------------------------------------------

def test_worker_error_keeps_type_message_index_and_worker_traceback(start_method):
    with DecorableMultiprocessIterator(list(range(10)), 4, shuffle=False, n_processes=2,
                                       decor_fun=fail_at_five) as it:
        it.next()
        with pytest.raises(ValueError, match='cannot decorate example 5') as info:
            it.next()
    assert any('dataset index 5' in note for note in info.value.__notes__)
    assert 'Traceback in worker process' in str(info.value.__cause__)
    assert 'fail_at_five' in str(info.value.__cause__)


def test_exception_that_cannot_travel_keeps_its_text_and_the_failing_index(start_method):
    with DecorableMultiprocessIterator(list(range(4)), 2, shuffle=False, n_processes=1,
                                       decor_fun=raise_two_argument_error) as it:
        with pytest.raises(RuntimeError, match='TwoArgumentError: 0-x') as info:
            it.next()
    assert any('dataset index 0' in note for note in info.value.__notes__)


def test_constructing_an_iterator_leaves_the_start_method_unset():
    code = textwrap.dedent('''
        import multiprocessing
        from researchutils.chainer.iterators import DecorableMultiprocessIterator
        it = DecorableMultiprocessIterator(list(range(4)), 2, n_processes=1)
        it.finalize()
        multiprocessing.set_start_method('spawn')
        print(multiprocessing.get_start_method())
    ''')
    result = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'spawn'


def _large_bytes(obj):
    return [value for value in vars(obj).values()
            if isinstance(value, (bytes, bytearray)) and len(value) > 1 << 20]


def test_pickling_start_methods_keep_no_pickled_copy_of_the_dataset(pickling):
    dataset = numpy.zeros((8, 1 << 18), numpy.float32)   # 8 MiB
    with DecorableMultiprocessIterator(dataset, 2, shuffle=False, n_processes=1) as it:
        assert _large_bytes(it) == []
        it.next()
        assert _large_bytes(it) == [] and _large_bytes(it._pool) == []


def test_unpicklable_example_error_names_index():
    with DecorableMultiprocessIterator(list(range(4)), 2, shuffle=False, n_processes=1,
                                       decor_fun=unpicklable_example) as it:
        with pytest.raises(Exception) as info:
            it.next()
    assert any('dataset index 0 cannot be pickled' in note for note in info.value.__notes__)


def test_killed_worker_is_reported_not_waited_for():
    # No dataset_timeout: were the death not seen, next() would wait forever.
    with DecorableMultiprocessIterator(list(range(64)), 4, shuffle=False, n_processes=2,
                                       decor_fun=index_and_pid, dataset_timeout=None) as it:
        pids = {pid for _, pid in it.next()}
        os.kill(pids.pop(), signal.SIGKILL)
        with pytest.raises(RuntimeError, match='killed by SIGKILL'):
            for _ in range(10):  # batches already made before the kill still come
                it.next()


def test_worker_killed_while_idle_is_reported_even_if_others_do_its_work():
    before = set(multiprocessing.active_children())
    with DecorableMultiprocessIterator(list(range(64)), 4, shuffle=False, n_processes=2,
                                       decor_fun=index_and_pid, dataset_timeout=None) as it:
        it.next()
        pids = worker_pids(before)
        wait_until(lambda: all(waiting_for_a_task(pid) for pid in pids),
                   'the workers did not finish the batch made ahead')
        os.kill(pids[0], signal.SIGKILL)
        wait_until(lambda: not is_running(pids[0]), 'the killed worker did not exit')
        # The other worker could make every batch; the death is still reported, by the
        # first call after it.
        with pytest.raises(RuntimeError, match='killed by SIGKILL'):
            it.next()


def test_worker_killed_holding_the_task_queue_read_lock_is_reported_and_next_recovers():
    before = set(multiprocessing.active_children())
    with DecorableMultiprocessIterator(list(range(64)), 4, shuffle=False, n_processes=2,
                                       decor_fun=index_and_pid, dataset_timeout=None) as it:
        first = it.next()
        pids = worker_pids(before)
        wait_until(lambda: all(waiting_for_a_task(pid) for pid in pids),
                   'the workers did not finish the batch made ahead')

        def reads_the_queue(pid):
            # The worker waiting for a task in read() holds the queue's read lock; the
            # other sleeps on that lock (a futex).
            with open('/proc/{}/wchan'.format(pid)) as f:
                return 'pipe_read' in f.read()

        holder = next(pid for pid in pids if reads_the_queue(pid))
        os.kill(holder, signal.SIGKILL)
        items = [item for item, _ in first]
        with pytest.raises(RuntimeError, match='killed by SIGKILL'):
            for _ in range(10):
                items += [item for item, _ in it.next()]
        assert [item for item, _ in it.next()] == list(range(len(items), len(items) + 4))


@pytest.mark.parametrize('decor_fun,message', [
    (kill_self_at_four, 'killed by SIGKILL'), (exit_at_four, 'exited with code 3')])
def test_worker_dying_in_decor_fun_is_reported(start_method, decor_fun, message):
    with DecorableMultiprocessIterator(list(range(10)), 4, shuffle=False, n_processes=2,
                                       decor_fun=decor_fun, dataset_timeout=None) as it:
        # Raised by the first or the second call: the first waits while the
        # second batch, which holds index 4, is already being made.
        with pytest.raises(RuntimeError, match=message):
            take(it, 2)


def test_next_after_worker_death_starts_new_workers_and_retries():
    with DecorableMultiprocessIterator(list(range(64)), 4, shuffle=False, n_processes=2,
                                       decor_fun=index_and_pid) as it:
        first = it.next()
        old_pids = {pid for _, pid in first}
        os.kill(old_pids.pop(), signal.SIGKILL)
        items = [item for item, _ in first]
        with pytest.raises(RuntimeError):
            for _ in range(10):
                items += [item for item, _ in it.next()]
        batch = it.next()
        assert [item for item, _ in batch] == list(range(len(items), len(items) + 4))
        assert not {pid for _, pid in batch} & {pid for _, pid in first}


@pytest.mark.timeout(60)
def test_worker_dying_while_sending_a_large_example_is_reported_and_next_recovers(
        start_method, tmp_path):
    # The example is far larger than a pipe holds, and the main process does not
    # read between calls to next(): the worker dies with its message half-written.
    dataset = BigExampleOnSignal(range(16), 4, tmp_path / 'go', tmp_path / 'sent')
    # No dataset_timeout: a half-sent message that blocked next() would block it forever.
    with DecorableMultiprocessIterator(dataset, 4, shuffle=False, n_processes=2,
                                       decor_fun=exit_while_sending,
                                       dataset_timeout=None) as it:
        assert it.next() == [0, 1, 2, 3]
        (tmp_path / 'go').touch()
        wait_until(lambda: pid_in(tmp_path / 'sent') and not is_running(
            pid_in(tmp_path / 'sent')), 'the worker did not exit while sending')
        with pytest.raises(RuntimeError, match='exited with code 1'):
            it.next()
        big, *rest = it.next()
    assert big.nbytes == BIG_EXAMPLE_BYTES
    assert rest == [5, 6, 7]


def test_slow_batch_warns_after_dataset_timeout():
    with DecorableMultiprocessIterator(list(range(4)), 2, n_processes=1, decor_fun=slow_item,
                                       dataset_timeout=0.1) as it:
        with pytest.warns(DecorableMultiprocessIterator.TimeoutWarning, match='dataset_timeout'):
            it.next()


# --- processes -----------------------------------------------------------------------------------

def test_finalize_leaves_no_child_process(start_method):
    it = DecorableMultiprocessIterator(list(range(16)), 4, n_processes=2,
                                       decor_fun=pid_after_sleep)
    pids = {pid for batch in take(it, 2) for pid in batch}
    it.finalize()
    assert not any(is_running(pid) for pid in pids)
    assert multiprocessing.active_children() == []


def test_finalize_does_not_wait_for_a_stuck_decor_fun(tmp_path):
    # The batches made ahead never end: finalize() returns only if it does not wait.
    it = DecorableMultiprocessIterator(BlocksFrom(range(8), 2, tmp_path), 2, shuffle=False,
                                       n_processes=1, decor_fun=block_forever, n_prefetch=3)
    it.next()
    wait_until(lambda: list(tmp_path.glob('blocking_*')), 'the worker did not get stuck')
    it.finalize()
    assert multiprocessing.active_children() == []


EXIT_WITHOUT_FINALIZE = textwrap.dedent('''
    import multiprocessing, sys
    from researchutils.chainer.iterators import DecorableMultiprocessIterator
    from tests.support.iterators import pid_after_sleep
    if __name__ == '__main__':
        multiprocessing.set_start_method(sys.argv[1])
        it = DecorableMultiprocessIterator(list(range(400)), 4, n_processes=2, n_prefetch=8,
                                           decor_fun=pid_after_sleep)
        print(' '.join(str(pid) for pid in set(it.next())), flush=True)
''')


def test_interpreter_exiting_without_finalize_does_not_hang(start_method, tmp_path):
    script = tmp_path / 'script.py'
    script.write_text(EXIT_WITHOUT_FINALIZE)
    # The timeout catches a hang (it would last forever).
    result = subprocess.run([sys.executable, str(script), start_method], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO), capture_output=True,
                            text=True, timeout=DEADLINE)
    assert result.returncode == 0, result.stderr
    assert 'Traceback' not in result.stderr
    pids = [int(pid) for pid in result.stdout.split()]
    wait_until(lambda: not any(os.path.exists('/proc/{}'.format(pid)) for pid in pids),
               'worker processes outlived the interpreter')


KILLED_WHILE_TRAINING = textwrap.dedent('''
    import multiprocessing, sys, time
    from researchutils.chainer.iterators import DecorableMultiprocessIterator
    from tests.support.iterators import pid_after_sleep
    if __name__ == '__main__':
        multiprocessing.set_start_method(sys.argv[1])
        it = DecorableMultiprocessIterator(list(range(400)), 4, n_processes=2,
                                           decor_fun=pid_after_sleep)
        it.next()
        print(' '.join(str(child.pid) for child in multiprocessing.active_children()),
              flush=True)
        time.sleep(600)
''')


def test_workers_exit_when_the_main_process_is_killed(start_method, tmp_path):
    script = tmp_path / 'script.py'
    script.write_text(KILLED_WHILE_TRAINING)
    main = subprocess.Popen([sys.executable, str(script), start_method], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE,
                            text=True)
    try:
        pids = [int(pid) for pid in main.stdout.readline().split()]
    finally:
        main.kill()
        main.wait(30)
        main.stdout.close()
    assert len(pids) == 2
    wait_until(lambda: not any(is_running(pid) for pid in pids),
               'worker processes outlived their killed parent')


def test_workers_outlive_a_pause_between_batches(start_method):
    # A long training step leaves the workers idle for longer than their check of the parent.
    with DecorableMultiprocessIterator(list(range(16)), 4, shuffle=False, n_processes=2,
                                       decor_fun=square) as it:
        first = it.next()
        time.sleep(2.5)
        assert [first, it.next(), it.next()] == [[0, 1, 4, 9], [16, 25, 36, 49],
                                                 [64, 81, 100, 121]]


def test_reset_after_finalize_is_not_implemented_error_as_in_chainer():
    it = DecorableMultiprocessIterator(list(range(4)), 2, repeat=False, n_processes=1)
    take(it, 2)
    it.finalize()
    with pytest.raises(NotImplementedError, match='finalize'):
        it.reset()


def test_loading_a_snapshot_after_finalize_is_not_implemented_error():
    it = DecorableMultiprocessIterator(list(range(4)), 2, n_processes=1)
    it.next()
    saved = {}
    it.serialize(serializers.DictionarySerializer(saved))
    it.finalize()
    with pytest.raises(NotImplementedError, match='finalize'):
        it.serialize(serializers.NpzDeserializer(saved))


def test_next_after_finalize_is_an_error_and_starts_no_worker():
    it = DecorableMultiprocessIterator(list(range(8)), 2, n_processes=1)
    it.next()
    it.finalize()
    for _ in range(2):
        with pytest.raises(RuntimeError, match='finalize'):
            it.next()
    assert multiprocessing.active_children() == []


def test_snapshot_can_still_be_saved_after_finalize():
    it = DecorableMultiprocessIterator(list(range(8)), 2, shuffle=False, n_processes=1)
    it.next()
    it.finalize()
    saved = {}
    it.serialize(serializers.DictionarySerializer(saved))
    assert saved['current_position'] == 2


def test_finalize_from_another_thread_stops_a_waiting_next_with_a_clear_error(tmp_path):
    # The batch never comes: next() returns only because finalize() stops it.
    it = DecorableMultiprocessIterator(BlocksFrom(range(8), 0, tmp_path), 4, n_processes=1,
                                       decor_fun=block_forever)

    def finalize_once_stuck():
        wait_until(lambda: list(tmp_path.glob('blocking_*')), 'the worker did not get stuck')
        it.finalize()

    finalizer = threading.Thread(target=finalize_once_stuck)
    finalizer.start()
    with pytest.raises(RuntimeError, match='finalize'):
        it.next()
    finalizer.join(DEADLINE)
    assert not finalizer.is_alive()
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize('clone', [copy.copy, lambda it: pickle.loads(pickle.dumps(it))],
                         ids=['copy', 'pickle'])
def test_clone_keeps_working_after_the_original_is_finalized(start_method, clone):
    it = DecorableMultiprocessIterator(list(range(10)), 3, shuffle=False, n_processes=2,
                                       decor_fun=square)
    take(it, 2)
    twin = clone(it)
    it.finalize()
    with twin:
        assert take(twin, 2) == [[36, 49, 64], [81, 0, 1]]
    assert multiprocessing.active_children() == []


def test_clone_of_a_finalized_iterator_is_usable():
    it = DecorableMultiprocessIterator(list(range(10)), 3, shuffle=False, n_processes=1)
    it.next()
    it.finalize()
    with copy.copy(it) as twin:
        assert twin.next() == [3, 4, 5]


def test_maxtasksperchild_replaces_workers_and_keeps_batches():
    dataset = list(range(12))
    with DecorableMultiprocessIterator(dataset, 4, shuffle=False, n_processes=1,
                                       decor_fun=index_and_pid, maxtasksperchild=2) as it:
        batches = take(it, 6)
    assert [item for batch in batches for item, _ in batch] == dataset * 2
    assert len({pid for batch in batches for _, pid in batch}) >= 6


def test_maxtasksperchild_bounds_the_examples_each_worker_makes():
    with DecorableMultiprocessIterator(list(range(12)), 4, shuffle=False, n_processes=2,
                                       decor_fun=index_and_pid, maxtasksperchild=3) as it:
        batches = take(it, 6)
    made = collections.Counter(pid for batch in batches for _, pid in batch)
    assert max(made.values()) <= 3
    assert sum(made.values()) == 24


def test_ctrl_c_in_main_process_does_not_reach_workers():
    with DecorableMultiprocessIterator(list(range(8)), 2, n_processes=1,
                                       decor_fun=index_and_pid) as it:
        (_, pid), _ = it.next()
        os.kill(pid, signal.SIGINT)
        # The worker makes the batches after the one made ahead: it went on working.
        assert {worker for _ in range(3) for _, worker in it.next()} == {pid}
        assert is_running(pid)


def test_iterator_can_be_used_from_another_thread():
    result = []
    with DecorableMultiprocessIterator(list(range(8)), 2, shuffle=False, n_processes=1) as it:
        thread = threading.Thread(target=lambda: result.append(it.next()))
        thread.start()
        thread.join(30)
    assert result == [[0, 1]]


# --- arguments -----------------------------------------------------------------------------------

@pytest.mark.parametrize('arguments,error', [
    ({'n_processes': 0}, ValueError), ({'n_processes': 1.5}, TypeError),
    ({'n_prefetch': 0}, ValueError), ({'n_prefetch': None}, TypeError),
    ({'dataset_timeout': 0}, ValueError), ({'dataset_timeout': -1.0}, ValueError),
    ({'dataset_timeout': 'soon'}, TypeError), ({'maxtasksperchild': 0}, ValueError),
    ({'shared_mem': -1}, ValueError), ({'shared_mem': 1.5}, TypeError),
], ids=repr)
def test_bad_multiprocess_argument_is_rejected_naming_it(arguments, error):
    (name, value), = arguments.items()
    with pytest.raises(error, match=name) as info:
        DecorableMultiprocessIterator(list(range(4)), 2, **arguments)
    assert repr(value) in str(info.value)


def test_shared_mem_is_accepted_and_ignored():
    with DecorableMultiprocessIterator(list(range(4)), 2, shuffle=False, n_processes=1,
                                       shared_mem=1 << 20) as it:
        assert it.next() == [0, 1]


def test_default_n_processes_is_the_usable_cores():
    it = DecorableMultiprocessIterator(list(range(4)), 2)
    assert it.n_processes == len(os.sched_getaffinity(0))
    it.finalize()
