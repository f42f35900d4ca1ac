"""Worker processes of DecorableMultiprocessIterator (private).

The main process puts chunks of a batch on one task queue; each worker takes a
chunk, makes its examples and sends them back pickled, or sends the exception
it raised.

Each worker sends its results through a one-way pipe of its own, whose write
end only that worker holds: the main process closes its copy as soon as the
worker has started. The main process waits on all the read ends and the
workers' sentinels at once (:func:`multiprocessing.connection.wait`) and reads
without blocking, a frame at a time, so:

* a worker that dies, even in the middle of sending a large result, ends its
  pipe (end of file, or its sentinel fires); the half-sent message is dropped
  and the death is reported at once, never waited on;
* no lock is shared by the writers, so a dying worker cannot block the others;
* a partly arrived message never blocks the main process, so the
  ``dataset_timeout`` warnings keep coming while one is slow.

A thread in each worker does the sending, so the worker goes on making
examples while a large message waits for the main process, which reads only
inside ``next()``. The pickled examples travel as they are, not pickled again.

The task queue stays shared: a worker killed while it reads a task can leave
the queue's read lock held and half a task in its pipe, which would stall the
other workers, but the main process reports that death through the worker's
result pipe and then shuts the whole pool down, queue included; the next
``next()`` starts a fresh one.
"""
import multiprocessing.connection
import os
import pickle
import queue
import random
import signal
import struct
import threading
import time
import traceback

import numpy

from researchutils._errors import add_note as _add_note
from researchutils.chainer.iterators._decorable_iterator import chunk_bounds

# Seconds an idle worker waits for a task before it checks that its parent lives;
# also the longest the main process sleeps between looks at its workers.
_IDLE_CHECK_S = 1.0
# Seconds the main process gives a worker whose pipe ended to be reaped, so that
# its exit code can be reported.
_EXIT_WAIT_S = 1.0
# Seconds close() gives terminated workers to exit, and then killed ones.
_TERMINATE_WAIT_S = 2.0
_KILL_WAIT_S = 5.0
# A message on a result pipe: the sizes of its two parts, the pickle of
# (kind, batch_id, start), and the payload, bytes that the worker pickled.
_FRAME_HEADER = struct.Struct('!QQ')


class WorkerDiedError(RuntimeError):
    """A worker process exited while it still had work."""


class PoolClosedError(RuntimeError):
    """The pool was closed (from another thread) while a batch was awaited."""


class _RemoteTraceback(Exception):
    """Carries the traceback of an exception raised in a worker process."""

    def __str__(self):
        return self.args[0]


def _exception_payload(exc):
    text = traceback.format_exc()
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
    except Exception:  # the exception itself cannot travel; its text and notes can
        stand_in = RuntimeError('{}: {} (the original exception could not be pickled)'.format(
            type(exc).__qualname__, exc))
        for note in getattr(exc, '__notes__', ()):
            _add_note(stand_in, note)
        data = pickle.dumps(stand_in)
    return pickle.dumps((data, text, os.getpid()))


def _pickle_examples(examples, indices):
    try:
        return pickle.dumps(examples, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        for example, index in zip(examples, indices):
            try:
                pickle.dumps(example, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                if hasattr(exc, 'add_note'):
                    exc.add_note('the example at dataset index {} cannot be pickled to '
                                 'be sent to the main process'.format(index))
                break
        raise


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Outbox(object):
    """Sends a worker's messages from a thread of its own.

    Making examples goes on while a large message waits for the main process,
    which reads only inside ``next()``.
    """

    def __init__(self, fd):
        self._fd = fd
        self._messages = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send_all, daemon=True)
        self._thread.start()

    def put(self, kind, batch_id=None, start=None, payload=b''):
        self._messages.put((kind, batch_id, start, payload))

    def flush(self, parent_pid):
        """Waits until every message is sent, or the main process is gone."""
        self._messages.put(None)
        while self._thread.is_alive() and os.getppid() == parent_pid:
            self._thread.join(_IDLE_CHECK_S)

    def _send_all(self):
        while True:
            message = self._messages.get()
            if message is None:
                return
            kind, batch_id, start, payload = message
            head = pickle.dumps((kind, batch_id, start), protocol=pickle.HIGHEST_PROTOCOL)
            try:
                _write_all(self._fd, _FRAME_HEADER.pack(len(head), len(payload)) + head)
                _write_all(self._fd, payload)
            except BrokenPipeError:
                # The main process closed the pool, or is gone: nobody will read.
                os._exit(0)


def _worker_main(source, pickled, tasks, results, maxtasksperchild, parent_pid):
    # Ctrl-C is for the main process, which then finalizes the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    outbox = _Outbox(results.fileno())
    _serve(source, pickled, tasks, outbox, maxtasksperchild, parent_pid)
    outbox.flush(parent_pid)


def _serve(source, pickled, tasks, outbox, maxtasksperchild, parent_pid):
    try:
        if pickled:
            source = pickle.loads(source)
    except BaseException as exc:
        outbox.put('fatal', payload=_exception_payload(exc))
        return
    if source.seed is None:
        # Forked workers inherit one random state; give each its own.
        numpy.random.seed()
        random.seed()
    done = 0
    while maxtasksperchild is None or done < maxtasksperchild:
        try:
            task = tasks.get(timeout=_IDLE_CHECK_S)
        except queue.Empty:
            if os.getppid() != parent_pid:  # orphaned: the main process is gone
                return
            continue
        if task is None:
            return
        batch_id, start, indices, epochs = task
        try:
            kind, payload = 'ok', _pickle_examples(source.make(indices, epochs), indices)
        except BaseException as exc:  # re-raised by the main process
            kind, payload = 'error', _exception_payload(exc)
        outbox.put(kind, batch_id, start, payload)
        done += len(indices)
    outbox.put('retire')


class _Inbox(object):
    """The main process's end of one worker's result pipe, read without blocking."""

    def __init__(self, connection):
        self.connection = connection
        self._fd = connection.fileno()
        os.set_blocking(self._fd, False)
        self._header = b''
        self._head_size = 0
        self._body = None
        self._filled = 0

    def read(self):
        """Returns the messages completed by what the pipe holds now, and whether it ended.

        A message is ``(kind, batch_id, start, payload)``, the payload a
        memoryview of the bytes sent. Once the worker's end is closed, a message
        it had begun is lost.
        """
        messages = []
        while True:
            try:
                if self._body is None:
                    chunk = os.read(self._fd, _FRAME_HEADER.size - len(self._header))
                    received = len(chunk)
                    self._header += chunk
                else:
                    received = os.readv(self._fd, [memoryview(self._body)[self._filled:]])
                    self._filled += received
            except BlockingIOError:
                return messages, False
            if not received:
                return messages, True
            if self._body is None and len(self._header) == _FRAME_HEADER.size:
                self._head_size, payload_size = _FRAME_HEADER.unpack(self._header)
                self._body = bytearray(self._head_size + payload_size)
                self._header = b''
                self._filled = 0
            elif self._body is not None and self._filled == len(self._body):
                body = memoryview(self._body)
                messages.append(pickle.loads(body[:self._head_size])
                                + (body[self._head_size:],))
                self._body = None


class _Worker(object):

    def __init__(self, process, inbox):
        self.process = process
        self.inbox = inbox


class _PendingBatch(object):

    def __init__(self, n_chunks):
        self.n_chunks = n_chunks
        self.chunks = {}
        self.errors = {}

    @property
    def done(self):
        return len(self.chunks) + len(self.errors) == self.n_chunks


def _describe_exit(exitcode):
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
    """``n_processes`` worker processes making the chunks of submitted batches."""

    def __init__(self, source, pickle_source, context, n_processes, maxtasksperchild):
        self._source = source
        # For start methods other than fork: makes the pickled source for a new worker.
        # Made per start rather than kept, so an in-memory dataset is not held twice.
        self._pickle_source = pickle_source
        self._context = context
        self._maxtasksperchild = maxtasksperchild
        self._tasks = context.Queue()
        # Tasks still unsent at exit are worthless: never wait to flush them.
        self._tasks.cancel_join_thread()
        self._workers = {}
        self._batches = {}
        self._batch_ids = iter(range(1 << 62))
        # close() may come from another thread while collect() waits: the lock
        # orders it against the start of workers, and the pipes are closed by
        # whichever of the two finishes last, never under a wait that uses them.
        self._lock = threading.Lock()
        self._closed = False
        self._collecting = 0
        self._closing = []
        for slot in range(n_processes):
            self._start_worker(slot)

    def _start_worker(self, slot):
        with self._lock:
            if self._closed:
                raise _closed_error()
            self._start_worker_locked(slot)

    def _start_worker_locked(self, slot):
        pickled = self._pickle_source is not None
        reader, writer = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_worker_main,
            args=(self._pickle_source() if pickled else self._source, pickled, self._tasks,
                  writer, self._maxtasksperchild, os.getpid()),
            name='DecorableMultiprocessIterator-{}'.format(slot), daemon=True)
        try:
            process.start()
        finally:
            # The worker now holds the only write end: its death ends the pipe.
            writer.close()
        self._workers[slot] = _Worker(process, _Inbox(reader))

    def submit(self, indices, epochs, n_chunks):
        batch_id = next(self._batch_ids)
        bounds = chunk_bounds(len(indices), n_chunks)
        self._batches[batch_id] = _PendingBatch(len(bounds))
        for start, stop in bounds:
            self._tasks.put((batch_id, start, indices[start:stop],
                             None if epochs is None else epochs[start:stop]))
        return batch_id

    def cancel(self, batch_id):
        # Its chunks may still be made; their results are dropped on arrival.
        self._batches.pop(batch_id, None)

    def collect(self, batch_id, dataset_timeout, on_timeout):
        """Waits for the batch; calls ``on_timeout`` every ``dataset_timeout`` seconds.

        Raises:
            PoolClosedError: :meth:`close` was called meanwhile.
        """
        with self._lock:
            pending = None if self._closed else self._batches.get(batch_id)
            if pending is None:
                raise _closed_error()
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

    def _wait_for(self, pending, dataset_timeout, on_timeout):
        # A worker that died idle lost nothing yet, but it is reported all the same.
        self._receive(0)
        next_warning = None if dataset_timeout is None else time.monotonic() + dataset_timeout
        while not pending.done:
            timeout = _IDLE_CHECK_S
            if next_warning is not None:
                timeout = min(timeout, max(0.0, next_warning - time.monotonic()))
            self._receive(timeout)
            if (next_warning is not None and time.monotonic() >= next_warning
                    and not pending.done):
                on_timeout()
                next_warning = time.monotonic() + dataset_timeout

    def _receive(self, timeout):
        """Reads what the workers sent, waiting up to ``timeout`` s for something."""
        try:
            self._receive_once(timeout)
        except WorkerDiedError:
            # Workers that close() terminates look like deaths.
            if self._closed:
                raise _closed_error() from None
            raise
        if self._closed:
            raise _closed_error()

    def _receive_once(self, timeout):
        workers = self._workers  # close() replaces the dict; this call keeps the old one
        handles = {}
        for slot, worker in workers.items():
            handles[worker.inbox.connection] = slot
            handles[worker.process.sentinel] = slot
        # close() terminates the workers, which ends their pipes: the wait ends at once.
        ready = {handles[handle]
                 for handle in multiprocessing.connection.wait(list(handles), timeout)}
        if self._closed:
            return
        for slot in sorted(ready):
            worker = workers[slot]
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
            raise WorkerDiedError(
                'worker process {} of DecorableMultiprocessIterator {} while it had '
                'examples to make; its examples are lost. The workers are shut down; '
                'the next call to next() starts new ones and retries the '
                'batch'.format(worker.process.pid, _describe_exit(worker.process.exitcode)))

    def _handle(self, slot, message):
        kind, batch_id, start, payload = message
        if kind == 'retire':
            with self._lock:
                if self._closed:  # close() stops it with the others
                    return
                worker = self._workers.pop(slot)
            worker.process.join(_IDLE_CHECK_S)
            worker.inbox.connection.close()
            self._start_worker(slot)
            return
        if kind == 'fatal':
            data, text, pid = pickle.loads(payload)
            raise WorkerDiedError(
                'worker process {} could not start: unpickling the dataset and decor_fun it '
                'was sent failed:\n{}'.format(pid, text.strip()))
        pending = self._batches.get(batch_id)
        if pending is None:  # cancelled
            return
        if kind == 'ok':
            pending.chunks[start] = payload
        else:
            pending.errors[start] = pickle.loads(payload)

    def close(self):
        """Stops every worker without waiting for its work; leaves no child process.

        Safe to call from another thread while :meth:`collect` waits, which then
        raises :class:`PoolClosedError`; calling it again does nothing.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers.values())
            # The pipes outlive the workers while collect() may still wait on them.
            self._closing = workers
            self._workers = {}
            self._batches = {}
            release = not self._collecting
        for worker in workers:
            if worker.process.exitcode is None:
                worker.process.terminate()
        deadline = time.monotonic() + _TERMINATE_WAIT_S
        for worker in workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join(_KILL_WAIT_S)
        if release:
            self._release_pipes()

    def _release_pipes(self):
        with self._lock:
            workers, self._closing = self._closing, []
        for worker in workers:
            worker.inbox.connection.close()
        self._tasks.close()


def _closed_error():
    return PoolClosedError('finalize() was called, from another thread, while next() '
                           'waited for this batch; the workers are stopped')


def _raise_remote(data, text, pid):
    cause = _RemoteTraceback('\n\nTraceback in worker process {}:\n{}'.format(pid, text))
    try:
        exc = pickle.loads(data)
    except Exception:
        raise RuntimeError('an exception raised in worker process {} could not be '
                           'unpickled'.format(pid)) from cause
    raise exc from cause
