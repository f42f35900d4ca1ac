"""The pool of worker processes (researchutils/_process_pool.py), used directly.

What its two owners (DecorableMultiprocessIterator, DataManager) rely on: a batch's items
come back in order whatever order its chunks are made in; the first failing item's error
is raised, with the worker's traceback as its cause; a worker's death is reported with
its exit code or signal, never waited on; a worker that retires is replaced without
losing work; ``close()``, even from another thread while a batch is awaited, stops every
worker at once and leaves no child process and no open pipe.

The items say what the worker does with them (:class:`_Source`); a worker that must wait
waits for a file that the test, or another item, creates: no wait here is a fixed time.
"""
import gc
import multiprocessing
import os
import signal
import threading
import time
import weakref

import pytest

from researchutils._process_pool import PoolClosedError, ProcessPool, WorkerDiedError
from tests.support.processes import is_running
from tests.support.start_methods import PICKLING_START_METHODS, using_start_method

# Each test takes about a second; a pool that hangs fails it long before the suite stops.
pytestmark = pytest.mark.timeout(30)
# Generous: what these waits allow is never what they normally take.
DEADLINE = 60.
# The real-time signal SIGRTMIN + 1 has no name of its own in Python's signal.Signals.
UNNAMED_SIGNAL = signal.SIGRTMIN + 1


def _wait_for_file(path):
    deadline = time.monotonic() + DEADLINE
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError('{} never appeared'.format(path))
        time.sleep(0.005)


def _touch(path):
    """Creates ``path`` holding this pid, whole when it appears."""
    with open(path + '.part', 'w') as stream:
        stream.write(str(os.getpid()))
    os.replace(path + '.part', path)


def _rebuild_only_in(pid, message):
    if os.getpid() != pid:
        raise RuntimeError('this exception cannot be rebuilt here')
    return _Unrebuildable(pid, message)


class _Unrebuildable(Exception):
    """Travels from the worker that raised it, but cannot be rebuilt in the main process
    (as an exception of a module that only the worker can import)."""

    def __init__(self, pid, message):
        super(_Unrebuildable, self).__init__(message)
        self.pid = pid

    def __reduce__(self):
        return _rebuild_only_in, (self.pid, self.args[0])


class _Source(object):
    """Makes each item ``(action, argument)`` into ``(argument, key, pid)`` after doing
    ``action``: ``'value'`` nothing, ``'raise'`` raise ValueError(argument), ``'exit'``
    exit with code argument, ``'signal'`` die of signal argument, ``'wait'`` wait until the
    file argument exists, ``'touch'`` create the file argument (holding this pid),
    ``'spin'`` create it, then hold the GIL in C code for ever, ``'orphan'`` start a child
    (by fork: it holds the pipes) that writes its pid to the file argument + '.pid' and
    waits until the file argument exists, then exit with code 2, ``'unrebuildable'`` raise
    an exception that the main process cannot unpickle, ``'whoami'`` make the worker's
    process name and whether it is a daemon, ``'linger'`` start a thread (no daemon) that
    waits until the file argument exists, so the worker does not exit before then."""

    seed = 0

    def make(self, items, keys):
        made = []
        for index, (action, argument) in enumerate(items):
            if action == 'raise':
                raise ValueError(argument)
            if action == 'exit':
                os._exit(argument)
            if action == 'signal':
                os.kill(os.getpid(), argument)
            if action == 'wait':
                _wait_for_file(argument)
            if action == 'touch':
                _touch(argument)
            if action == 'spin':
                _touch(argument)
                sum(range(1 << 62))  # in C: the GIL is never released
            if action == 'orphan':
                if os.fork() == 0:
                    try:
                        _touch(argument + '.pid')
                        _wait_for_file(argument)
                    finally:
                        os._exit(0)
                os._exit(2)
            if action == 'unrebuildable':
                raise _Unrebuildable(os.getpid(), argument)
            if action == 'linger':
                # A thread that is no daemon: the worker's exit waits for it.
                threading.Thread(target=_wait_for_file, args=(argument,)).start()
            if action == 'whoami':
                process = multiprocessing.current_process()
                argument = (process.name, process.daemon)
            made.append((argument, None if keys is None else keys[index], os.getpid()))
        return made

    def parts(self):
        return [('make', self.make)]

    def describe(self, item):
        return 'item {!r}'.format(item)


class _Unsendable(_Source):
    """Pickles in the main process, but its unpickling fails in the worker."""

    def __reduce__(self):
        return _refuse_to_load, ('the source is broken',)


def _refuse_to_load(message):
    raise RuntimeError(message)


class _Unpicklable(_Source):
    """Cannot be pickled at all: it holds a lambda, as a user's decor_fun may be."""

    def __init__(self):
        self.function = lambda example: example

    def parts(self):
        return [('decor_fun', self.function)]


def _values(values):
    return [('value', value) for value in values]


def _workers(owner):
    return [child for child in multiprocessing.active_children()
            if child.name.startswith(owner + '-')]


def _open_pipes():
    """This process's open pipes (Linux: /proc), as ``(descriptor, pipe)`` pairs."""
    pipes = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink('/proc/self/fd/' + fd)
        except OSError:  # the descriptor of the listing itself, closed since
            continue
        if target.startswith('pipe:'):
            pipes.add((fd, target))
    return pipes


@pytest.fixture
def make_pool(request):
    """Makes pools, each owned by a name of this test, and closes them at the end.

    Under the fork start method unless told (fast)."""
    pools = []

    def make(n_processes=2, maxtasksperchild=None, source=None, method='fork'):
        owner = 'pool-test-{}-{}'.format(os.getpid(), len(pools))
        with using_start_method(method):
            context = multiprocessing.get_context()
            pool = ProcessPool(source or _Source(), context, n_processes, maxtasksperchild,
                               owner)
        pool.owner = owner
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close()


def _never():
    raise AssertionError('on_timeout was called')


def _collect(pool, batch_id, dataset_timeout=None, on_timeout=_never):
    return pool.collect(batch_id, dataset_timeout, on_timeout)


def test_results_come_in_order_whatever_order_the_chunks_are_made_in(make_pool, tmp_path):
    pool = make_pool(n_processes=3)
    # The first chunk waits until the last one is made.
    last_made = str(tmp_path / 'last')
    items = [('wait', last_made)] + _values(range(1, 9)) + [('touch', last_made)]
    batch = pool.submit(items, ['key{}'.format(i) for i in range(10)], 4)
    made = _collect(pool, batch)
    assert [(value, key) for value, key, _ in made] == (
        [(last_made, 'key0')] + [(i, 'key{}'.format(i)) for i in range(1, 9)]
        + [(last_made, 'key9')])


def test_keys_none_reach_the_source_as_none(make_pool):
    pool = make_pool()
    made = _collect(pool, pool.submit(_values(range(5)), None, 2))
    assert [(value, key) for value, key, _ in made] == [(i, None) for i in range(5)]


def test_each_batch_gets_its_own_items_whatever_order_they_are_collected_in(make_pool):
    pool = make_pool()
    first = pool.submit(_values(range(4)), None, 2)
    second = pool.submit(_values(range(10, 17)), None, 3)
    assert [value for value, _, _ in _collect(pool, second)] == list(range(10, 17))
    assert [value for value, _, _ in _collect(pool, first)] == list(range(4))
    empty = pool.submit([], [], 2)
    assert _collect(pool, empty) == []


def test_the_chunks_are_shared_among_the_workers(make_pool, tmp_path):
    pool = make_pool(n_processes=2)
    # Each chunk waits until the other is made: one worker alone could not make both.
    first, second = str(tmp_path / 'first'), str(tmp_path / 'second')
    made = _collect(pool, pool.submit([('touch', first), ('wait', second),
                                       ('touch', second), ('wait', first)], None, 2))
    pids = [pid for _, _, pid in made]
    assert pids[0] == pids[1] != pids[2] == pids[3]
    assert set(pids) == {worker.pid for worker in _workers(pool.owner)}


def test_the_workers_are_daemons_named_for_their_owner_and_slot(make_pool, tmp_path):
    pool = make_pool(n_processes=2)
    # Each chunk waits until the other is made: each worker makes one.
    first, second = str(tmp_path / 'first'), str(tmp_path / 'second')
    made = _collect(pool, pool.submit([('touch', first), ('wait', second), ('whoami', None),
                                       ('touch', second), ('wait', first), ('whoami', None)],
                                      None, 2))
    assert {made[2][0], made[5][0]} == {(pool.owner + '-0', True), (pool.owner + '-1', True)}


def test_the_first_failing_item_in_batch_order_is_raised_with_the_workers_traceback(
        make_pool, tmp_path):
    pool = make_pool(n_processes=2)
    # The later chunk fails first; the earlier one fails after it.
    later_failed = str(tmp_path / 'later')
    items = [('wait', later_failed), ('raise', 'first bad item'),
             ('touch', later_failed), ('raise', 'second bad item')]
    batch = pool.submit(items, None, 2)
    with pytest.raises(ValueError, match='first bad item') as raised:
        _collect(pool, batch)
    cause = str(raised.value.__cause__)
    assert 'Traceback in worker process' in cause
    pid = int(cause.split('Traceback in worker process ')[1].split(':')[0])
    assert pid in {worker.pid for worker in _workers(pool.owner)}
    # The worker's own frames, down to the line that raised.
    assert 'in make' in cause and 'raise ValueError(argument)' in cause
    assert 'ValueError: first bad item' in cause
    # The pool goes on: the next batch is made.
    assert [value for value, _, _ in _collect(pool, pool.submit(_values([7]), None, 1))] == [7]


def test_an_exception_the_main_process_cannot_unpickle_is_reported_with_the_traceback(
        make_pool):
    pool = make_pool()
    batch = pool.submit([('unrebuildable', 'lost in transit')], None, 1)
    with pytest.raises(RuntimeError, match='could not be unpickled') as raised:
        _collect(pool, batch)
    assert not isinstance(raised.value, _Unrebuildable)
    cause = str(raised.value.__cause__)
    assert 'lost in transit' in cause and 'Traceback in worker process' in cause
    # The message names the worker, as the traceback does.
    pid = int(cause.split('Traceback in worker process ')[1].split(':')[0])
    assert 'worker process {} '.format(pid) in str(raised.value)


@pytest.mark.parametrize('exit_code', [0, 3])
def test_a_worker_that_exits_is_reported_with_its_exit_code(make_pool, exit_code):
    pool = make_pool()
    pids = {worker.pid for worker in _workers(pool.owner)}
    batch = pool.submit(_values(range(3)) + [('exit', exit_code)], None, 2)
    with pytest.raises(WorkerDiedError, match='exited with code {}'.format(exit_code)) as raised:
        _collect(pool, batch)
    assert raised.value.signal_number is None
    message = str(raised.value)
    assert pool.owner in message
    assert any(str(pid) in message for pid in pids)


@pytest.mark.parametrize('number, name', [(signal.SIGKILL, 'SIGKILL'),
                                          (signal.SIGSEGV, 'SIGSEGV'),
                                          (UNNAMED_SIGNAL, 'signal {}'.format(UNNAMED_SIGNAL))])
def test_a_worker_killed_by_a_signal_is_reported_with_the_signal(make_pool, number, name):
    pool = make_pool()
    batch = pool.submit([('signal', number)], None, 1)
    with pytest.raises(WorkerDiedError, match='was killed by {}'.format(name)) as raised:
        _collect(pool, batch)
    assert raised.value.signal_number == number


def test_a_worker_that_died_idle_is_reported_at_the_next_batch(make_pool):
    pool = make_pool(n_processes=2)
    victim = _workers(pool.owner)[0]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(DEADLINE)
    assert victim.exitcode == -signal.SIGKILL
    # The other worker makes the batch, but the death is reported all the same.
    batch = pool.submit(_values(range(2)), None, 1)
    with pytest.raises(WorkerDiedError, match='was killed by SIGKILL') as raised:
        _collect(pool, batch)
    assert 'worker process {} '.format(victim.pid) in str(raised.value)


def test_a_worker_that_exits_while_its_child_holds_its_pipe_is_reported(make_pool, tmp_path):
    pool = make_pool(n_processes=1)
    released = str(tmp_path / 'released')
    batch = pool.submit([('orphan', released)], None, 1)
    try:
        with pytest.raises(WorkerDiedError, match='exited with code 2'):
            _collect(pool, batch)
        # Reported at once, not when the child lets go of the pipe.
        _wait_for_file(released + '.pid')
        with open(released + '.pid') as stream:
            assert is_running(int(stream.read()))
    finally:
        _touch(released)


def test_a_retiring_worker_is_replaced_and_no_item_is_lost(make_pool):
    pool = make_pool(n_processes=1, maxtasksperchild=2)
    pids = []
    for start in range(0, 12, 2):
        made = _collect(pool, pool.submit(_values(range(start, start + 2)), None, 1))
        assert [value for value, _, _ in made] == [start, start + 1]
        pids.append(made[0][2])
    # Each batch made by a new worker, in the retired one's place.
    assert len(set(pids)) == len(pids)
    assert {worker.name for worker in _workers(pool.owner)} == {pool.owner + '-0'}


def test_batches_submitted_ahead_survive_the_retirement_of_their_worker(make_pool):
    pool = make_pool(n_processes=2, maxtasksperchild=3)
    batches = [pool.submit(_values(range(start, start + 4)), None, 2)
               for start in range(0, 40, 4)]
    made = [value for batch in batches for value, _, _ in _collect(pool, batch)]
    assert made == list(range(40))
    assert {worker.name for worker in _workers(pool.owner)} == {pool.owner + '-0',
                                                                 pool.owner + '-1'}


def test_a_cancelled_batch_is_dropped_and_the_pool_goes_on(make_pool, tmp_path):
    pool = make_pool(n_processes=1)
    released = str(tmp_path / 'released')
    cancelled = pool.submit([('wait', released)] + _values(range(3)), None, 2)
    pool.cancel(cancelled)
    kept = pool.submit(_values(range(10, 13)), None, 2)
    _touch(released)
    assert [value for value, _, _ in _collect(pool, kept)] == [10, 11, 12]
    # The pool keeps nothing of a cancelled batch, nor of a collected one: neither can be
    # collected (again), and cancelling either does nothing.
    for forgotten in (cancelled, kept):
        with pytest.raises(PoolClosedError):
            _collect(pool, forgotten)
        pool.cancel(forgotten)


def test_close_from_another_thread_while_a_batch_is_awaited(make_pool, tmp_path):
    pipes = _open_pipes()
    pool = make_pool(n_processes=2)
    workers = _workers(pool.owner)
    started = str(tmp_path / 'started')
    batch = pool.submit([('touch', started), ('wait', str(tmp_path / 'never'))], None, 1)
    # Closed once a worker is busy with the batch and collect() waits for it (it calls
    # on_timeout from its wait): a close() before collect() starts would be refused at its
    # start, and would not test the wait.
    waiting = threading.Event()
    closer = threading.Thread(
        target=lambda: (_wait_for_file(started), waiting.wait(DEADLINE), pool.close()))
    closer.start()
    try:
        with pytest.raises(PoolClosedError, match='finalize'):
            _collect(pool, batch, 0.01, waiting.set)
    finally:
        closer.join(DEADLINE)
    assert waiting.is_set()
    assert not any(worker.is_alive() for worker in workers)
    assert not _workers(pool.owner)
    # Neither the result pipes nor the task queue's are left open (nor, once nothing
    # refers to the processes, their sentinels).
    del workers
    _wait_until(lambda: _open_pipes() <= pipes,
                'the pool left {} open'.format(_open_pipes() - pipes))
    with pytest.raises(PoolClosedError):
        _collect(pool, batch)


def test_close_stops_workers_busy_in_c_code_at_once_and_leaves_no_child(make_pool, tmp_path):
    pipes = _open_pipes()
    pool = make_pool(n_processes=2, maxtasksperchild=1)
    spinning = str(tmp_path / 'spinning')
    # The first worker retires after one item, and its successor spins.
    _collect(pool, pool.submit(_values([1]), None, 1))
    pool.submit([('spin', spinning)], None, 1)
    _wait_for_file(spinning)
    with open(spinning) as stream:
        spinner = int(stream.read())
    workers = _workers(pool.owner)
    pool.close()
    assert not any(worker.is_alive() for worker in workers)
    assert [worker.exitcode for worker in workers if worker.pid == spinner] == [-signal.SIGKILL]
    assert not _workers(pool.owner)
    del workers
    _wait_until(lambda: _open_pipes() <= pipes,
                'the pool left {} open'.format(_open_pipes() - pipes))
    pool.close()  # again: nothing to do


def test_dataset_timeout_calls_on_timeout_while_the_batch_is_slow(make_pool, tmp_path):
    pool = make_pool()
    released = str(tmp_path / 'released')
    # One chunk, made only once on_timeout has been called many times.
    batch = pool.submit(_values([1]) + [('wait', released)], None, 1)
    calls = []

    def on_timeout():
        calls.append(time.monotonic())
        if len(calls) == 40:
            _touch(released)

    started = time.monotonic()
    made = pool.collect(batch, 0.01, on_timeout)
    assert [value for value, _, _ in made] == [1, released]
    assert len(calls) >= 40
    # Never before its time: dataset_timeout seconds apart.
    gaps = [later - earlier for earlier, later in zip([started] + calls, calls)]
    assert min(gaps) >= 0.01


def test_no_on_timeout_for_a_batch_made_in_time(make_pool, tmp_path):
    pool = make_pool()
    batch = pool.submit(_values(range(4)), None, 2)
    assert [value for value, _, _ in _collect(pool, batch, DEADLINE)] == list(range(4))


def test_a_worker_that_cannot_unpickle_the_source_says_why(make_pool):
    pool = make_pool(n_processes=1, source=_Unsendable(), method='spawn')
    pid = pool._workers[0].process.pid
    batch = pool.submit(_values([1]), None, 1)
    with pytest.raises(WorkerDiedError, match='could not start') as raised:
        _collect(pool, batch)
    message = str(raised.value)
    assert 'worker process {} '.format(pid) in message
    assert 'the source is broken' in message
    assert 'Traceback' in message and '_refuse_to_load' in message
    assert raised.value.signal_number is None


def _wait_until(condition, what):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.01)


def test_under_fork_the_source_is_never_pickled(make_pool):
    # A forked worker has the source already: a lambda in it is no obstacle.
    pool = make_pool(source=_Unpicklable(), method='fork')
    made = _collect(pool, pool.submit(_values(range(4)), None, 2))
    assert [value for value, _, _ in made] == list(range(4))


@pytest.mark.parametrize('method', PICKLING_START_METHODS)
def test_a_source_that_cannot_be_pickled_is_refused_naming_the_start_method_and_owner(
        make_pool, method):
    with pytest.raises(TypeError) as raised:
        make_pool(source=_Unpicklable(), method=method)
    message = str(raised.value)
    assert 'decor_fun' in message and '<lambda>' in message
    assert repr(method) in message
    assert message.startswith('pool-test-')  # the owner, as make_pool names it


def test_a_pool_made_under_spawn_first_frees_the_garbage_in_reference_cycles(make_pool):
    # Freed later, by a collection that starts inside the resource tracker while the new
    # queue registers its semaphores, a garbage pool's semaphores would unregister
    # reentrantly, which Python 3.12+ refuses with an exception nobody can catch.
    class Cycle(object):
        pass

    garbage = Cycle()
    garbage.itself = garbage
    freed = weakref.ref(garbage)
    del garbage
    gc.disable()
    try:
        make_pool(n_processes=1, method='spawn')
        assert freed() is None
    finally:
        gc.enable()


def test_close_stops_a_retired_worker_that_has_not_exited_yet(make_pool, tmp_path):
    # Each worker retires after one item; the first two linger after retiring (their exit
    # waits for a thread of theirs) while the pool goes on with their successors.
    released = str(tmp_path / 'released')
    pool = make_pool(n_processes=1, maxtasksperchild=1)
    try:
        lingering = [_collect(pool, pool.submit([('linger', released)], None, 1))[0][2]
                     for _ in range(2)]
        # The third worker starts only once the second has said it retires.
        _collect(pool, pool.submit(_values([1]), None, 1))
        assert all(is_running(pid) for pid in lingering)
        pool.close()
        assert not any(is_running(pid) for pid in lingering)
    finally:
        _touch(released)
