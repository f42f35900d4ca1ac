"""What a worker process of the process pool is sent, and what it runs (private).

Under start methods other than ``fork`` the source goes to each worker pickled
(:func:`pickle_source`); :func:`check_sendable` tells early whether it can.

A worker takes a task (a chunk of a batch) from the pool's task queue, asks
its source to make the items, and sends them back pickled through its
:class:`~researchutils._process_pipe.Outbox`, or sends the exception raised,
with its traceback. It exits when told to, when it has made
``maxtasksperchild`` items (it says so first: ``retire``), or when the main
process is gone (:class:`MainProcess`).

The signals that stop a job (:data:`STOP_SIGNALS`: SIGTERM, SIGINT, SIGUSR1...)
are the main process's to act on. ``scancel``, a SLURM time limit, Kubernetes,
``pkill -f train.py`` and a terminal's Ctrl-C send them to every process of the
job, workers included, often while the main process waits for a batch: a worker
that died of them would lose that batch, and the run its preemption snapshot.
So a worker never acts on them unless the main process itself sent them
(``Process.terminate()``): they are blocked from its first instruction (the
pool blocks them around ``Process.start()``, and the mask passes through fork
and exec alike, to a fork server too) and a thread of the worker
(:func:`watch_stop_signals`) takes them; the main process then decides. If it
stops (PreemptionSnapshot saves first), it closes the pool; if it dies of the
signal, the same thread sees it gone within :data:`IDLE_CHECK_S` and ends the
worker, even one busy in a long task.

Tests: tests/test_process_worker.py, and the iterators' tests.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import random
import signal
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

import numpy

from researchutils._errors import add_note as _add_note
from researchutils._process_pipe import IDLE_CHECK_S, Outbox

if TYPE_CHECKING:
    import multiprocessing.queues
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

    #: The context of a start method, as :func:`current_context` gives it.
    Context: TypeAlias = ForkContext | SpawnContext | ForkServerContext

#: The signals by which a cluster, a terminal or a user stops a job; see the module text.
STOP_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1,
                          signal.SIGUSR2})
# Where a thread can take a blocked signal (Linux and most POSIX systems); elsewhere a
# worker ignores the stop signals instead, and only SIGKILL ends it.
_CAN_TAKE_SIGNALS = hasattr(signal, 'sigtimedwait') and hasattr(signal, 'pthread_sigmask')

#: A chunk of a batch, as the pool's task queue carries it: ``(batch_id, start, items,
#: keys)``, ``keys`` None or as long as ``items``.
Task: TypeAlias = tuple[int, int, Sequence[Any], Sequence[Any] | None]


class Source(Protocol):
    """What the workers make items with (see :mod:`researchutils._process_pool`).

    An item and its key are whatever the source takes: a dataset index and its epoch for
    the iterators' examples, a batch's indices and its ``(epoch, batch)`` for the data
    managers' batches.
    """

    @property
    def seed(self) -> int | None:
        """None: each worker reseeds the global random states (they would repeat)."""

    def make(self, items: Sequence[Any], keys: Sequence[Any] | None) -> list[Any]:
        """The made items, in order."""

    def parts(self) -> list[tuple[str, object]]:
        """``(name, value)`` of what the workers are sent, the user's function first."""

    def describe(self, item: Any) -> str:
        """The item in words, for an error message."""


def current_context() -> Context:
    """The context of the start method in force now.

    Unlike :func:`multiprocessing.get_context` without arguments, this does not fix
    the process-wide default (``set_start_method`` stays possible).
    """
    context = multiprocessing.get_context(multiprocessing.get_start_method(allow_none=True)
                                          or multiprocessing.get_all_start_methods()[0])
    # Typeshed types get_context(str) as BaseContext, which lacks Process; the context of
    # each start method has it.
    return cast('Context', context)


class _Discard(object):
    """A file that forgets what is written to it: measures picklability, keeps nothing."""

    def write(self, data: bytes | pickle.PickleBuffer) -> int:
        # Large buffers (NumPy arrays under protocol 5) arrive as PickleBuffer objects.
        return memoryview(data).nbytes


def pickle_source(source: Source, start_method: str, owner: str,
                  sink: _Discard | None = None) -> bytes | None:
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


def check_sendable(source: Source, context: Context, owner: str) -> None:
    """Raises a TypeError now if the workers of ``context`` could not be sent ``source``.

    The pickled bytes are not kept (an in-memory dataset would be held twice).
    """
    start_method = context.get_start_method()
    if start_method != 'fork':
        pickle_source(source, start_method, owner, _Discard())


def _exception_payload(exc: BaseException) -> bytes:
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


def _pickle_made(source: Source, made: list[Any], items: Sequence[Any]) -> bytes:
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

    Under ``fork`` and ``spawn`` it is the worker's parent, and the worker counts it
    gone once its parent changes (an orphan is re-parented). Under ``forkserver``
    the parent is the fork server, which may end on its own (a signal to the whole
    job), so there only the main process's pid counts: it is gone once the pid
    names no process of this user.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._child = os.getppid() == pid

    def is_alive(self) -> bool:
        if self._child:
            return os.getppid() == self.pid
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process now has the pid
            return False
        return True


@contextlib.contextmanager
def blocked_stop_signals() -> Iterator[None]:
    """Within the block, this thread holds :data:`STOP_SIGNALS` back (pending, not lost).

    A process started in the block starts with them blocked (see the module text).
    """
    if not _CAN_TAKE_SIGNALS:
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def watch_stop_signals(main_process: MainProcess) -> None:
    """Leaves the stop signals to the main process, and ends this worker when it is gone.

    Called first in the worker's main thread, with :data:`STOP_SIGNALS` blocked.
    They stay blocked in every thread (threads inherit the mask), and a daemon
    thread takes them: SIGTERM sent by the main process itself
    (``Process.terminate()``, as :mod:`multiprocessing` does at exit) ends the
    worker by SIGTERM; any other is dropped. Every :data:`IDLE_CHECK_S` seconds
    the thread also checks that the main process is alive, and ends the worker
    if not.
    """
    if not _CAN_TAKE_SIGNALS:
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        threading.Thread(target=_watch_main_process, args=(main_process,), daemon=True,
                         name='watch-main-process').start()
        return
    # A handler inherited by fork (PreemptionSnapshot's only notes the signal) would keep
    # the worker alive when the main process ends it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    threading.Thread(target=_take_stop_signals, args=(main_process,), daemon=True,
                     name='take-stop-signals').start()


def _take_stop_signals(main_process: MainProcess) -> None:
    while True:
        taken = signal.sigtimedwait(STOP_SIGNALS, IDLE_CHECK_S)
        if taken is None:
            if not main_process.is_alive():  # orphaned: nobody wants the results
                os._exit(0)
        elif taken.si_signo == signal.SIGTERM and taken.si_pid == main_process.pid:
            # Sent to this thread alone, which now lets it through: the default action
            # ends the whole process, as the main process asked.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            os._exit(1)  # the task's code installed a handler meanwhile: end all the same


def _watch_main_process(main_process: MainProcess) -> None:
    while main_process.is_alive():
        time.sleep(IDLE_CHECK_S)
    os._exit(0)


def worker_main(source: Source | bytes, pickled: bool,
                tasks: multiprocessing.queues.Queue[Task | None], results: Connection[Any, Any],
                maxtasksperchild: int | None, main_pid: int) -> None:
    main_process = MainProcess(main_pid)
    watch_stop_signals(main_process)
    outbox = Outbox(results.fileno())
    _serve(source, pickled, tasks, outbox, maxtasksperchild)
    outbox.flush(main_process)


def _serve(sent: Source | bytes, pickled: bool,
           tasks: multiprocessing.queues.Queue[Task | None], outbox: Outbox,
           maxtasksperchild: int | None) -> None:
    try:
        # The pool sends the source pickled exactly when it says so (pickled).
        source: Source = pickle.loads(cast(bytes, sent)) if pickled else cast(Source, sent)
    except BaseException as exc:
        outbox.put('fatal', payload=_exception_payload(exc))
        return
    if source.seed is None:
        # Forked workers inherit one random state; give each its own.
        numpy.random.seed()
        random.seed()
    done = 0
    while maxtasksperchild is None or done < maxtasksperchild:
        # No time limit: the stop-signal thread ends an orphaned worker.
        task = tasks.get()
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
