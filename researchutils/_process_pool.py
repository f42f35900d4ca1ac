"""A pool of worker processes that make the items of submitted batches (private).

Shared by :class:`~researchutils.chainer.iterators.DecorableMultiprocessIterator`
(an item is an example) and the iterators of
:class:`~researchutils.chainer.data_loading.DataManager` (an item is a whole
batch). A *source* is a picklable object with a ``seed`` attribute and a method
``make(items, keys)`` that returns the made items; a worker gets its copy once,
when it starts.

The main process puts chunks of a batch on one task queue; each worker takes a
chunk, makes its items and sends them back through a pipe of its own
(:mod:`researchutils._process_pipe`). The main process waits on all the read
ends and the workers' sentinels at once (:func:`multiprocessing.connection.wait`),
so:

* a worker that dies, even in the middle of sending a large result, ends its
  pipe (end of file, or its sentinel fires); the death is reported at once,
  never waited on;
* no lock is shared by the writers, so a dying worker cannot block the others;
* a partly arrived message never blocks the main process, so the
  ``dataset_timeout`` warnings keep coming while one is slow.

The task queue stays shared: a worker killed while it reads a task can leave
the queue's read lock held and half a task in its pipe, which would stall the
other workers, but the main process reports that death through the worker's
result pipe and then shuts the whole pool down, queue included; the owner
starts a fresh one (:class:`~researchutils._lazy_pool.LazyPool` does) and
retries.

The signals that stop a job reach the workers too (``scancel``, a time limit,
``pkill``), often while the main process waits for a batch; they are the main
process's to act on, so a worker leaves them to it (see
:mod:`researchutils._process_worker`) and a batch is never lost to them. The
pool starts every worker, and its task queue, with them blocked; a death by a
signal is reported with that signal (:attr:`WorkerDiedError.signal_number`).

No wait here ends by a time limit that a busy machine could reach: a pipe's
end and a sentinel are events, and the bounds on reaping a worker that has
exited or was killed are far above what that takes.

A pool still open when the interpreter exits is closed by an exit hook that
runs before :mod:`multiprocessing`'s own: it would terminate the workers with
SIGTERM, which one that is still starting holds back until it has unpickled
what it was sent, and by then the task queue's semaphore may be gone.

Tests: through its two owners, tests/chainer/iterators/
test_decorable_multiprocess_iterator.py and tests/chainer/data_loading/test_data_manager.py.
"""
from __future__ import annotations

import atexit
import gc
import multiprocessing.connection
import os
import pickle
import signal
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from researchutils._chunks import chunk_bounds
from researchutils._process_pipe import IDLE_CHECK_S, Inbox, Message
from researchutils._process_worker import (
    Source,
    Task,
    blocked_stop_signals,
    pickle_source,
    worker_main,
)

if TYPE_CHECKING:
    import multiprocessing.queues
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from researchutils._process_worker import Context

# Seconds the main process gives a worker whose pipe ended to be reaped, so that its
# exit code can be reported. The pipe ends as the process exits: a few microseconds
# before it can be reaped on an idle machine, a scheduling delay on a busy one.
_EXIT_WAIT_S = 30.0
# Seconds close() gives a killed worker to exit (at once, unless its kernel call can
# not be interrupted, as on a hung network file system); then it is left to exit alone.
_KILL_WAIT_S = 30.0
# The pools not closed yet, for the exit hook.
_open_pools: 'weakref.WeakSet[ProcessPool]' = weakref.WeakSet()


def _collect_dead_semaphores() -> None:
    """Frees now the semaphores of pools that are garbage in reference cycles.

    Under spawn and forkserver each semaphore is registered with multiprocessing's resource
    tracker, and a freed one unregisters itself. Were it freed by a garbage collection that
    starts while this thread is inside the tracker (registering the new queue's
    semaphores), Python 3.12+ refuses the reentrant call: 'ResourceTracker called
    reentrantly ... might leak', an exception nobody can catch. Collected here, before the
    new queue is made, they unregister outside the tracker. A pool is made once per
    iterator, so the collection's cost (milliseconds) is paid rarely.
    """
    gc.collect()


class WorkerDiedError(RuntimeError):
    """A worker process exited while it still had work.

    Attributes:
        signal_number (int or None): The signal that killed the worker, if one did.
    """

    def __init__(self, message: str, signal_number: int | None = None) -> None:
        super(WorkerDiedError, self).__init__(message)
        self.signal_number = signal_number


class PoolClosedError(RuntimeError):
    """The pool was closed (from another thread) while a batch was awaited."""


class _RemoteTraceback(Exception):
    """Carries the traceback of an exception raised in a worker process."""

    def __str__(self) -> str:
        return self.args[0]


class _Worker(NamedTuple):
    process: BaseProcess
    inbox: Inbox


#: An exception raised in a worker, as it sends it: ``(pickled exception, traceback text,
#: pid)``.
_RemoteError = tuple[bytes, str, int]


class _PendingBatch(object):

    def __init__(self, n_chunks: int) -> None:
        self.n_chunks = n_chunks
        # By the start of each chunk: its pickled items, or the error that it raised.
        self.chunks: dict[int, memoryview] = {}
        self.errors: dict[int, _RemoteError] = {}

    @property
    def done(self) -> bool:
        return len(self.chunks) + len(self.errors) == self.n_chunks


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return 'closed its result pipe'
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = 'signal {}'.format(-exitcode)
        return 'was killed by {}'.format(name)
    return 'exited with code {}'.format(exitcode)


class ProcessPool(object):
    """``n_processes`` worker processes making the chunks of submitted batches.

    ``owner`` names what the pool works for, in process names and messages.
    """

    def __init__(self, source: Source, context: Context, n_processes: int,
                 maxtasksperchild: int | None, owner: str) -> None:
        self._source = source
        self._owner = owner
        self._context = context
        self._maxtasksperchild = maxtasksperchild
        # Under spawn and forkserver the queue may start multiprocessing's resource
        # tracker, a process of the job too: it starts with the stop signals blocked.
        if context.get_start_method() != 'fork':
            _collect_dead_semaphores()
        with blocked_stop_signals():
            self._tasks: multiprocessing.queues.Queue[Task | None] = context.Queue()
        # Tasks still unsent at exit are worthless: never wait to flush them.
        self._tasks.cancel_join_thread()
        self._workers: dict[int, _Worker] = {}
        self._batches: dict[int, _PendingBatch] = {}
        self._batch_ids = iter(range(1 << 62))
        # close() may come from another thread while collect() waits: the lock
        # orders it against the start of workers, and the pipes are closed by
        # whichever of the two finishes last, never under a wait that uses them.
        self._lock = threading.Lock()
        self._closed = False
        self._collecting = 0
        self._closing: list[_Worker] = []
        # Workers that said they retire, until they have exited (close() ends them too).
        self._retired: list[BaseProcess] = []
        _open_pools.add(self)
        for slot in range(n_processes):
            self._start_worker(slot)

    def _start_worker(self, slot: int) -> None:
        with self._lock:
            if self._closed:
                raise closed_error()
            self._start_worker_locked(slot)

    def _start_worker_locked(self, slot: int) -> None:
        start_method = self._context.get_start_method()
        # Other start methods send the source pickled, made per start rather than
        # kept, so an in-memory dataset is not held twice.
        pickled = start_method != 'fork'
        reader, writer = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=worker_main,
            args=(pickle_source(self._source, start_method, self._owner) if pickled
                  else self._source, pickled, self._tasks,
                  writer, self._maxtasksperchild, os.getpid()),
            name='{}-{}'.format(self._owner, slot), daemon=True)
        try:
            # The worker starts with the stop signals blocked (see _process_worker).
            with blocked_stop_signals():
                process.start()
        finally:
            # The worker now holds the only write end: its death ends the pipe.
            writer.close()
        self._workers[slot] = _Worker(process, Inbox(reader))

    def submit(self, items: Sequence[Any], keys: Sequence[Any] | None, n_chunks: int) -> int:
        """Queues ``source.make(items, keys)`` in up to ``n_chunks`` chunks; returns its id.

        ``keys`` is None or a sequence as long as ``items``, chunked alike.
        """
        batch_id = next(self._batch_ids)
        bounds = chunk_bounds(len(items), n_chunks)
        self._batches[batch_id] = _PendingBatch(len(bounds))
        for start, stop in bounds:
            self._tasks.put((batch_id, start, items[start:stop],
                             None if keys is None else keys[start:stop]))
        return batch_id

    def cancel(self, batch_id: int) -> None:
        # Its chunks may still be made; their results are dropped on arrival.
        self._batches.pop(batch_id, None)

    def collect(self, batch_id: int, dataset_timeout: float | None,
                on_timeout: Callable[[], object]) -> list[Any]:
        """Waits for the batch; calls ``on_timeout`` every ``dataset_timeout`` seconds.

        Raises:
            PoolClosedError: :meth:`close` was called meanwhile.
        """
        with self._lock:
            pending = None if self._closed else self._batches.get(batch_id)
            if pending is None:
                raise closed_error()
            self._collecting += 1
        try:
            self._wait_for(pending, dataset_timeout, on_timeout)
        finally:
            with self._lock:
                self._collecting -= 1
                release = self._closed and not self._collecting
            if release:
                self._release_pipes()
        self._batches.pop(batch_id, None)
        if pending.errors:
            # The first failing example in batch order, as the serial iterator would.
            _raise_remote(*pending.errors[min(pending.errors)])
        return [example for start in sorted(pending.chunks)
                for example in pickle.loads(pending.chunks[start])]

    def _wait_for(self, pending: _PendingBatch, dataset_timeout: float | None,
                  on_timeout: Callable[[], object]) -> None:
        # A worker that died idle lost nothing yet, but it is reported all the same.
        self._receive(0)
        next_warning = None if dataset_timeout is None else time.monotonic() + dataset_timeout
        while not pending.done:
            timeout = IDLE_CHECK_S
            if next_warning is not None:
                timeout = min(timeout, max(0.0, next_warning - time.monotonic()))
            self._receive(timeout)
            if (next_warning is not None and dataset_timeout is not None
                    and time.monotonic() >= next_warning and not pending.done):
                on_timeout()
                next_warning = time.monotonic() + dataset_timeout

    def _receive(self, timeout: float) -> None:
        """Reads what the workers sent, waiting up to ``timeout`` s for something."""
        try:
            self._receive_once(timeout)
        except WorkerDiedError:
            # Workers that close() terminates look like deaths.
            if self._closed:
                raise closed_error() from None
            raise
        if self._closed:
            raise closed_error()

    def _receive_once(self, timeout: float) -> None:
        workers = self._workers  # close() replaces the dict; this call keeps the old one
        # Each worker's pipe and sentinel, and to whose slot each belongs.
        handles: list[Connection[Any, Any] | int] = []
        slots: dict[object, int] = {}
        for slot, worker in workers.items():
            for handle in (worker.inbox.connection, worker.process.sentinel):
                handles.append(handle)
                slots[handle] = slot
        # close() terminates the workers, which ends their pipes: the wait ends at once.
        ready = {slots[handle] for handle in multiprocessing.connection.wait(handles, timeout)}
        if self._closed:
            return
        # Every worker's exit code is looked at too: a child that a worker started (by
        # fork) holds both the pipe and the sentinel open after the worker died.
        for slot in sorted(workers):
            worker = workers[slot]
            if slot not in ready and worker.process.exitcode is None:
                continue
            messages, ended = worker.inbox.read()
            # A retiring worker says so before it exits, and is replaced when that is read.
            for message in messages:
                self._handle(slot, message)
            if self._workers.get(slot) is not worker:
                continue
            if ended:
                # The pipe ends as the process exits, a moment before it can be reaped.
                worker.process.join(_EXIT_WAIT_S)
            elif worker.process.exitcode is None:
                continue
            # Its pipe ended, or it exited while a process it started keeps a copy open.
            exitcode = worker.process.exitcode
            raise WorkerDiedError(
                'worker process {} of {} {} while it had examples to make; its examples '
                'are lost. The workers are shut down; the next call to next() starts new '
                'ones and retries the batch'.format(
                    worker.process.pid, self._owner, _describe_exit(exitcode)),
                -exitcode if exitcode is not None and exitcode < 0 else None)

    def _handle(self, slot: int, message: Message) -> None:
        kind, batch_id, start, payload = message
        if kind == 'retire':
            with self._lock:
                if self._closed:  # close() stops it with the others
                    return
                worker = self._workers.pop(slot)
                # It exits in its own time; never waited for here (a busy machine may
                # take a while), it is reaped later or ended by close().
                self._retired = [old for old in self._retired if old.exitcode is None]
                self._retired.append(worker.process)
            worker.inbox.connection.close()
            self._start_worker(slot)
            return
        if kind == 'fatal':
            data, text, pid = pickle.loads(payload)
            raise WorkerDiedError(
                'worker process {} could not start: unpickling the dataset and decor_fun it '
                'was sent failed:\n{}'.format(pid, text.strip()))
        # The other kinds are a chunk's result: they name the batch and the chunk.
        assert batch_id is not None and start is not None, kind
        pending = self._batches.get(batch_id)
        if pending is None:  # cancelled
            return
        if kind == 'ok':
            pending.chunks[start] = payload
        else:
            pending.errors[start] = pickle.loads(payload)

    def close(self) -> None:
        """Stops every worker without waiting for its work; leaves no child process.

        Safe to call from another thread while :meth:`collect` waits, which then
        raises :class:`PoolClosedError`; calling it again does nothing.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _open_pools.discard(self)
            workers = list(self._workers.values())
            # The pipes outlive the workers while collect() may still wait on them.
            self._closing = workers
            self._workers = {}
            self._batches = {}
            processes = [worker.process for worker in workers] + self._retired
            self._retired = []
            release = not self._collecting
        # SIGKILL: their work is not wanted, and it needs no thread of theirs to act (a
        # worker takes SIGTERM in a thread, which a task holding the GIL would delay).
        for process in processes:
            if process.exitcode is None:
                process.kill()
        deadline = time.monotonic() + _KILL_WAIT_S
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        if release:
            self._release_pipes()

    def _release_pipes(self) -> None:
        with self._lock:
            workers, self._closing = self._closing, []
        for worker in workers:
            worker.inbox.connection.close()
        self._tasks.close()


@atexit.register  # after multiprocessing's (imported above): the hooks run last-in first
def _close_open_pools() -> None:
    for pool in list(_open_pools):
        pool.close()


def closed_error() -> PoolClosedError:
    return PoolClosedError('finalize() was called, from another thread, while next() '
                           'waited for this batch; the workers are stopped')


def _raise_remote(data: bytes, text: str, pid: int) -> NoReturn:
    cause = _RemoteTraceback('\n\nTraceback in worker process {}:\n{}'.format(pid, text))
    try:
        exc = pickle.loads(data)
    except Exception:
        raise RuntimeError('an exception raised in worker process {} could not be '
                           'unpickled'.format(pid)) from cause
    raise exc from cause
