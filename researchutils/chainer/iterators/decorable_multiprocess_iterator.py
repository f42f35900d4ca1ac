"""DecorableMultiprocessIterator: MultiprocessIterator with ``decor_fun`` and ``end_index``."""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from chainer.iterators import MultiprocessIterator

from researchutils._checks import check_positive_int, check_timeout
from researchutils._lazy_pool import LazyPool
from researchutils._process_worker import check_sendable, current_context
from researchutils.chainer.iterators._decorable_iterator import PrefetchingIterator

if TYPE_CHECKING:
    from researchutils._lazy_pool import _Handle
    from researchutils.chainer.iterators._decorable_iterator import OrderSampler
    from researchutils.chainer.iterators.unmodifiable_decorable_list import Dataset, DecorFun


def _default_n_processes() -> int:
    if hasattr(os, 'sched_getaffinity'):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class DecorableMultiprocessIterator(PrefetchingIterator['_Handle']):
    """Iterator that builds each example with ``decor_fun`` in worker processes.

    A drop-in replacement for :class:`chainer.iterators.MultiprocessIterator`
    with the ``decor_fun`` and ``end_index`` of
    :class:`~researchutils.chainer.iterators.DecorableSerialIterator`.
    ``n_processes`` worker processes, started at the first call to ``next()``,
    make the examples of the next ``n_prefetch`` batches while the current one
    is used. They are started with the start method :mod:`multiprocessing` has
    when the iterator is built (``fork``, ``spawn`` or ``forkserver``; choose
    it with :func:`multiprocessing.set_start_method`). However long the main
    process spends between batches, the workers wait for it; they exit within
    about a second once it is gone, even if it was killed, even in the middle
    of a ``decor_fun``. They leave the signals that stop a job (SIGTERM,
    SIGINT, SIGUSR1, SIGUSR2, SIGHUP) to the main process, even when a cluster
    sends them to every process of the job: see the cluster tutorial.

    Where Chainer's iterator hangs, this one reports:

    * An exception raised by ``decor_fun`` or the dataset in a worker is raised
      by ``next()`` with its original type and message, a note naming the
      dataset index, and the worker's traceback as its ``__cause__``.
    * A worker process that dies makes ``next()`` raise a :class:`RuntimeError`
      that says so, within a fraction of a second, even when it dies half-way
      through sending a large example: each worker sends its examples back
      through a pipe of its own, which ends when it dies. The workers are then
      shut down, and the next call to ``next()`` starts new ones and retries.
    * While workers are alive but a batch takes longer than ``dataset_timeout``
      seconds, ``next()`` warns with Chainer's
      ``MultiprocessIterator.TimeoutWarning`` every ``dataset_timeout`` seconds.
    * :meth:`finalize` stops the workers at once (SIGKILL, without waiting for
      their work) and reaps them, leaving no child process; an interpreter that
      exits without it stops them itself, and does not hang (the workers are
      daemons, so ``decor_fun`` cannot start processes of its own). Called from another thread while
      ``next()`` waits for a batch, it makes that ``next()`` raise a
      :class:`RuntimeError` saying so.

    As with Chainer's iterator, a finalized iterator is not restarted:
    :meth:`reset` and loading a snapshot raise :class:`NotImplementedError`,
    and ``next()`` raises :class:`RuntimeError`. Saving a snapshot still
    works. The iterator can be copied (:func:`copy.copy`) or pickled at any
    time, finalized or not, even while batches are being made: the copy
    continues from the same position with workers of its own.

    With ``seed=None`` every worker process reseeds ``numpy.random`` and
    :mod:`random` from the operating system, so random augmentations never
    repeat across workers. With an integer seed, draws depend only on
    ``(seed, epoch, index)``, so the batches are those of the serial iterator
    whatever ``n_processes``.

    The dataset and ``decor_fun`` are copied into the workers as they are when
    the workers start (the first ``next()``): under ``fork`` by forking, under
    ``spawn`` by pickling. Under ``spawn`` construction already checks that they
    can be pickled, and raises a :class:`TypeError` that says so if not; the
    pickled bytes are not kept. Changes made to the dataset once the workers run
    are not seen by them. Examples return to the main process pickled.

    Args:
        dataset: Dataset to iterate.
        batch_size (int): Number of examples in each batch.
        repeat (bool): Loop forever (``True``) or stop after one epoch.
        shuffle (bool): ``True``, ``False`` or ``None`` (shuffle unless
            ``order_sampler`` is given).
        n_processes (int): Number of worker processes; ``None`` means the
            number of CPU cores this process may use.
        n_prefetch (int): Number of batches made ahead of the one returned.
        shared_mem (int): Accepted for compatibility with Chainer and
            ignored: examples are sent back through each worker's own pipe,
            however large.
        decor_fun (callable): ``decor_fun(dataset, index)`` returns the
            example; ``None`` means ``dataset[index]``. Under ``spawn`` it must
            be picklable (defined at module level).
        end_index (int): Visit only the first ``end_index`` examples
            (``1..len(dataset)``), or all of them with ``None``.
        order_sampler (callable): Chainer's order sampler; see
            :class:`~researchutils.chainer.iterators.DecorableSerialIterator`.
            Keyword-only.
        seed (int): See
            :class:`~researchutils.chainer.iterators.DecorableSerialIterator`.
            Keyword-only.
        dataset_timeout (float): Seconds after which a batch that is still
            being made causes a warning; ``None`` disables the warning.
            Keyword-only.
        maxtasksperchild (int): A worker process that has made this many
            examples exits and is replaced by a fresh one; ``None`` keeps the
            workers for the whole run. Keyword-only.

    .. admonition:: Example

        >>> import numpy as np
        >>> def augment(dataset, index):
        ...     return dataset[index] * 2
        >>> images = np.arange(10, dtype=np.float32)
        >>> it = DecorableMultiprocessIterator(images, 4, repeat=False, shuffle=False,
        ...                                    n_processes=2, decor_fun=augment)
        >>> [[float(x) for x in batch] for batch in it]
        [[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0], [16.0, 18.0]]
        >>> it.finalize()
    """

    TimeoutWarning = MultiprocessIterator.TimeoutWarning
    _reusable_after_finalize = False
    _worker_attributes = ('_pool',)
    _pool: LazyPool | None = None

    def __init__(self, dataset: Dataset, batch_size: int, repeat: bool = True,
                 shuffle: bool | None = None, n_processes: int | None = None,
                 n_prefetch: int = 1, shared_mem: int | None = None,
                 decor_fun: DecorFun | None = None, end_index: int | None = None, *,
                 order_sampler: OrderSampler | None = None, seed: int | None = None,
                 dataset_timeout: float | None = 30.0,
                 maxtasksperchild: int | None = None) -> None:
        self.n_processes = (_default_n_processes() if n_processes is None
                            else check_positive_int(n_processes, 'n_processes'))
        self.n_prefetch = check_positive_int(n_prefetch, 'n_prefetch')
        if shared_mem is not None:
            check_positive_int(shared_mem, 'shared_mem', allow_none=True)
        self.shared_mem = shared_mem
        self.dataset_timeout = check_timeout(dataset_timeout, 'dataset_timeout', allow_none=True)
        self.maxtasksperchild = check_positive_int(
            maxtasksperchild, 'maxtasksperchild', allow_none=True)
        self._pool = None
        self._ahead = self.n_prefetch
        super(DecorableMultiprocessIterator, self).__init__(
            dataset, batch_size, repeat, shuffle, decor_fun, end_index, order_sampler, seed)
        self._context = current_context()
        # Fail now if the workers could not be sent what they need.
        check_sendable(self._source, self._context, type(self).__name__)

    def _submit(self, indices: list[int], epochs: list[int] | None) -> _Handle:
        if self._pool is None:
            self._pool = LazyPool(self._source, self._context, self.n_processes,
                                  self.maxtasksperchild, type(self).__name__)
        # Twice as many chunks as workers balances the load at little cost.
        return self._pool.submit(indices, epochs, 2 * self.n_processes)

    def _collect(self, handle: _Handle) -> list[Any]:
        assert self._pool is not None  # it made the handle (_submit); finalize() keeps it
        return self._pool.collect(handle, self.dataset_timeout, self._warn_timeout)

    def _warn_timeout(self) -> None:
        warnings.warn('DecorableMultiprocessIterator: a batch has taken more than {} s '
                      '(dataset_timeout); still waiting for the workers'.format(
                          self.dataset_timeout), self.TimeoutWarning)

    def _cancel(self, handle: _Handle) -> None:
        assert self._pool is not None  # as in _collect
        self._pool.cancel(handle)

    def _close(self) -> None:
        # The LazyPool stays: handles still held by a next() in another thread see
        # their ProcessPool closed and say so.
        if self._pool is not None:
            self._pool.close()
