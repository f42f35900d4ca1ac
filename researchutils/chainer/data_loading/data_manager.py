"""DataManager: dict batches from an AbstractDataset, augmented in worker processes."""
import os

import chainer
import numpy

from researchutils._checks import (
    check_bool,
    check_non_negative_int,
    check_positive_int,
    check_seed,
)
from researchutils._errors import add_note as _add_note
from researchutils.chainer.data_loading.abstract_dataset import AbstractDataset
from researchutils.chainer.data_loading.abstract_sampler import AbstractSampler
from researchutils.chainer.data_loading.sequential_sampler import SequentialSampler
from researchutils.chainer.iterators import DecorableMultiprocessIterator
from researchutils.chainer.iterators._numpy_random import seeded_numpy_random


def _stack_examples(examples, indices):
    first = examples[0]
    for example, index in zip(examples, indices):
        if not isinstance(example, dict):
            raise TypeError('dataset[{}] returned {}, but a DataManager needs a dict of arrays '
                            '(see AbstractDataset)'.format(index, type(example).__name__))
        if example.keys() != first.keys():
            raise KeyError('dataset[{}] has keys {}, but dataset[{}] has keys {}: every example '
                           'needs the same keys'.format(index, sorted(example), indices[0],
                                                        sorted(first)))
    batch = {}
    for key in first:
        try:
            batch[key] = numpy.stack([numpy.asarray(example[key]) for example in examples])
        except ValueError as error:
            _add_note(error, 'while stacking key {!r} of dataset indices {}'.format(
                key, list(indices)))
            raise
    return batch


class _BatchBuilder(object):
    """``decor_fun`` of the worker iterator: batch ``index`` of an epoch plan."""

    def __init__(self, dataset, transforms, seed=None):
        self.dataset = dataset
        self.transforms = transforms
        self.seed = seed

    def __call__(self, plan, index):
        if self.seed is None:
            return self._build(plan, index)
        # The draws depend on (seed, epoch, batch) alone: not on the worker that builds
        # the batch, the number of workers, or where a resumed epoch restarted.
        key = [self.seed, getattr(plan, 'epoch', 0), getattr(plan, 'first', 0) + index]
        with seeded_numpy_random(key):
            return self._build(plan, index)

    def _build(self, plan, index):
        indices = [int(i) for i in plan[index]]
        examples = []
        for i in indices:
            try:
                examples.append(self.dataset[i])
            except Exception as error:
                _add_note(error, 'while loading dataset[{}]'.format(i))
                raise
        batch = _stack_examples(examples, indices)
        if self.transforms is not None:
            try:
                batch = self.transforms(batch)
            except Exception as error:
                _add_note(error, 'in transforms, on the batch of dataset indices {}'.format(
                    indices))
                raise
            if not isinstance(batch, dict):
                raise TypeError('transforms must return a dict batch, got {}'.format(
                    type(batch).__name__))
        return batch


def _in_process_batches(builder, plan):
    for index in range(len(plan)):
        yield builder(plan, index)


def _worker_batches(builder, plan, n_processes):
    # Each "example" of this iterator is a whole batch; a group of n_processes
    # batches is built in parallel, one per worker.
    iterator = DecorableMultiprocessIterator(
        plan, n_processes, repeat=False, shuffle=False, n_processes=n_processes,
        decor_fun=builder)
    try:
        for group in iterator:
            for batch in group:
                yield batch
    finally:
        iterator.finalize()


class _EpochPlan(object):
    """The dataset indices of each batch of an epoch, sliced lazily from the order."""

    def __init__(self, order, batch_size, n_batches, first=0, epoch=0):
        self._order = order
        self._batch_size = batch_size
        self._n_batches = n_batches
        self.first = first
        self.epoch = epoch

    def __len__(self):
        return self._n_batches - self.first

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, _, _ = index.indices(len(self))
            return _EpochPlan(self._order, self._batch_size, self._n_batches,
                              self.first + start, self.epoch)
        if not 0 <= index < len(self):
            raise IndexError('batch {} of an epoch plan of {}'.format(index, len(self)))
        start = (self.first + index) * self._batch_size
        return self._order[start:start + self._batch_size]


class _BatchIterator(chainer.dataset.Iterator):
    """Chainer iterator over a DataManager's batches (see DataManager.get_iterator)."""

    def __init__(self, manager, repeat):
        self._manager = manager
        self.repeat = repeat
        self.batch_size = manager.batch_size
        self.sampler = manager.sampler_cls.from_dataset(manager.dataset, **manager.sampler_kwargs)
        self._builder = _BatchBuilder(manager.dataset, manager.transforms, manager.seed)
        self._n_batches = len(manager)
        self.reset()

    def reset(self):
        self._close_producer()
        self.epoch = 0
        self.position = 0
        self.is_new_epoch = False
        self._previous_epoch_detail = -1.

    @property
    def epoch_detail(self):
        return self.epoch + self.position / self._n_batches

    @property
    def previous_epoch_detail(self):
        if self._previous_epoch_detail < 0:
            return None
        return self._previous_epoch_detail

    def __next__(self):
        if not self.repeat and self.epoch > 0:
            raise StopIteration
        if self._producer is None:
            plan = self._manager.epoch_plan(self.sampler, self.epoch)[self.position:]
            if self._manager.n_process_augmentation > 0:
                self._producer = _worker_batches(self._builder, plan,
                                                 self._manager.n_process_augmentation)
            else:
                self._producer = _in_process_batches(self._builder, plan)
        try:
            batch = next(self._producer)
        except BaseException:
            # The next call starts again from this position (with fresh workers).
            self._close_producer()
            raise
        self._previous_epoch_detail = self.epoch_detail
        self.position += 1
        self.is_new_epoch = self.position == self._n_batches
        if self.is_new_epoch:
            self.epoch += 1
            self.position = 0
            self._close_producer()
        return batch

    next = __next__

    def _close_producer(self):
        producer = getattr(self, '_producer', None)
        self._producer = None
        if producer is not None:
            producer.close()

    def finalize(self):
        self._close_producer()

    def serialize(self, serializer):
        self.epoch = int(serializer('epoch', self.epoch))
        self.position = int(serializer('position', self.position))
        self.is_new_epoch = bool(serializer('is_new_epoch', self.is_new_epoch))
        self._previous_epoch_detail = float(
            serializer('previous_epoch_detail', self._previous_epoch_detail))
        self.sampler.serialize(serializer['sampler'])
        if isinstance(serializer, chainer.serializer.Deserializer):
            self._close_producer()


class DataManager(object):
    """Batches of a dataset, as dicts of stacked arrays, one epoch at a time.

    Each batch is a dict with the dataset's keys whose values are the
    examples' arrays stacked along a new first axis. The sampler decides the
    order of every epoch; ``transforms`` (a callable from a batch dict to a
    batch dict) augments each batch, in ``n_process_augmentation`` worker
    processes through
    :class:`~researchutils.chainer.iterators.DecorableMultiprocessIterator`
    (whole batches are built and transformed in the workers), or in this
    process when it is 0. A failing ``transforms`` or dataset raises its own
    exception, with a note naming the dataset indices.

    Iterating over a manager gives one epoch. :meth:`get_iterator` gives a
    Chainer iterator (``epoch``, ``epoch_detail``, ``is_new_epoch``,
    ``serialize``, ``finalize``) for a Chainer Trainer; unlike Chainer's own
    iterators its batches never span two epochs.

    The positional order is Delira 0.4.1's ``BaseDataManager(data, batch_size,
    n_process_augmentation, transforms, sampler_cls, sampler_kwargs)``
    (:class:`BaseDataManager` is this class under Delira's name); ``drop_last``
    and ``seed`` are keyword-only.

    Args:
        data: An :class:`AbstractDataset` (or any sequence of dicts of arrays
            with ``len``); the keyword ``dataset=`` names it too. Delira's
            loading of a folder given as a path (``load_fn``,
            ``dataset_cls``) is not offered: build the dataset first.
        batch_size (int): Examples per batch.
        n_process_augmentation (int): Worker processes for loading and
            ``transforms``; 0 works in this process.
        transforms (callable or None): ``transforms(batch) -> batch``. With
            worker processes it must be picklable under the ``spawn`` start
            method; without ``seed``, random draws use each worker's own random
            state.
        sampler_cls (type): An :class:`AbstractSampler` subclass, built with
            ``sampler_cls.from_dataset(dataset, **sampler_kwargs)``.
        sampler_kwargs (dict or None): Extra arguments of the sampler, for
            instance ``{"seed": 0}`` for :class:`RandomSampler`.
        drop_last (bool): Drop the last batch of an epoch when it is short.
        seed (int or None): With an integer in ``[0, 2**32)``, the ``numpy.random``
            draws made by the dataset and ``transforms`` while building batch ``b``
            of epoch ``e`` come from ``numpy.random.RandomState([seed, e, b])``: the
            same batches whatever ``n_process_augmentation``, in every run and after
            a resume. The order of the epochs is the sampler's (seed it through
            ``sampler_kwargs``).
        dataset: Another name of ``data`` (keyword only).

    Example:
        >>> import numpy as np
        >>> data = [{"data": np.full(3, i, np.float32), "label": np.int32(i % 2)}
        ...         for i in range(5)]
        >>> manager = DataManager(data, batch_size=2)
        >>> [batch["data"].shape for batch in manager]
        [(2, 3), (2, 3), (1, 3)]
        >>> len(DataManager(data, batch_size=2, drop_last=True))
        2
        >>> len(DataManager(data, 2, 0, None, SequentialSampler))  # Delira's order
        3
    """

    def __init__(self, data=None, batch_size=None, n_process_augmentation=0, transforms=None,
                 sampler_cls=SequentialSampler, sampler_kwargs=None, *, drop_last=False,
                 seed=None, dataset=None):
        if data is not None and dataset is not None:
            raise TypeError('data and dataset name the same argument: give one of them')
        dataset = data if dataset is None else dataset
        if dataset is None:
            raise TypeError('DataManager needs data, the dataset (an AbstractDataset)')
        if isinstance(dataset, (str, bytes, os.PathLike)):
            raise TypeError('data must be a dataset (an AbstractDataset), got the path {!r}: '
                            'Delira\'s loading of a folder is not offered, build the dataset '
                            'first'.format(dataset))
        if not (hasattr(dataset, '__len__') and hasattr(dataset, '__getitem__')):
            raise TypeError('data must support len() and indexing (an AbstractDataset), '
                            'got {}'.format(type(dataset).__name__))
        if len(dataset) == 0:
            raise ValueError('dataset is empty: a DataManager needs at least one example')
        batch_size = check_positive_int(batch_size, 'batch_size')
        if transforms is not None and not callable(transforms):
            raise TypeError('transforms must be a callable on a batch dict or None, got {!r}'
                            .format(transforms))
        if not (isinstance(sampler_cls, type) and issubclass(sampler_cls, AbstractSampler)):
            raise TypeError('sampler_cls must be an AbstractSampler subclass such as '
                            'SequentialSampler or RandomSampler, got {!r}'.format(sampler_cls))
        n_process_augmentation = check_non_negative_int(n_process_augmentation,
                                                        'n_process_augmentation')
        drop_last = check_bool(drop_last, 'drop_last')
        if drop_last and len(dataset) < batch_size:
            raise ValueError('drop_last=True with batch_size {} and a dataset of {} examples '
                             'gives no batch at all; lower batch_size or set drop_last=False'
                             .format(batch_size, len(dataset)))
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.transforms = transforms
        self.sampler_cls = sampler_cls
        self.n_process_augmentation = int(n_process_augmentation)
        self.drop_last = bool(drop_last)
        self.sampler_kwargs = dict(sampler_kwargs or {})
        self.seed = check_seed(seed)
        # Fail now, not at the first epoch, on sampler arguments it does not take.
        sampler_cls.from_dataset(dataset, **self.sampler_kwargs)

    def __len__(self):
        """Returns the number of batches in one epoch."""
        if self.drop_last:
            return len(self.dataset) // self.batch_size
        return -(-len(self.dataset) // self.batch_size)

    def __iter__(self):
        iterator = self.get_iterator(repeat=False)
        try:
            for batch in iterator:
                yield batch
        finally:
            iterator.finalize()

    def epoch_plan(self, sampler, epoch):
        """Returns the dataset indices of each batch of ``epoch``.

        Args:
            sampler (AbstractSampler): The sampler that orders the epoch.
            epoch (int): The epoch, 0-based.

        Returns:
            sequence: One sequence of dataset indices per batch, sliced from
            the epoch's order when asked for.

        Example:
            >>> manager = DataManager([{"x": 0}] * 5, 2)
            >>> [list(b) for b in manager.epoch_plan(SequentialSampler(range(5)), 0)]
            [[0, 1], [2, 3], [4]]
        """
        return _EpochPlan(sampler.epoch_order(epoch), self.batch_size, len(self), epoch=epoch)

    def get_iterator(self, repeat=True):
        """Returns a Chainer iterator over batch dicts.

        The iterator's state (epoch, position in the epoch, sampler seed) is
        serializable, so a Trainer snapshot resumes it exactly.

        Args:
            repeat (bool): Run through epochs forever; ``False`` stops after
                one epoch.

        Returns:
            chainer.dataset.Iterator: Its ``next()`` returns a batch dict.

        Example:
            >>> manager = DataManager([{"x": 1}] * 3, 2)
            >>> iterator = manager.get_iterator()
            >>> [len(iterator.next()["x"]) for _ in range(4)], iterator.epoch
            ([2, 1, 2, 1], 2)
        """
        return _BatchIterator(self, repeat)

    def batch_keys(self):
        """Returns the keys of this manager's batches (builds one batch in process).

        Returns:
            list of str: The keys, after ``transforms``.

        Example:
            >>> DataManager([{"data": 1, "label": 0}], 1).batch_keys()
            ['data', 'label']
        """
        plan = [range(min(self.batch_size, len(self.dataset)))]
        return list(_BatchBuilder(self.dataset, self.transforms, self.seed)(plan, 0))

    def replace(self, **changes):
        """Returns a manager with the same settings except ``changes``.

        Args:
            **changes: Constructor arguments to change, e.g. ``data`` (or
                ``dataset``) or ``batch_size``.

        Returns:
            DataManager: The new manager.

        Example:
            >>> manager = DataManager([{"x": 1}] * 4, 2)
            >>> len(manager.replace(batch_size=4))
            1
        """
        if 'data' in changes:
            changes = dict(changes)
            changes['dataset'] = changes.pop('data')
        settings = dict(dataset=self.dataset, batch_size=self.batch_size,
                        transforms=self.transforms, sampler_cls=self.sampler_cls,
                        n_process_augmentation=self.n_process_augmentation,
                        drop_last=self.drop_last, sampler_kwargs=self.sampler_kwargs,
                        seed=self.seed)
        unknown = set(changes) - set(settings)
        if unknown:
            raise TypeError('replace: unknown DataManager arguments {}'.format(sorted(unknown)))
        settings.update(changes)
        return DataManager(**settings)

    def get_subset(self, indices):
        """Returns a manager with the same settings over ``dataset[indices]``.

        Args:
            indices (sequence of int): Dataset indices.

        Returns:
            DataManager: The manager over the subset.

        Example:
            >>> len(DataManager([{"x": 1}] * 10, 2).get_subset(range(4)))
            2
        """
        if hasattr(self.dataset, 'get_subset'):
            return self.replace(dataset=self.dataset.get_subset(indices))
        # A plain sequence gets the same lazy view as an AbstractDataset.
        return self.replace(dataset=AbstractDataset.get_subset(self.dataset, indices))


#: Delira 0.4.1's name of :class:`DataManager` (the same class).
BaseDataManager = DataManager
