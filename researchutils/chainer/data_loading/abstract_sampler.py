"""AbstractSampler: the order in which a DataManager visits a dataset, per epoch."""
from __future__ import annotations

import abc
from collections.abc import Sized
from typing import Any, Self

import numpy
from numpy.typing import NDArray

from researchutils._checks import check_indices
from researchutils._typing import Indices


class AbstractSampler(abc.ABC):
    """Decides the order of a dataset's indices in each epoch.

    The order of an epoch is a function of the epoch number and of the
    sampler's state, so a run resumed from a snapshot at any epoch sees the
    same orders as an uninterrupted one. Subclasses implement
    :meth:`epoch_order`; :meth:`serialize` stores whatever state that needs.

    Args:
        indices (sequence of int): The dataset indices to visit, each an integer
            >= 0. A ``range`` is kept as it is (no array of one index per example
            is made).

    Raises:
        TypeError: ``indices`` is not a sequence of integers (floats and bools
            are refused, not rounded).
        ValueError: ``indices`` is not flat, or holds a negative index.

    Example:
        >>> import numpy
        >>> class EvenFirst(AbstractSampler):
        ...     def epoch_order(self, epoch):
        ...         indices = numpy.asarray(self.indices)
        ...         return numpy.concatenate([indices[::2], indices[1::2]])
        >>> EvenFirst(range(5)).epoch_order(0)
        array([0, 2, 4, 1, 3])
    """

    def __init__(self, indices: Indices) -> None:
        self.indices: range | NDArray[numpy.int64] = check_indices(indices, 'indices')

    @classmethod
    def from_dataset(cls, dataset: Sized, **kwargs: Any) -> Self:
        """Builds a sampler over all indices of ``dataset``.

        Args:
            dataset: Anything with ``len``.
            **kwargs: Passed to the constructor (for instance ``seed``).

        Returns:
            AbstractSampler: A sampler over ``range(len(dataset))``.

        Example:
            >>> from researchutils.chainer.data_loading import SequentialSampler
            >>> list(SequentialSampler.from_dataset([10, 20, 30]).epoch_order(0))
            [0, 1, 2]
        """
        return cls(range(len(dataset)), **kwargs)

    @abc.abstractmethod
    def epoch_order(self, epoch: int) -> NDArray[numpy.int64] | range:
        """Returns the indices to visit in ``epoch`` (0-based): an int64 array or a range."""

    def serialize(self, serializer: Any) -> None:  # noqa: B027 - stateless samplers store nothing
        """Saves or loads the sampler's state (none by default).

        Args:
            serializer: A Chainer serializer or deserializer.
        """

    def __len__(self) -> int:
        return len(self.indices)
