"""AbstractDataset: a map-style dataset whose examples are dicts of NumPy arrays."""
from __future__ import annotations

import abc
import numbers
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy
from numpy.typing import NDArray

from researchutils._typing import Indices

if TYPE_CHECKING:
    from researchutils.chainer.data_loading._batches import Dataset, Example


class AbstractDataset(abc.ABC):
    """Base class for datasets that :class:`DataManager` batches.

    A subclass implements ``__getitem__`` (an integer index to a dict of NumPy
    arrays, by convention with the keys ``"data"`` and ``"label"``) and
    ``__len__``. Everything else (subsets, lookup by index) is derived.

    Args:
        data_path: Where the data lives; kept as :attr:`data_path` for
            subclasses that load from disk. Accepted so that Delira-style
            subclasses calling ``super().__init__(data_path, load_fn)`` keep
            working.
        load_fn: A loading function kept as :attr:`load_fn`, for the same
            reason.

    Example:
        >>> import numpy as np
        >>> class Squares(AbstractDataset):
        ...     def __getitem__(self, index):
        ...         x = np.float32(index)
        ...         return {"data": np.array([x]), "label": np.array([x * x])}
        ...     def __len__(self):
        ...         return 4
        >>> Squares()[3]["label"]
        array([9.], dtype=float32)
        >>> len(Squares().get_subset([1, 3]))
        2
    """

    def __init__(self, data_path: str | os.PathLike[str] | None = None,
                 load_fn: Callable[..., Any] | None = None) -> None:
        self.data_path = data_path
        self.load_fn = load_fn

    @abc.abstractmethod
    def __getitem__(self, index: int) -> Example:
        """Returns the example at ``index`` as a dict of NumPy arrays."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """Returns the number of examples."""

    def get_sample_from_index(self, index: int) -> Example:
        """Returns the example at ``index`` (the same as ``self[index]``).

        Args:
            index (int): Position of the example, ``0 <= index < len(self)``.

        Returns:
            dict: The example, a dict of NumPy arrays.

        Example:
            >>> dataset.get_sample_from_index(0)  # doctest: +SKIP
            {'data': array([...]), 'label': array([...])}
        """
        return self[index]

    def get_subset(self, indices: Indices) -> AbstractDataset:
        """Returns a lazy view of the examples at ``indices``, in that order.

        Nothing is copied or loaded; the view is itself an
        :class:`AbstractDataset`, so subsets of subsets work.

        Args:
            indices (sequence of int): Positions in this dataset, each in
                ``0 <= index < len(self)``.

        Returns:
            AbstractDataset: ``view[i]`` is ``self[indices[i]]``.

        Raises:
            IndexError: An index is out of range (the message names it).

        Example:
            >>> train = dataset.get_subset(range(0, 800))  # doctest: +SKIP
            >>> val = dataset.get_subset(range(800, 1000))  # doctest: +SKIP
        """
        array = numpy.asarray(indices)
        integers = array.size == 0 or numpy.issubdtype(array.dtype, numpy.integer)
        if array.ndim != 1 or not integers:
            raise TypeError('get_subset: indices must be a 1-d sequence of integers, got {!r}'
                            .format(array))
        size = len(self)
        bad = array[(array < 0) | (array >= size)]
        if bad.size:
            raise IndexError('get_subset: index {} is out of range for a dataset of {} examples'
                             .format(int(bad[0]), size))
        return _SubsetDataset(self, array.astype(numpy.int64))


class _SubsetDataset(AbstractDataset):
    """The view returned by :meth:`AbstractDataset.get_subset`."""

    def __init__(self, base: Dataset, indices: NDArray[numpy.int64]) -> None:
        super().__init__(getattr(base, 'data_path', None), getattr(base, 'load_fn', None))
        self._base = base
        self._indices = indices

    def __getitem__(self, index: int) -> Example:
        if not isinstance(index, numbers.Integral):
            raise TypeError('subset index must be an integer, got {!r}'.format(index))
        return self._base[int(self._indices[index])]

    def __len__(self) -> int:
        return len(self._indices)
