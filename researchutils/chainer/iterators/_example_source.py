"""ExampleSource: how the decorable iterators make the examples of a batch (private)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from researchutils._errors import add_note as _add_note
from researchutils._numpy_random import seeded_numpy_random

if TYPE_CHECKING:
    from researchutils.chainer.iterators.unmodifiable_decorable_list import (
        UnmodifiableDecorableList,
    )


class ExampleSource(object):
    """Makes the examples of a batch; picklable, so worker processes get a copy.

    The source of :mod:`researchutils._process_pool`: an item is a dataset index,
    its key the epoch. With a seed, the ``numpy.random`` draws made for example ``index`` in epoch
    ``epoch`` come from ``numpy.random.RandomState([seed, epoch, index])``.
    """

    def __init__(self, view: UnmodifiableDecorableList, seed: int | None) -> None:
        self.view = view
        self.seed = seed
        # Looked up once: make() runs for every batch.
        self._items = view.items
        self._decor_fun = view.decor_fun

    def parts(self) -> list[tuple[str, object]]:
        """What the workers are sent, the user's function first."""
        return [('decor_fun', self.view.decor_fun), ('dataset', self.view.items)]

    @staticmethod
    def describe(index: int) -> str:
        return 'the example at dataset index {}'.format(index)

    def make(self, indices: Sequence[int], epochs: Sequence[int] | None) -> list[Any]:
        """Returns the examples at ``indices``; ``epochs`` matter only with a seed."""
        items = self._items
        decor_fun = self._decor_fun
        batch: list[Any] = []
        append = batch.append
        try:
            if self.seed is not None:
                get = self.view._get
                # With a seed, the iterator gives every index its epoch.
                for index, epoch in zip(indices, cast('Sequence[int]', epochs)):
                    with seeded_numpy_random([self.seed, epoch, index]):
                        append(get(index))
            elif decor_fun is None:
                for index in indices:
                    append(items[index])
            else:
                for index in indices:
                    append(decor_fun(items, index))
        except Exception as exc:
            index = indices[len(batch)]
            if decor_fun is None:
                what = 'dataset[{}]'.format(index)
            else:
                what = 'decor_fun(dataset, {})'.format(index)
            in_epoch = '' if epochs is None else ', epoch {}'.format(epochs[len(batch)])
            _add_note(exc, 'raised by {} (dataset index {}{})'.format(what, index, in_epoch))
            raise
        return batch
