"""How a DataManager batch is made from dataset indices (private).

:class:`BatchSource` is what a worker process is sent once, when it starts: the
dataset, ``transforms`` and the seed. It is the source of
:mod:`researchutils._process_pool`: an item is the list of dataset indices of one
batch, its key ``(epoch, batch)``. :class:`EpochPlan` slices an epoch's order
into the indices of its batches.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias, overload

import numpy
from numpy.typing import NDArray

from researchutils._errors import add_note as _add_note
from researchutils._numpy_random import seeded_numpy_random
from researchutils._typing import Array, Indices

#: One example: the dataset's keys to arrays (or anything ``numpy.asarray`` takes). A dict
#: of Any values, because dict is invariant: a dataset's own ``dict[str, NDArray[float32]]``
#: must be one.
Example: TypeAlias = dict[str, Any]
#: A batch: the examples' keys to their arrays stacked (after ``transforms``, what they give).
Batch: TypeAlias = dict[str, Array]
#: ``transforms``: a batch to a batch.
Transforms: TypeAlias = Callable[[Batch], Batch]


class Dataset(Protocol):
    """What a DataManager batches: an AbstractDataset, or any sequence of example dicts."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> Example: ...


def _stack_examples(examples: Sequence[Example], indices: Sequence[int]) -> Batch:
    first = examples[0]
    for example, index in zip(examples, indices):
        if not isinstance(example, dict):
            raise TypeError('dataset[{}] returned {}, but a DataManager needs a dict of arrays '
                            '(see AbstractDataset)'.format(index, type(example).__name__))
        if example.keys() != first.keys():
            raise KeyError('dataset[{}] has keys {}, but dataset[{}] has keys {}: every example '
                           'needs the same keys'.format(index, sorted(example), indices[0],
                                                        sorted(first)))
    batch: Batch = {}
    for key in first:
        try:
            batch[key] = numpy.stack([numpy.asarray(example[key]) for example in examples])
        except ValueError as error:
            _add_note(error, 'while stacking key {!r} of dataset indices {}'.format(
                key, list(indices)))
            raise
    return batch


class BatchSource(object):
    """Makes batch dicts: loads the examples, stacks them, applies ``transforms``.

    With a seed, the ``numpy.random`` draws made for batch ``b`` of epoch ``e``
    come from ``RandomState([seed, e, b])``: not from the worker that builds the
    batch, the number of workers, or where a resumed epoch restarted.
    """

    def __init__(self, dataset: Dataset, transforms: Transforms | None,
                 seed: int | None) -> None:
        self.dataset = dataset
        self.transforms = transforms
        self.seed = seed

    def parts(self) -> list[tuple[str, object]]:
        """What the workers are sent, the user's function first."""
        return [('transforms', self.transforms), ('dataset', self.dataset)]

    @staticmethod
    def describe(indices: Indices) -> str:
        # Plain ints: NumPy 2 writes an int64 of an order array as np.int64(4).
        return 'the batch of dataset indices {}'.format([int(i) for i in indices])

    def make(self, batches: Sequence[Indices],
             keys: Sequence[tuple[int, int]] | None) -> list[Batch]:
        """Returns the batch of each list of dataset indices; ``keys`` matter with a seed."""
        if keys is None:
            return [self.build(indices) for indices in batches]
        return [self.build(indices, key) for indices, key in zip(batches, keys)]

    def build(self, indices: Indices, key: tuple[int, int] = (0, 0)) -> Batch:
        """Returns the batch of ``indices``, batch ``key[1]`` of epoch ``key[0]``."""
        if self.seed is None:
            return self._build(indices)
        with seeded_numpy_random([self.seed, key[0], key[1]]):
            return self._build(indices)

    def _build(self, indices: Indices) -> Batch:
        indices = [int(i) for i in indices]
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


class EpochPlan(object):
    """The dataset indices of each batch of an epoch, sliced lazily from its order."""

    def __init__(self, order: NDArray[numpy.int64] | range, batch_size: int,
                 n_batches: int) -> None:
        self._order = order
        self._batch_size = batch_size
        self._n_batches = n_batches

    def __len__(self) -> int:
        return self._n_batches

    @overload
    def __getitem__(self, index: int) -> NDArray[numpy.int64] | range: ...
    @overload
    def __getitem__(self, index: slice) -> list[NDArray[numpy.int64] | range]: ...

    def __getitem__(self, index: int | slice) -> (NDArray[numpy.int64] | range
                                                  | list[NDArray[numpy.int64] | range]):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n_batches))]
        if not 0 <= index < self._n_batches:
            raise IndexError('batch {} of an epoch plan of {}'.format(index, self._n_batches))
        start = index * self._batch_size
        return self._order[start:start + self._batch_size]
