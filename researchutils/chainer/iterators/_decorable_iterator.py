"""What the three decorable iterators share (private).

:class:`DecorableIterator` validates the arguments, keeps Chainer's epoch state
(Chainer's own state machine advances it, so the epoch arithmetic is exactly
Chainer's), writes and reads snapshots under the keys Chainer's
``SerialIterator`` uses; a subclass says how the next batch is made
(``_next_batch``). :class:`PrefetchingIterator` plans batches ahead, and its
subclasses only say how a planned batch is made: ``_submit`` starts making it,
``_collect`` returns it, ``_cancel`` abandons it and ``_close`` releases the
workers.
"""
from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

import numpy
from chainer import serializer as serializer_module
from chainer.dataset import iterator
from chainer.iterators import _statemachine
from chainer.iterators.order_samplers import ShuffleOrderSampler

from researchutils._checks import check_bool, check_positive_int, check_seed
from researchutils._numpy_random import seeded_permutation
from researchutils.chainer.iterators._example_source import ExampleSource
from researchutils.chainer.iterators.unmodifiable_decorable_list import UnmodifiableDecorableList

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy.typing

    from researchutils.chainer.iterators.unmodifiable_decorable_list import Dataset, DecorFun

    #: An epoch's order: dataset indices.
    Order: TypeAlias = numpy.typing.NDArray[numpy.integer[Any]]
    #: Chainer's ``order_sampler(current_order, current_position)``: the next epoch's order.
    OrderSampler: TypeAlias = Callable[[Order, int], numpy.typing.ArrayLike]
    #: Chainer's ``IteratorState(current_position, epoch, is_new_epoch, order)`` (Any).
    IteratorState: TypeAlias = _statemachine.IteratorState

#: How a prefetching iterator finds a batch it submitted to its workers.
_H = TypeVar('_H')


class _Planned(NamedTuple, Generic[_H]):
    state: IteratorState
    indices: list[int] | None
    handle: _H | None


class _SeededShuffle(object):
    """The order of epoch ``e`` is ``RandomState([seed, e]).permutation(n)``."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def order(self, epoch: int, size: int) -> Order:
        return seeded_permutation(self.seed, epoch, size)

    def __repr__(self) -> str:
        return '{}(seed={})'.format(type(self).__name__, self.seed)


class DecorableIterator(iterator.Iterator):
    """Base of the decorable iterators; see DecorableSerialIterator for the arguments."""

    # The order of the epoch after the current one when a snapshot holds it (_move_to).
    _drawn_order: Order | None

    def __init__(self, dataset: Dataset, batch_size: int, repeat: bool, shuffle: bool | None,
                 decor_fun: DecorFun | None, end_index: int | None,
                 order_sampler: OrderSampler | None, seed: int | None) -> None:
        self.batch_size = check_positive_int(batch_size, 'batch_size')
        self._repeat = check_bool(repeat, 'repeat')
        self._shuffle = check_bool(shuffle, 'shuffle', allow_none=True)
        if order_sampler is not None and not callable(order_sampler):
            raise TypeError('order_sampler must be callable or None, not {!r}'.format(
                order_sampler))
        if shuffle is not None and order_sampler is not None:
            raise ValueError('shuffle={!r} and an order_sampler were both given; set '
                             'shuffle=None to use the order_sampler'.format(shuffle))
        self.seed: int | None = check_seed(seed)
        view = UnmodifiableDecorableList(dataset, decor_fun, end_index)
        if len(view) == 0:
            raise ValueError('dataset is empty: an iterator needs at least one example')
        # As in the original researchutils and in Chainer, ``dataset`` is what is
        # iterated: the decorated examples.
        self.dataset = view
        self.decor_fun = decor_fun
        self.end_index = end_index
        self.order_sampler: OrderSampler | _SeededShuffle | None = order_sampler
        if order_sampler is None and self._shuffle is not False:
            self.order_sampler = ShuffleOrderSampler() if seed is None else _SeededShuffle(seed)
        self._source = ExampleSource(view, self.seed)
        self.reset()

    # --- Chainer's iterator interface -------------------------------------------

    def __next__(self) -> list[Any]:
        state, batch = self._next_batch()
        self._previous_epoch_detail = self.epoch_detail
        self._state = state
        if batch is None:
            raise StopIteration
        return batch

    next = __next__

    def reset(self) -> None:
        """Rewinds to the start of epoch 0, with a new order when shuffling."""
        size = len(self.dataset)
        if self.order_sampler is None:
            order = None
        elif isinstance(self.order_sampler, _SeededShuffle):
            order = self.order_sampler.order(0, size)
        else:
            order = self._checked_order(self.order_sampler(numpy.arange(size), 0))
        self._move_to(_statemachine.IteratorState(0, 0, False, order), -1.)

    def finalize(self) -> None:
        """Stops the workers, if any; calling it again does nothing."""
        self._discard_prefetched()
        self._close()

    @property
    def current_position(self) -> int:
        return self._state.current_position

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def is_new_epoch(self) -> bool:
        return self._state.is_new_epoch

    @property
    def _epoch_size(self) -> int:
        # As in Chainer, an epoch is one pass over the order, which an order
        # sampler may make longer or shorter than the dataset.
        order = self._state.order
        return len(self.dataset) if order is None else len(order)

    @property
    def epoch_detail(self) -> float:
        return self.epoch + self.current_position / self._epoch_size

    @property
    def previous_epoch_detail(self) -> float | None:
        # -1 stands for None internally, as in Chainer, since snapshots cannot hold None.
        if self._previous_epoch_detail < 0:
            return None
        return self._previous_epoch_detail

    @property
    def repeat(self) -> bool:
        return self._repeat

    def serialize(self, serializer: serializer_module.AbstractSerializer) -> None:
        """Saves or loads the position under the keys of Chainer's ``SerialIterator``.

        A snapshot taken by any decorable iterator can be loaded into any other
        (or into a Chainer ``SerialIterator`` over the same examples); batches
        prefetched by the loading iterator are discarded. An iterator that
        shuffles without a seed and has drawn the next epoch's order for a batch
        made ahead also saves that order (``next_order``): it was drawn from the
        global NumPy state, which a snapshot holds only after the draw, so the
        resumed iterator uses it rather than drawing another.
        """
        loading = isinstance(serializer, serializer_module.Deserializer)
        next_order = None if loading else self._order_drawn_ahead()
        if loading or next_order is not None:
            try:
                next_order = serializer('next_order', next_order)
            except KeyError:  # none was drawn ahead, or another iterator wrote it
                next_order = None
        current_position = serializer('current_position', self.current_position)
        epoch = serializer('epoch', self.epoch)
        is_new_epoch = serializer('is_new_epoch', self.is_new_epoch)
        order = self._state.order
        if order is not None:
            # Loading with None makes the deserializer return the stored array,
            # which is checked below, instead of copying it into ours.
            order = None if loading else order
            try:
                order = serializer('order', order)
            except KeyError:  # written by Chainer's MultithreadIterator
                order = serializer('_order', order)
        try:
            previous_epoch_detail = serializer('previous_epoch_detail',
                                               self._previous_epoch_detail)
        except KeyError:  # snapshots of Chainer before v4 do not have it: estimate it
            previous_epoch_detail = None
            if self._epoch_size and (epoch or current_position):
                previous_epoch_detail = max(
                    0., epoch + (current_position - self.batch_size) / self._epoch_size)
        if not loading:
            return
        if order is not None:
            order = self._checked_order(order, 'the snapshot', self._epoch_size)
        if not 0 <= current_position <= self._epoch_size:
            raise ValueError('the snapshot has current_position {} outside 0..{} (the epoch '
                             'size of this iterator)'.format(current_position, self._epoch_size))
        self._move_to(
            _statemachine.IteratorState(
                int(current_position), int(epoch), bool(is_new_epoch), order),
            -1. if previous_epoch_detail is None else float(previous_epoch_detail))
        if next_order is not None and order is not None and \
                not isinstance(self.order_sampler, _SeededShuffle):
            self._drawn_order = self._checked_order(next_order, 'the snapshot', len(order))

    # --- planning ------------------------------------------------------------------

    def _move_to(self, state: IteratorState, previous_epoch_detail: float) -> None:
        """Jumps to ``state`` (by reset or a snapshot), dropping the batches made ahead."""
        self._discard_prefetched()
        self._state = state
        self._previous_epoch_detail = previous_epoch_detail
        # The order of the epoch after ``state`` when a snapshot holds it (see serialize).
        self._drawn_order = None

    def _order_drawn_ahead(self) -> Order | None:
        """The next epoch's order if a batch made ahead drew it from an unseeded sampler."""
        return None

    def _checked_order(self, order: numpy.typing.ArrayLike, source: str = 'order_sampler',
                       size: int | None = None) -> Order:
        """Returns ``order`` as an array of indices into ``self.dataset``, or raises.

        ``size``, when given, is the length the order must have: that of the
        epochs before it (Chainer's rule too).
        """
        array = numpy.asarray(order)
        if array.ndim != 1 or len(array) == 0:
            raise ValueError('{} gave an order of shape {}; an order is a non-empty 1-D '
                             'sequence of dataset indices (an epoch with no examples is '
                             'not allowed)'.format(source, array.shape))
        if not numpy.issubdtype(array.dtype, numpy.integer):
            raise TypeError('{} gave an order of dtype {}; dataset indices must be '
                            'integers'.format(source, array.dtype))
        if size is not None and len(array) != size:
            raise ValueError('{} gave an order of {} examples, but the epochs of this '
                             'iterator have {}: every order must have the length of the '
                             'first'.format(source, len(array), size))
        limit = len(self.dataset)
        outside = (array < 0) | (array >= limit)
        if outside.any():
            raise ValueError('{} gave an order with index {} at position {}; indices must '
                             'lie in 0..{} (end_index={!r}, dataset length {})'.format(
                                 source, int(array[outside][0]), int(outside.argmax()),
                                 limit - 1, self.end_index, len(self.dataset.items)))
        return array

    def _plan(self, state: IteratorState
              ) -> tuple[IteratorState, list[int] | None, list[int] | None]:
        """Returns the state after the batch that follows ``state``, its indices and epochs.

        The epochs, needed only to seed ``decor_fun``, are None without a seed.
        """
        given = self.order_sampler
        order_sampler: Callable[[Order, int], Order] | None = None
        if isinstance(given, _SeededShuffle):
            next_epochs = itertools.count(state.epoch + 1)
            seeded = given

            def seeded_order(current_order: Order, current_position: int) -> Order:
                return seeded.order(next(next_epochs), len(current_order))
            order_sampler = seeded_order
        elif given is not None:
            sampler = given

            def checked(current_order: Order, current_position: int) -> Order:
                return self._checked_order(sampler(current_order, current_position),
                                           size=len(current_order))
            order_sampler = checked
            if self._drawn_order is not None:

                def drawn_first(current_order: Order, current_position: int) -> Order:
                    # The order a snapshot holds, drawn before it was taken: used once.
                    drawn, self._drawn_order = self._drawn_order, None
                    if drawn is not None:
                        return drawn
                    return checked(current_order, current_position)
                order_sampler = drawn_first
        new_state, indices = _statemachine.iterator_statemachine(
            state, self.batch_size, self._repeat, order_sampler, len(self.dataset))
        if indices is None:
            return new_state, None, None
        if self.seed is None:
            return new_state, indices.tolist(), None
        # Example k of the batch lies k places after the current position, in the
        # epoch that many places fall into.
        positions = state.current_position + numpy.arange(len(indices))
        epochs = state.epoch + positions // self._epoch_size
        return new_state, indices.tolist(), epochs.tolist()

    def _next_batch(self) -> tuple[IteratorState, list[Any] | None]:
        """Returns the state after the next batch and the batch, or None at the end."""
        raise NotImplementedError

    def _discard_prefetched(self) -> None:
        pass

    def _close(self) -> None:
        pass


class PrefetchingIterator(DecorableIterator, Generic[_H]):
    """A decorable iterator whose workers make the next batches ahead of ``next()``.

    ``finalize()`` may come from another thread while ``next()`` waits for a
    batch: a lock guards the planned batches and the workers, and is never
    held while waiting for the workers.
    """

    # How many batches beyond the one ``next()`` returns are planned and submitted.
    _ahead = 1
    # Whether next() and reset() may start new workers after finalize(): Chainer's
    # MultithreadIterator does, its MultiprocessIterator refuses.
    _reusable_after_finalize = True
    # Attributes that belong to this iterator's workers: a copy or an unpickled
    # iterator starts without them (the class attributes), and starts its own.
    _worker_attributes: tuple[str, ...] = ()
    # Set by __init__ and __setstate__ (finalize() tells when construction failed first).
    _lock: threading.RLock
    _finalized = False

    def __init__(self, dataset: Dataset, batch_size: int, repeat: bool, shuffle: bool | None,
                 decor_fun: DecorFun | None, end_index: int | None,
                 order_sampler: OrderSampler | None, seed: int | None) -> None:
        self._lock = threading.RLock()
        self._planned: collections.deque[_Planned[_H]] = collections.deque()
        super(PrefetchingIterator, self).__init__(
            dataset, batch_size, repeat, shuffle, decor_fun, end_index, order_sampler, seed)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ('_lock', '_planned', '_finalized') + self._worker_attributes:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._planned = collections.deque()

    def finalize(self) -> None:
        """Stops the workers, if any; calling it again does nothing."""
        if getattr(self, '_lock', None) is None:  # construction failed before anything started
            return
        with self._lock:
            if not self._reusable_after_finalize:
                self._finalized = True
            self._discard_prefetched()
            self._close()

    def _move_to(self, state: IteratorState, previous_epoch_detail: float) -> None:
        with self._lock:
            if self._finalized:
                raise NotImplementedError(
                    '{} cannot be reset or loaded from a snapshot after finalize(), as '
                    "in Chainer; make a new iterator (or a copy of this one: copy.copy(it) "
                    'continues from the same position)'.format(type(self).__name__))
            super(PrefetchingIterator, self)._move_to(state, previous_epoch_detail)

    def _order_drawn_ahead(self) -> Order | None:
        if isinstance(self.order_sampler, _SeededShuffle):
            return None      # the seed gives every epoch's order again
        with self._lock:
            for planned in self._planned:
                if planned.state.epoch > self._state.epoch:
                    return planned.state.order
        return None

    def _plan_and_submit(self, state: IteratorState) -> None:
        new_state, indices, epochs = self._plan(state)
        handle = None if indices is None else self._submit(indices, epochs)
        self._planned.append(_Planned(new_state, indices, handle))

    def _next_batch(self) -> tuple[IteratorState, list[Any] | None]:
        planned = self._planned
        with self._lock:
            if self._finalized:
                raise RuntimeError(
                    '{}.next() after finalize(): the workers are stopped and, as in '
                    'Chainer, not started again; make a new iterator (or a copy of this '
                    'one: copy.copy(it) continues from the same position)'.format(
                        type(self).__name__))
            if not planned:
                self._plan_and_submit(self._state)
            while len(planned) <= self._ahead and planned[-1].indices is not None:
                self._plan_and_submit(planned[-1].state)
            head = planned[0]
            if head.indices is None:
                planned.popleft()
                return head.state, None
        try:
            # A planned batch has a handle when it has indices (_plan_and_submit).
            batch = self._collect(cast('_H', head.handle))
        except BaseException:
            # The state stays before the failed batch: the next call retries it.
            with self._lock:
                self._discard_prefetched()
            raise
        with self._lock:
            if planned and planned[0] is head:  # else finalize() discarded it meanwhile
                planned.popleft()
        return head.state, batch

    def _discard_prefetched(self) -> None:
        planned = getattr(self, '_planned', None)
        while planned:
            handle = planned.popleft().handle
            if handle is not None:
                self._cancel(handle)

    def _submit(self, indices: list[int], epochs: list[int] | None) -> _H:
        raise NotImplementedError

    def _collect(self, handle: _H) -> list[Any]:
        raise NotImplementedError

    def _cancel(self, handle: _H) -> None:
        raise NotImplementedError
