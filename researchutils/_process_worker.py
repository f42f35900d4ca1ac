"""What a worker process of the process pool runs (private).

A worker takes a task (a chunk of a batch) from the pool's task queue, asks
its source to make the items, and sends them back pickled through its
:class:`~researchutils._process_pipe.Outbox`, or sends the exception raised,
with its traceback. It exits when told to, when it has made
``maxtasksperchild`` items (it says so first: ``retire``), or when its parent
process is gone.
"""
import os
import pickle
import queue
import random
import signal
import traceback

import numpy

from researchutils._errors import add_note as _add_note
from researchutils._process_pipe import IDLE_CHECK_S, Outbox


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


def worker_main(source, pickled, tasks, results, maxtasksperchild, parent_pid):
    # Ctrl-C is for the main process, which then finalizes the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    outbox = Outbox(results.fileno())
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
            task = tasks.get(timeout=IDLE_CHECK_S)
        except queue.Empty:
            if os.getppid() != parent_pid:  # orphaned: the main process is gone
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

