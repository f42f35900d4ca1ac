"""The Chainer iterator over a DataManager's batches (private; see DataManager.get_iterator)."""
from __future__ import annotations

import collections
import warnings
from typing import TYPE_CHECKING, Any, TypeAlias

import chainer
import numpy
from chainer.iterators import MultiprocessIterator
from numpy.typing import NDArray

from researchutils._lazy_pool import LazyPool
from researchutils._process_worker import check_sendable, current_context
from researchutils.chainer.data_loading._batches import Batch, BatchSource
from researchutils.chainer.data_loading.abstract_sampler import AbstractSampler

if TYPE_CHECKING:
    from researchutils._lazy_pool import _Handle

_OWNER = 'DataManager'
# Seconds after which a batch still being made causes a warning, and again every as long.
_DATASET_TIMEOUT_S = 30.0
# Batches kept in the making per worker process, so that none waits for the next task.
_AHEAD_PER_PROCESS = 2
#: A batch's place: ``(epoch, position)``, the position counting examples in the epoch.
_Spot: TypeAlias = tuple[int, int]


def _warn_timeout() -> None:
    warnings.warn('DataManager: a batch has taken more than {} s; still waiting for the '
                  'worker processes'.format(_DATASET_TIMEOUT_S),
                  MultiprocessIterator.TimeoutWarning)


class BatchIterator(chainer.dataset.Iterator):
    """Chainer iterator over the batches that ``source`` makes, one epoch at a time.

    Its position in an epoch counts examples, as Chainer's iterators do: the batch
    at ``current_position`` holds the next ``batch_size`` examples of the epoch's
    order (fewer at its end; none with ``drop_last``, which then ends the epoch).
    So a snapshot resumes exactly under another ``batch_size``: no example is
    trained twice or skipped. ``epoch_detail`` counts batches of the current size.

    With ``n_processes`` worker processes it owns one pool from its first batch to
    :meth:`finalize`, sending the source to each worker once, and keeps
    ``2 * n_processes`` batches in the making, across epoch ends. After an error
    the state stays before the failed batch, so the next call retries it (with
    fresh workers if one died). It holds no reference to its DataManager.
    """

    def __init__(self, source: BatchSource, sampler: AbstractSampler, batch_size: int,
                 n_examples: int, drop_last: bool, repeat: bool, n_processes: int) -> None:
        # Set first: Chainer's Iterator.__del__ calls finalize() even if __init__ raised.
        # (epoch, position, handle) of batches submitted:
        self._planned: collections.deque[tuple[int, int, _Handle]] = collections.deque()
        self._pool: LazyPool | None = None
        if n_processes:
            context = current_context()
            check_sendable(source, context, _OWNER)
            self._pool = LazyPool(source, context, n_processes, None, _OWNER)
        self._ahead = _AHEAD_PER_PROCESS * n_processes
        # The epoch whose order is cached, and that order.
        self._cached_order: tuple[int, NDArray[numpy.int64] | range] | None = None
        self._source, self.sampler, self.repeat = source, sampler, repeat
        self.batch_size, self._n_examples, self._drop_last = batch_size, n_examples, drop_last
        self.reset()

    def restart(self, sampler: AbstractSampler) -> None:
        """Rewinds to the start of epoch 0 with a new sampler; the worker processes stay."""
        self.sampler = sampler
        self._cached_order = None
        self.reset()

    def reset(self) -> None:
        """Rewinds to the start of epoch 0; the worker processes stay."""
        self._discard_planned()
        self.epoch = 0
        self.current_position = 0
        self.is_new_epoch = False
        self.previous_epoch_detail: float | None = None

    @property
    def epoch_detail(self) -> float:
        # In batches of the current size, as len(DataManager) counts them.
        size = self.batch_size
        n_batches = (self._n_examples // size if self._drop_last
                     else -(-self._n_examples // size))
        return self.epoch + -(-self.current_position // size) / n_batches

    def __next__(self) -> Batch:
        if not self.repeat and self.epoch > 0:
            raise StopIteration
        if self._pool is None:
            spot = (self.epoch, self.current_position)
            batch = self._source.build(self._indices(spot), self._key(spot))
        else:
            batch = self._next_from_workers(self._pool)
        self.previous_epoch_detail = self.epoch_detail
        following = self._following(self.current_position)
        self.is_new_epoch = following is None
        if following is None:
            self.epoch += 1
            self.current_position = 0
        else:
            self.current_position = following
        return batch

    next = __next__

    def _has_batch_at(self, position: int) -> bool:
        if self._drop_last:
            return position + self.batch_size <= self._n_examples
        return position < self._n_examples

    def _following(self, position: int) -> int | None:
        """Where the batch after the one at ``position`` starts; None: the epoch ends."""
        position += self.batch_size
        return position if self._has_batch_at(position) else None

    def _next_from_workers(self, pool: LazyPool) -> Batch:
        planned = self._planned
        spot: _Spot | None = planned[-1][:2] if planned else None
        while len(planned) < self._ahead:
            spot = (self.epoch, self.current_position) if spot is None else self._after(spot)
            if spot is None:
                break
            keys = None if self._source.seed is None else [self._key(spot)]
            planned.append(spot + (pool.submit([self._indices(spot)], keys, 1),))
        try:
            batch, = pool.collect(planned[0][2], _DATASET_TIMEOUT_S, _warn_timeout)
        except BaseException:
            self._discard_planned()
            raise
        planned.popleft()
        return batch

    def _after(self, spot: _Spot) -> _Spot | None:
        """The batch after ``spot``, or None where a run without repeat ends."""
        epoch, position = spot
        following = self._following(position)
        if following is not None:
            return epoch, following
        return (epoch + 1, 0) if self.repeat else None

    def _key(self, spot: _Spot) -> tuple[int, int]:
        """``(epoch, batch)``, the batch counted in batches of the current size, as seeds need."""
        epoch, position = spot
        return epoch, position // self.batch_size

    def _indices(self, spot: _Spot) -> NDArray[numpy.int64] | range:
        epoch, position = spot
        cached = self._cached_order
        if cached is None or cached[0] != epoch:
            cached = self._cached_order = (epoch, self.sampler.epoch_order(epoch))
        return cached[1][position:position + self.batch_size]

    def _discard_planned(self) -> None:
        if self._pool is None:  # without workers nothing is ever planned
            return
        while self._planned:
            self._pool.cancel(self._planned.popleft()[2])

    def finalize(self) -> None:
        """Stops the worker processes, leaving no child; a later batch starts new ones."""
        self._discard_planned()
        if self._pool is not None:
            self._pool.close()

    def serialize(self, serializer: Any) -> None:
        loading = isinstance(serializer, chainer.serializer.Deserializer)
        epoch = int(serializer('epoch', self.epoch))
        try:
            position = int(serializer('current_position', self.current_position))
        except KeyError:  # written before positions counted examples: batches of this size
            position = int(serializer('position', 0)) * self.batch_size
        is_new_epoch = bool(serializer('is_new_epoch', self.is_new_epoch))
        # -1 stands for None, as in Chainer's snapshots, which cannot hold None.
        previous = serializer('previous_epoch_detail', (
            -1. if self.previous_epoch_detail is None else self.previous_epoch_detail))
        self.sampler.serialize(serializer['sampler'])
        if not loading:
            return
        if not 0 <= position < self._n_examples:
            raise ValueError('the snapshot has current_position {} outside 0..{} (the examples '
                             'of an epoch of this DataManager)'.format(
                                 position, self._n_examples - 1))
        self._discard_planned()
        self._cached_order = None
        self.epoch, self.current_position, self.is_new_epoch = epoch, position, is_new_epoch
        self.previous_epoch_detail = None if previous < 0 else float(previous)
        if not self._has_batch_at(position):
            # A larger batch_size with drop_last: what is left of the epoch is dropped.
            self.epoch, self.current_position, self.is_new_epoch = epoch + 1, 0, True
