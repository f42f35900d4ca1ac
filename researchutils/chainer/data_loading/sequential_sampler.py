"""SequentialSampler: the dataset's indices in their order, every epoch."""
from __future__ import annotations

import numpy
from numpy.typing import NDArray

from researchutils.chainer.data_loading.abstract_sampler import AbstractSampler


class SequentialSampler(AbstractSampler):
    """Visits the indices in the given order in every epoch.

    Args:
        indices (sequence of int): The dataset indices to visit.

    Example:
        >>> SequentialSampler([3, 1, 2]).epoch_order(5)
        array([3, 1, 2])
    """

    def epoch_order(self, epoch: int) -> NDArray[numpy.int64] | range:
        """Returns the indices, unchanged.

        Args:
            epoch (int): The epoch (ignored).

        Returns:
            numpy.ndarray or range: The indices (a range stays a range, so a
            sequential pass over a huge dataset holds no index array).

        Example:
            >>> SequentialSampler.from_dataset(range(3)).epoch_order(0)
            range(0, 3)
        """
        if isinstance(self.indices, range):
            return self.indices
        return self.indices.copy()
