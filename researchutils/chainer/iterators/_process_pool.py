"""Worker processes of DecorableMultiprocessIterator (private).

The main process puts chunks of a batch on one task queue; each worker takes a
chunk, makes its examples and sends them back pickled, or sends the exception
it raised. The main process never waits blindly: it polls the result queue and
the workers' exit codes, so a dead worker is reported in a fraction of a second.
"""
import os
import pickle
import queue
import random
import signal
import time
import traceback

import numpy

from researchutils.chainer.iterators._decorable_iterator import chunk_bounds

# Seconds between checks of the workers while the main process waits.
_POLL_S = 0.05
# Seconds an idle worker waits for a task before it checks that its parent lives.
_IDLE_CHECK_S = 1.0
# Seconds close() gives terminated workers to exit, and then killed ones.
_TERMINATE_WAIT_S = 2.0
_KILL_WAIT_S = 5.0


class WorkerDiedError(RuntimeError):
    """A worker process exited while it still had work."""


class _RemoteTraceback(Exception):
    """Carries the traceback of an exception raised in a worker process."""

    def __str__(self):
        return self.args[0]


def _exception_payload(exc):
    text = traceback.format_exc()
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
    except Exception:  # the exception itself cannot travel; its text can
        data = pickle.dumps(RuntimeError('{}: {} (the original exception could not be '
                                         'pickled)'.format(type(exc).__qualname__, exc)))
    return data, text, os.getpid()


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


def _worker_main(source, pickled, tasks, results, slot, maxtasksperchild, parent_pid):
    # Ctrl-C is for the main process, which then finalizes the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if pickled:
            source = pickle.loads(source)
    except BaseException as exc:
        results.put(('fatal', slot, None, None, _exception_payload(exc)))
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
        results.put((kind, slot, batch_id, start, payload))
        done += len(indices)
    results.put(('retire', slot, None, None, None))


class _PendingBatch(object):

    def __init__(self, n_chunks):
        self.n_chunks = n_chunks
        self.chunks = {}
        self.errors = {}

    @property
    def done(self):
        return len(self.chunks) + len(self.errors) == self.n_chunks


def _describe_exit(exitcode):
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = 'signal {}'.format(-exitcode)
        return 'was killed by {}'.format(name)
    return 'exited with code {}'.format(exitcode)


class ProcessPool(object):
    """``n_processes`` worker processes making the chunks of submitted batches."""

    def __init__(self, source, payload, context, n_processes, maxtasksperchild):
        self._source = source
        # Pickled source for start methods other than fork, else None.
        self._payload = payload
        self._context = context
        self._maxtasksperchild = maxtasksperchild
        self._tasks = context.Queue()
        # Tasks still unsent at exit are worthless: never wait to flush them.
        self._tasks.cancel_join_thread()
        self._results = context.Queue()
        self._workers = {}
        self._batches = {}
        self._batch_ids = iter(range(1 << 62))
        for slot in range(n_processes):
            self._start_worker(slot)

    def _start_worker(self, slot):
        pickled = self._payload is not None
        worker = self._context.Process(
            target=_worker_main,
            args=(self._payload if pickled else self._source, pickled, self._tasks,
                  self._results, slot, self._maxtasksperchild, os.getpid()),
            name='DecorableMultiprocessIterator-{}'.format(slot), daemon=True)
        worker.start()
        self._workers[slot] = worker

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
        """Waits for the batch; calls ``on_timeout`` every ``dataset_timeout`` seconds."""
        pending = self._batches[batch_id]
        # A worker that died idle lost nothing yet, but it is reported all the same.
        self._check_workers()
        next_warning = None if dataset_timeout is None else time.monotonic() + dataset_timeout
        next_check = time.monotonic() + _POLL_S
        while not pending.done:
            try:
                message = self._results.get(timeout=_POLL_S)
            except queue.Empty:
                message = None
            if message is not None:
                self._receive(message)
            now = time.monotonic()
            if message is None or now >= next_check:
                self._check_workers()
                next_check = now + _POLL_S
            if next_warning is not None and now >= next_warning and not pending.done:
                on_timeout()
                next_warning = now + dataset_timeout
        del self._batches[batch_id]
        if pending.errors:
            # The first failing example in batch order, as the serial iterator would.
            _raise_remote(*pending.errors[min(pending.errors)])
        return [example for start in sorted(pending.chunks)
                for example in pickle.loads(pending.chunks[start])]

    def _receive(self, message):
        kind, slot, batch_id, start, payload = message
        if kind == 'retire':
            self._workers.pop(slot).join(_IDLE_CHECK_S)
            self._start_worker(slot)
            return
        if kind == 'fatal':
            data, text, pid = payload
            raise WorkerDiedError(
                'worker process {} could not start: unpickling the dataset and decor_fun it '
                'was sent failed:\n{}'.format(pid, text.strip()))
        pending = self._batches.get(batch_id)
        if pending is None:  # cancelled
            return
        if kind == 'ok':
            pending.chunks[start] = payload
        else:
            pending.errors[start] = payload

    def _check_workers(self):
        dead = [slot for slot, worker in self._workers.items() if worker.exitcode is not None]
        if not dead:
            return
        # A retiring worker says so before it exits, and is replaced when that is
        # read: read what the workers sent first.
        while True:
            try:
                self._receive(self._results.get_nowait())
            except queue.Empty:
                break
        for slot in dead:
            worker = self._workers[slot]
            if worker.exitcode is not None:
                raise WorkerDiedError(
                    'worker process {} of DecorableMultiprocessIterator {} while it had '
                    'examples to make; its examples are lost. The workers are shut down; '
                    'the next call to next() starts new ones and retries the '
                    'batch'.format(worker.pid, _describe_exit(worker.exitcode)))

    def close(self):
        """Stops every worker without waiting for its work; leaves no child process."""
        workers = list(self._workers.values())
        self._workers = {}
        self._batches = {}
        for worker in workers:
            if worker.exitcode is None:
                worker.terminate()
        deadline = time.monotonic() + _TERMINATE_WAIT_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.exitcode is None:
                worker.kill()
                worker.join(_KILL_WAIT_S)
        self._tasks.close()
        self._results.close()


def _raise_remote(data, text, pid):
    cause = _RemoteTraceback('\n\nTraceback in worker process {}:\n{}'.format(pid, text))
    try:
        exc = pickle.loads(data)
    except Exception:
        raise RuntimeError('an exception raised in worker process {} could not be '
                           'unpickled'.format(pid)) from cause
    raise exc from cause

