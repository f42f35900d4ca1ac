"""DataManager: dict batches from an AbstractDataset, augmented in worker processes."""
from __future__ import annotations

import inspect
import os
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from researchutils._checks import (
    check_bool,
    check_mapping,
    check_non_negative_int,
    check_positive_int,
    check_seed,
)
from researchutils._typing import Indices
from researchutils.chainer.data_loading._batch_iterator import BatchIterator
from researchutils.chainer.data_loading._batches import (
    Batch,
    BatchSource,
    Dataset,
    EpochPlan,
    Transforms,
)
from researchutils.chainer.data_loading.abstract_dataset import AbstractDataset
from researchutils.chainer.data_loading.abstract_sampler import AbstractSampler
from researchutils.chainer.data_loading.sequential_sampler import SequentialSampler


class DataManager(object):
    """Batches of a dataset, as dicts of stacked arrays, one epoch at a time.

    Each batch is a dict with the dataset's keys whose values are the
    examples' arrays stacked along a new first axis. The sampler decides the
    order of every epoch; ``transforms`` (a callable from a batch dict to a
    batch dict) augments each batch, in ``n_process_augmentation`` worker
    processes (whole batches are built and transformed in the workers), or in
    this process when it is 0. A failing ``transforms`` or dataset raises its
    own exception, with a note naming the dataset indices; a worker that dies
    is reported as a :class:`RuntimeError`, and the next batch starts fresh
    workers and retries. The workers leave the signals that stop a job
    (SIGTERM, SIGINT, SIGUSR1...) to this process, even when a cluster sends
    them to every process of the job (see the cluster tutorial).

    Iterating over a manager gives one epoch. :meth:`get_iterator` gives a
    Chainer iterator (``epoch``, ``epoch_detail``, ``is_new_epoch``,
    ``serialize``, ``finalize``) for a Chainer Trainer; unlike Chainer's own
    iterators its batches never span two epochs. An iterator starts its worker
    processes at its first batch and keeps them, busy with the next batches
    across epoch ends, until its ``finalize``; the dataset and ``transforms``
    are sent to each worker once. ``for`` loops over the manager share one
    such iterator, kept until :meth:`finalize`, so a validation pass per epoch
    starts its workers once.

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
            instance ``{"seed": 0}`` for :class:`RandomSampler`; a mapping
            whose keys are arguments of ``sampler_cls`` (else a TypeError naming
            ``sampler_kwargs``).
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

    def __init__(self, data: Dataset | None = None, batch_size: int | None = None,
                 n_process_augmentation: int = 0, transforms: Transforms | None = None,
                 sampler_cls: type[AbstractSampler] = SequentialSampler,
                 sampler_kwargs: Mapping[str, Any] | None = None, *, drop_last: bool = False,
                 seed: int | None = None, dataset: Dataset | None = None) -> None:
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
        self.sampler_kwargs = check_mapping(sampler_kwargs, 'sampler_kwargs',
                                            allow_none=True) or {}
        self.seed = check_seed(seed)
        # Fail now, not at the first epoch, on sampler arguments it does not take.
        try:
            inspect.signature(sampler_cls).bind(dataset, **self.sampler_kwargs)
        except TypeError as error:
            raise TypeError('sampler_kwargs {!r} are not arguments of {}: {}'.format(
                self.sampler_kwargs, sampler_cls.__name__, error)) from None
        sampler_cls.from_dataset(dataset, **self.sampler_kwargs)
        self._kept_pass: BatchIterator | None = None
        self._pass_running = False
        self._pass_lock = threading.Lock()

    def __len__(self) -> int:
        """Returns the number of batches in one epoch."""
        if self.drop_last:
            return len(self.dataset) // self.batch_size
        return -(-len(self.dataset) // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        iterator, kept = self._pass_iterator()
        try:
            yield from iterator
        finally:
            if kept:
                iterator.reset()
                with self._pass_lock:
                    self._pass_running = False
            else:
                iterator.finalize()

    def _pass_iterator(self) -> tuple[BatchIterator, bool]:
        """The iterator of a ``for`` loop, and whether it is the kept one.

        With workers, loops reuse one iterator and its worker processes, kept
        until finalize() or until the manager is garbage-collected; a loop
        nested in another gets an iterator of its own.
        """
        with self._pass_lock:
            if not self.n_process_augmentation or self._pass_running:
                return self.get_iterator(repeat=False), False
            if self._kept_pass is None:
                self._kept_pass = self.get_iterator(repeat=False)
                # The iterator holds no reference to the manager, so this runs when it goes.
                weakref.finalize(self, self._kept_pass.finalize)
            else:
                # A new sampler for every loop, as a new iterator would have.
                self._kept_pass.restart(self._sampler())
            self._pass_running = True
            return self._kept_pass, True

    def finalize(self) -> None:
        """Stops the worker processes kept for iterating over the manager.

        A ``for`` loop over a manager with ``n_process_augmentation`` workers
        keeps them for the next loop (a validation pass per epoch starts them
        once); they also stop when the manager is garbage-collected. Iterators
        from :meth:`get_iterator` have workers of their own and a ``finalize``
        of their own. Calling it again does nothing; a later loop starts new
        workers.

        Example:
            >>> manager = DataManager([{"x": 1}] * 4, 2)
            >>> [len(batch["x"]) for batch in manager]
            [2, 2]
            >>> manager.finalize()
        """
        if self._kept_pass is not None:
            self._kept_pass.finalize()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # The worker processes belong to this object; a copy starts its own.
        state.update(_kept_pass=None, _pass_running=False)
        del state['_pass_lock']
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pass_lock = threading.Lock()

    def epoch_plan(self, sampler: AbstractSampler, epoch: int) -> EpochPlan:
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
        return EpochPlan(sampler.epoch_order(epoch), self.batch_size, len(self))

    def get_iterator(self, repeat: bool = True) -> BatchIterator:
        """Returns a Chainer iterator over batch dicts.

        The iterator's state (epoch, position in the epoch, sampler seed) is
        serializable, so a Trainer snapshot resumes it exactly. The position
        counts examples, as in Chainer's iterators: a snapshot resumed under
        another ``batch_size`` goes on from the next example of the epoch, and
        no example is trained twice or skipped.

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
        return BatchIterator(self._source(), self._sampler(), self.batch_size, len(self.dataset),
                             self.drop_last, repeat, self.n_process_augmentation)

    def _sampler(self) -> AbstractSampler:
        return self.sampler_cls.from_dataset(self.dataset, **self.sampler_kwargs)

    def _source(self) -> BatchSource:
        return BatchSource(self.dataset, self.transforms, self.seed)

    def batch_keys(self) -> list[str]:
        """Returns the keys of this manager's batches (builds one batch in process).

        Returns:
            list of str: The keys, after ``transforms``.

        Example:
            >>> DataManager([{"data": 1, "label": 0}], 1).batch_keys()
            ['data', 'label']
        """
        return list(self._source().build(range(min(self.batch_size, len(self.dataset)))))

    def replace(self, **changes: Any) -> DataManager:
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
        # The settings are the constructor's arguments, each kept under its own name.
        settings = {name: getattr(self, name)
                    for name in inspect.signature(DataManager).parameters if name != 'data'}
        unknown = set(changes) - set(settings)
        if unknown:
            raise TypeError('replace: unknown DataManager arguments {}'.format(sorted(unknown)))
        settings.update(changes)
        return DataManager(**settings)

    def get_subset(self, indices: Indices) -> DataManager:
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
        # A plain sequence gets the same lazy view as an AbstractDataset: get_subset needs
        # only len() and indexing, which every Dataset has (self is not annotated as a
        # Dataset there, because the API docs would then list self as a parameter).
        return self.replace(dataset=AbstractDataset.get_subset(
            self.dataset, indices))  # type: ignore[arg-type]


#: Delira 0.4.1's name of :class:`DataManager` (the same class).
BaseDataManager = DataManager
