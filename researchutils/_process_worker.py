"""What a worker process of the process pool is sent, and what it runs (private).

Under start methods other than ``fork`` the source goes to each worker pickled
(:func:`pickle_source`); :func:`check_sendable` tells early whether it can.

A worker takes a task (a chunk of a batch) from the pool's task queue, asks
its source to make the items, and sends them back pickled through its
:class:`~researchutils._process_pipe.Outbox`, or sends the exception raised,
with its traceback. It exits when told to, when it has made
``maxtasksperchild`` items (it says so first: ``retire``), or when the main
process is gone (:class:`MainProcess`).
"""
import multiprocessing
import os
import pickle
import queue
import random
import signal
import traceback

import numpy

from researchutils._errors import add_note as _add_note
from researchutils._process_pipe import IDLE_CHECK_S, Outbox


def current_context():
    """The context of the start method in force now.

    Unlike :func:`multiprocessing.get_context` without arguments, this does not fix
    the process-wide default (``set_start_method`` stays possible).
    """
    return multiprocessing.get_context(multiprocessing.get_start_method(allow_none=True)
                                       or multiprocessing.get_all_start_methods()[0])


class _Discard(object):
    """A file that forgets what is written to it: measures picklability, keeps nothing."""

    def write(self, data):
        # Large buffers (NumPy arrays under protocol 5) arrive as PickleBuffer objects.
        return memoryview(data).nbytes


def pickle_source(source, start_method, owner, sink=None):
    """Pickles ``source`` (into ``sink`` if given), or raises a TypeError naming the part of
    it (``source.parts()``, the user's function first) that cannot be pickled."""
    try:
        if sink is None:
            return pickle.dumps(source, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(source)
        return None
    except Exception as exc:
        error = exc
    parts = source.parts()
    function = parts[0][0]
    for name, value in parts:
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            error = exc
            culprit = name if name == 'dataset' else '{} {!r}'.format(name, value)
            break
    else:
        culprit = 'the dataset or {}'.format(function)
    raise TypeError(
        '{}: {} cannot be pickled ({}: {}), but the {!r} start method of multiprocessing '
        'sends it to the worker processes by pickling. Define {} at module level (not as a '
        'lambda or a nested function), make the dataset picklable, or use the "fork" start '
        'method.'.format(owner, culprit, type(error).__name__, error, start_method,
                         function)) from error


def check_sendable(source, context, owner):
    """Raises a TypeError now if the workers of ``context`` could not be sent ``source``.

    The pickled bytes are not kept (an in-memory dataset would be held twice).
    """
    start_method = context.get_start_method()
    if start_method != 'fork':
        pickle_source(source, start_method, owner, _Discard())


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


def _pickle_made(source, made, items):
    try:
        return pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        for result, item in zip(made, items):
            try:
                pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                _add_note(exc, '{} cannot be pickled to be sent to the main process'.format(
                    source.describe(item)))
                break
        raise


class MainProcess(object):
    """The process that started the worker, as the worker watches it: is it still there?

    Its parent is not always the main process: under ``forkserver`` the fork
    server is. So a worker notes the parent it has at its start and counts the
    main process as gone when that parent changes (a worker is re-parented when
    its parent exits; the fork server exits with the main process) or when the
    main process's pid no longer names a process of this user.
    """

    def __init__(self, pid):
        self.pid = pid
        self._parent_at_start = os.getppid()

    def is_alive(self):
        if os.getppid() != self._parent_at_start:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process now has the pid
            return False
        return True


def worker_main(source, pickled, tasks, results, maxtasksperchild, main_pid):
    # Ctrl-C and SIGUSR1 (a cluster's warning before its time limit, which SLURM may send to
    # every process of the job) are for the main process: it finishes its iteration, saves
    # (PreemptionSnapshot) and then closes the pool. SIGTERM keeps its default action, by
    # which the pool (and multiprocessing at exit) ends a worker; a handler inherited by
    # fork (PreemptionSnapshot's only sets a flag) would leave the worker running.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    main_process = MainProcess(main_pid)
    outbox = Outbox(results.fileno())
    _serve(source, pickled, tasks, outbox, maxtasksperchild, main_process)
    outbox.flush(main_process)


def _serve(source, pickled, tasks, outbox, maxtasksperchild, main_process):
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
            task = tasks.get(timeout=IDLE_CHECK_S)
        except queue.Empty:
            if not main_process.is_alive():  # orphaned: nobody wants the results
                return
            continue
        if task is None:
            return
        batch_id, start, items, keys = task
        try:
            kind, payload = 'ok', _pickle_made(source, source.make(items, keys), items)
        except BaseException as exc:  # re-raised by the main process
            kind, payload = 'error', _exception_payload(exc)
        outbox.put(kind, batch_id, start, payload)
        done += len(items)
    outbox.put('retire')

