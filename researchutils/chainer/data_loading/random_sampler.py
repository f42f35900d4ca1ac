"""RandomSampler: a fresh permutation of the dataset's indices every epoch."""
from __future__ import annotations

from typing import Any

import numpy
from numpy.typing import NDArray

from researchutils._checks import check_seed
from researchutils._numpy_random import seeded_permutation
from researchutils._typing import Indices
from researchutils.chainer.data_loading.abstract_sampler import AbstractSampler


class RandomSampler(AbstractSampler):
    """Visits the indices in a new random order in every epoch.

    The permutation of epoch ``e`` depends only on ``(seed, e)``, so a resumed
    run repeats no order and skips none. The seed is part of the serialized
    state. It is the rule of the decorable iterators' seeded shuffle: position
    ``k`` of epoch ``e`` holds ``indices[RandomState([seed, e]).permutation(n)[k]]``.

    Args:
        indices (sequence of int): The dataset indices to visit.
        seed (int or None): Seed of the permutations, an integer in
            ``[0, 2**32)`` (a bool is refused). ``None`` draws one from
            NumPy's global random state, so ``numpy.random.seed`` makes runs
            repeatable.

    Example:
        >>> sampler = RandomSampler(range(5), seed=0)
        >>> sorted(sampler.epoch_order(0)) == [0, 1, 2, 3, 4]
        True
        >>> bool((sampler.epoch_order(0) == RandomSampler(range(5), seed=0).epoch_order(0)).all())
        True
    """

    def __init__(self, indices: Indices, seed: int | None = None) -> None:
        super().__init__(indices)
        seed = check_seed(seed)
        if seed is None:
            seed = int(numpy.random.randint(0, 2 ** 31 - 1))
        self.seed = seed

    def epoch_order(self, epoch: int) -> NDArray[numpy.int64]:
        """Returns the permutation of the indices for ``epoch``.

        Args:
            epoch (int): The epoch, 0-based.

        Returns:
            numpy.ndarray: A permutation of the indices (int64).

        Example:
            >>> RandomSampler(range(4), seed=1).epoch_order(0).shape
            (4,)
        """
        return numpy.asarray(self.indices, dtype=numpy.int64)[
            seeded_permutation(self.seed, int(epoch), len(self.indices))]

    def serialize(self, serializer: Any) -> None:
        """Saves or loads the seed.

        Args:
            serializer: A Chainer serializer or deserializer.
        """
        self.seed = int(serializer('seed', self.seed))
