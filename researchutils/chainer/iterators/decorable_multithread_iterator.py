"""DecorableMultithreadIterator: MultithreadIterator with ``decor_fun`` and ``end_index``."""
from __future__ import annotations

import concurrent.futures
import queue
import threading
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from researchutils._checks import check_positive_int
from researchutils._chunks import chunk_bounds
from researchutils.chainer.iterators._decorable_iterator import PrefetchingIterator

if TYPE_CHECKING:
    from researchutils.chainer.iterators._decorable_iterator import OrderSampler
    from researchutils.chainer.iterators._example_source import ExampleSource
    from researchutils.chainer.iterators.unmodifiable_decorable_list import Dataset, DecorFun

# How long next() waits for decor_fun before it warns that it is still waiting.
_WARN_AFTER_S = 30.0

# A batch submitted to the threads: the future of each of its chunks, in order.
_Futures: TypeAlias = list[concurrent.futures.Future[list[Any]]]
# A chunk for a thread: its future, dataset indices and epochs (None without a seed).
_Task: TypeAlias = tuple[concurrent.futures.Future[list[Any]], list[int], list[int] | None]


def _thread_main(tasks: queue.SimpleQueue[_Task | None], source: ExampleSource) -> None:
    while True:
        task = tasks.get()
        if task is None:
            return
        future, indices, epochs = task
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(source.make(indices, epochs))
        except BaseException as exc:  # handed to the thread that calls next()
            future.set_exception(exc)


class DecorableMultithreadIterator(PrefetchingIterator[_Futures]):
    """Iterator that builds each example with ``decor_fun`` in worker threads.

    A drop-in replacement for :class:`chainer.iterators.MultithreadIterator`
    with the ``decor_fun`` and ``end_index`` of
    :class:`~researchutils.chainer.iterators.DecorableSerialIterator`. While
    one batch is returned, the next one is already being made by ``n_threads``
    daemon threads, which start at the first call to ``next()``.

    ``decor_fun`` runs in several threads at once, so it must be thread-safe:
    it may read the dataset but must not change shared state without a lock.
    Threads help when ``decor_fun`` releases the GIL (file reads, decoding,
    most NumPy work); for pure-Python work use
    :class:`~researchutils.chainer.iterators.DecorableMultiprocessIterator`.

    Snapshots, seeds, epochs and errors behave as in
    :class:`~researchutils.chainer.iterators.DecorableSerialIterator`: with a
    seed, every thread draws from its own per-example ``RandomState``, so the
    batches do not depend on ``n_threads``. An exception raised in a worker
    thread is raised by ``next()`` with its original traceback and a note
    naming the index. A ``decor_fun`` that has not returned after 30 seconds
    makes ``next()`` warn, every 30 seconds, that it is still waiting.

    As with Chainer's iterator, :meth:`finalize` stops the threads and a later
    ``next()`` starts new ones (``finalize()`` from another thread makes a
    ``next()`` that waits for a batch raise :class:`RuntimeError`). A copy
    (:func:`copy.copy`, or pickling) continues from the same position with
    threads of its own.

    Args:
        dataset: Dataset to iterate.
        batch_size (int): Number of examples in each batch.
        repeat (bool): Loop forever (``True``) or stop after one epoch.
        shuffle (bool): ``True``, ``False`` or ``None`` (shuffle unless
            ``order_sampler`` is given).
        n_threads (int): Number of worker threads.
        decor_fun (callable): ``decor_fun(dataset, index)`` returns the
            example; ``None`` means ``dataset[index]``. Must be thread-safe.
        end_index (int): Visit only the first ``end_index`` examples
            (``1..len(dataset)``), or all of them with ``None``.
        order_sampler (callable): Chainer's order sampler; see
            :class:`~researchutils.chainer.iterators.DecorableSerialIterator`.
            Keyword-only.
        seed (int): See
            :class:`~researchutils.chainer.iterators.DecorableSerialIterator`.
            Keyword-only.

    .. admonition:: Example

        >>> import numpy as np
        >>> def noisy(dataset, index):
        ...     return dataset[index] + np.random.uniform(-0.1, 0.1)
        >>> with DecorableMultithreadIterator(np.arange(8.), 4, shuffle=False, n_threads=2,
        ...                                   decor_fun=noisy, seed=0) as it:
        ...     batch = it.next()
        >>> [round(float(x)) for x in batch]
        [0, 1, 2, 3]
    """

    _ahead = 1
    _worker_attributes = ('_tasks', '_threads')
    _tasks: queue.SimpleQueue[_Task | None] | None = None
    _threads: Sequence[threading.Thread] = ()

    def __init__(self, dataset: Dataset, batch_size: int, repeat: bool = True,
                 shuffle: bool | None = None, n_threads: int = 1,
                 decor_fun: DecorFun | None = None, end_index: int | None = None, *,
                 order_sampler: OrderSampler | None = None, seed: int | None = None) -> None:
        self.n_threads = check_positive_int(n_threads, 'n_threads')
        self._tasks = None
        self._threads = []
        super(DecorableMultithreadIterator, self).__init__(
            dataset, batch_size, repeat, shuffle, decor_fun, end_index, order_sampler, seed)

    def _submit(self, indices: list[int], epochs: list[int] | None) -> _Futures:
        if self._tasks is None:
            self._tasks = queue.SimpleQueue()
            self._threads = [
                threading.Thread(target=_thread_main, args=(self._tasks, self._source),
                                 name='DecorableMultithreadIterator-{}'.format(k), daemon=True)
                for k in range(self.n_threads)]
            for thread in self._threads:
                thread.start()
        futures: _Futures = []
        # Twice as many chunks as threads, so that a slow chunk does not idle the others.
        for start, stop in chunk_bounds(len(indices), 2 * self.n_threads):
            future: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
            self._tasks.put((future, indices[start:stop],
                             None if epochs is None else epochs[start:stop]))
            futures.append(future)
        return futures

    def _collect(self, futures: _Futures) -> list[Any]:
        batch: list[Any] = []
        for future in futures:
            # Not future.result(timeout): decor_fun's own TimeoutError must not
            # look like an expired wait.
            while not concurrent.futures.wait([future], timeout=_WARN_AFTER_S).done:
                warnings.warn('DecorableMultithreadIterator: decor_fun has not returned '
                              'after {} s; still waiting'.format(_WARN_AFTER_S),
                              RuntimeWarning)
            try:
                batch.extend(future.result())
            except concurrent.futures.CancelledError:
                raise RuntimeError('DecorableMultithreadIterator: finalize() was called, '
                                   'from another thread, while next() waited for this '
                                   'batch') from None
        return batch

    def _cancel(self, futures: _Futures) -> None:
        for future in futures:
            future.cancel()

    def _close(self) -> None:
        tasks = getattr(self, '_tasks', None)
        if tasks is None:
            return
        # The threads are daemons: one stuck in decor_fun neither blocks this
        # call nor the interpreter's exit.
        for _ in self._threads:
            tasks.put(None)
        self._tasks = None
        self._threads = []
