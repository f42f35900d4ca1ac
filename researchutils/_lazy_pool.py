"""A process pool started when needed and replaced when its workers die (private).

:class:`LazyPool` is what the owners of worker processes hold:
:class:`~researchutils.chainer.iterators.DecorableMultiprocessIterator` and the
iterators of :class:`~researchutils.chainer.data_loading.DataManager`. It starts a
:class:`~researchutils._process_pool.ProcessPool` at the first batch and keeps it
until :meth:`LazyPool.close`, or until a worker dies: the error goes to the owner,
and its next batch starts a fresh pool.

One death is no error: a worker's death by a signal that the main process
handles in Python (PreemptionSnapshot's SIGTERM), which reached the worker too.
Workers leave the signals that stop a job to the main process
(:mod:`researchutils._process_worker`), so this takes a signal outside that set,
or a task whose code put the default handler back. The batch is then not lost:
new workers start at once and every batch not yet collected is submitted to
them, and the main process, signalled too, decides what happens next (at most
:data:`_SIGNAL_RETRIES` times in a row, then the death is reported).

Tests: tests/test_lazy_pool.py, and the iterators' tests.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from researchutils._process_pool import ProcessPool, WorkerDiedError, closed_error

if TYPE_CHECKING:
    from researchutils._process_worker import Context, Source

# How many times in a row LazyPool.collect() makes a batch again after its workers died
# of a signal that the main process handles (each time the signal reached them too).
_SIGNAL_RETRIES = 3


def _handled_here(signal_number: int | None) -> bool:
    """Whether this process handles ``signal_number`` in Python (rather than dying of it)."""
    return signal_number is not None and callable(signal.getsignal(signal_number))


class _Handle(object):
    """A batch given to :class:`LazyPool`: what to make, and where it is being made."""

    __slots__ = ('items', 'keys', 'n_chunks', 'pool', 'batch_id')

    items: Sequence[Any]
    keys: Sequence[Any] | None
    n_chunks: int
    # Set by submit_to(), which LazyPool.submit() calls before it returns the handle.
    pool: ProcessPool
    batch_id: int

    def __init__(self, items: Sequence[Any], keys: Sequence[Any] | None, n_chunks: int) -> None:
        self.items, self.keys, self.n_chunks = items, keys, n_chunks

    def submit_to(self, pool: ProcessPool) -> None:
        self.pool = pool
        self.batch_id = pool.submit(self.items, self.keys, self.n_chunks)


class LazyPool(object):
    """A :class:`ProcessPool` started at the first :meth:`submit` and kept until
    :meth:`close`, or until a worker dies (the next :meth:`submit` starts a fresh one).

    Workers that die of a signal this process handles (see the module text) are
    replaced at once, and every batch not yet collected is made again.
    Not picklable: an owner that is copied or pickled drops it and makes another.
    """

    def __init__(self, source: Source, context: Context, n_processes: int,
                 maxtasksperchild: int | None, owner: str) -> None:
        # What each ProcessPool is made of.
        self._settings = (source, context, n_processes, maxtasksperchild, owner)
        self._pool: ProcessPool | None = None
        # Orders close() (from any thread) against starting and replacing the pool.
        self._lock = threading.Lock()
        # The handles submitted and neither collected nor cancelled, in submission order.
        self._outstanding: dict[_Handle, None] = {}

    def submit(self, items: Sequence[Any], keys: Sequence[Any] | None,
               n_chunks: int) -> _Handle:
        """Queues ``source.make(items, keys)``; returns the handle :meth:`collect` takes."""
        handle = _Handle(items, keys, n_chunks)
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPool(*self._settings)
            handle.submit_to(self._pool)
            self._outstanding[handle] = None
        return handle

    def collect(self, handle: _Handle, dataset_timeout: float | None,
                on_timeout: Callable[[], object]) -> list[Any]:
        """Returns the made items; see :meth:`ProcessPool.collect`."""
        retries = 0
        try:
            while True:
                pool = handle.pool
                try:
                    return pool.collect(handle.batch_id, dataset_timeout, on_timeout)
                except WorkerDiedError as error:
                    if retries == _SIGNAL_RETRIES or not _handled_here(error.signal_number):
                        with self._lock:
                            if pool is self._pool:
                                self._pool = None
                        pool.close()
                        raise
                    if not self._replace(pool):
                        raise closed_error() from None
                    retries += 1
        finally:
            with self._lock:
                self._outstanding.pop(handle, None)

    def _replace(self, dead: ProcessPool) -> bool:
        """Starts new workers in place of ``dead`` and submits the outstanding batches
        to them; False if :meth:`close` came meanwhile."""
        with self._lock:
            if self._pool is not dead:
                return False
            self._pool = None
            dead.close()
            self._pool = ProcessPool(*self._settings)
            for handle in self._outstanding:
                handle.submit_to(self._pool)
        return True

    def cancel(self, handle: _Handle) -> None:
        with self._lock:
            self._outstanding.pop(handle, None)
        # Its chunks may still be made; their results are dropped on arrival.
        handle.pool.cancel(handle.batch_id)

    def close(self) -> None:
        """Stops the workers, if any; leaves no child process."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __getstate__(self) -> NoReturn:
        raise TypeError('{}: worker processes cannot be pickled'.format(self._settings[-1]))
