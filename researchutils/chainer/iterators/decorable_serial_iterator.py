"""DecorableSerialIterator: Chainer's SerialIterator with ``decor_fun`` and ``end_index``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from researchutils.chainer.iterators._decorable_iterator import DecorableIterator

if TYPE_CHECKING:
    from researchutils.chainer.iterators._decorable_iterator import IteratorState, OrderSampler
    from researchutils.chainer.iterators.unmodifiable_decorable_list import Dataset, DecorFun


class DecorableSerialIterator(DecorableIterator):
    """Serial iterator that builds each example with ``decor_fun`` and stops at ``end_index``.

    A drop-in replacement for :class:`chainer.iterators.SerialIterator`: example
    ``i`` of a batch is ``decor_fun(dataset, i)`` (or ``dataset[i]``), computed
    in the calling thread, and only the first ``end_index`` examples of
    ``dataset`` are visited. An epoch has ``end_index`` examples, shuffling
    permutes only them, and ``epoch_detail`` counts in them.

    ``epoch``, ``epoch_detail``, ``previous_epoch_detail``, ``is_new_epoch``,
    ``reset()``, ``finalize()``, the context manager and ``serialize()`` behave
    as Chainer's. A snapshot (keys ``current_position``, ``epoch``,
    ``is_new_epoch``, ``order``, ``previous_epoch_detail``) can be loaded into
    any of the three decorable iterators, or into Chainer's ``SerialIterator``,
    and it continues with the same batches.

    As in the original researchutils, the ``dataset`` attribute is the
    :class:`~researchutils.chainer.iterators.UnmodifiableDecorableList` of the
    decorated examples (``len(it.dataset) == end_index``); the dataset given
    is ``it.dataset.items``.

    If ``decor_fun`` or the dataset raises, :meth:`__next__` raises the same
    exception with a note naming the dataset index; the iterator does not
    advance, so the next call tries that batch again.

    Args:
        dataset: Dataset to iterate: anything with ``len`` and integer
            indexing. Its length is read once, at construction.
        batch_size (int): Number of examples in each batch.
        repeat (bool): If ``True``, loop over the dataset forever; otherwise
            stop after one epoch, the last batch being short when the epoch
            size is not a multiple of ``batch_size``.
        shuffle (bool): ``True`` shuffles the order of the examples every epoch,
            ``False`` keeps the order of the indices, ``None`` (default)
            shuffles unless ``order_sampler`` is given, as in Chainer.
        decor_fun (callable): ``decor_fun(dataset, index)`` returns the example
            at the raw dataset index ``index`` (an ``int``), e.g. a stack of
            the frames before it or a random crop. ``None`` means
            ``dataset[index]``.
        end_index (int): Visit only the first ``end_index`` examples: an
            integer in ``1..len(dataset)``, or ``None`` for all of them.
        order_sampler (callable): Chainer's order sampler,
            ``order_sampler(current_order, current_position)`` returning the
            order of the next epoch: integer indices in ``0..end_index-1``.
            As in Chainer, the order may be longer or shorter than the
            dataset (each index twice, a subset); an epoch is then one pass
            over it, and ``epoch_detail`` counts in ``len(order)`` examples.
            Every order must have the length of the first. Not allowed with
            ``shuffle`` other than ``None``. Keyword-only.
        seed (int): ``None`` (default) leaves randomness alone. An integer in
            ``0..2**32-1`` makes the run reproducible: unless an
            ``order_sampler`` is given, the shuffled order of epoch ``e`` is
            ``numpy.random.RandomState([seed, e]).permutation(n)``, and while
            ``decor_fun`` makes the example at ``index`` in epoch ``e``, the
            legacy ``numpy.random`` functions (``numpy.random.rand``,
            ``numpy.random.randint``, ...) of its thread draw from
            ``numpy.random.RandomState([seed, e, index])``. The three
            decorable iterators then give identical batches. Call them as
            attributes of :mod:`numpy.random`: a function imported with
            ``from numpy.random import rand`` before the first seeded
            iterator ran keeps drawing from the global state. (The first
            seeded iterator of a process replaces those functions of
            :mod:`numpy.random` by wrappers that draw from the global state,
            as before, everywhere but inside a seeded ``decor_fun``.)
            Keyword-only.

    Raises:
        TypeError: An argument has the wrong type (the message names it).
        ValueError: An argument has a bad value, e.g. ``end_index`` outside
            ``1..len(dataset)``, ``batch_size < 1``, an empty dataset,
            ``shuffle`` together with ``order_sampler``, or an order with an
            index outside ``0..end_index-1`` (also when a later epoch's
            order has one: then raised by :meth:`__next__`).

    .. admonition:: Example

        >>> import numpy as np
        >>> video = np.arange(100, dtype=np.float32)
        >>> def last_three_frames(dataset, index):
        ...     return dataset[max(index - 2, 0):index + 1]
        >>> it = DecorableSerialIterator(video, batch_size=2, shuffle=False,
        ...                              decor_fun=last_three_frames, end_index=10)
        >>> [frames.tolist() for frames in it.next()]
        [[0.0], [0.0, 1.0]]
        >>> it.epoch_detail
        0.2
    """

    def __init__(self, dataset: Dataset, batch_size: int, repeat: bool = True,
                 shuffle: bool | None = None, decor_fun: DecorFun | None = None,
                 end_index: int | None = None, *, order_sampler: OrderSampler | None = None,
                 seed: int | None = None) -> None:
        super(DecorableSerialIterator, self).__init__(
            dataset, batch_size, repeat, shuffle, decor_fun, end_index, order_sampler, seed)

    def _next_batch(self) -> tuple[IteratorState, list[Any] | None]:
        state, indices, epochs = self._plan(self._state)
        if indices is None:
            return state, None
        return state, self._source.make(indices, epochs)
