"""ExampleSource: how the decorable iterators make the examples of a batch (private)."""
from researchutils._errors import add_note as _add_note
from researchutils._numpy_random import seeded_numpy_random


class ExampleSource(object):
    """Makes the examples of a batch; picklable, so worker processes get a copy.

    The source of :mod:`researchutils._process_pool`: an item is a dataset index,
    its key the epoch. With a seed, the ``numpy.random`` draws made for example ``index`` in epoch
    ``epoch`` come from ``numpy.random.RandomState([seed, epoch, index])``.
    """

    def __init__(self, view, seed):
        self.view = view
        self.seed = seed
        # Looked up once: make() runs for every batch.
        self._items = view.items
        self._decor_fun = view.decor_fun

    def parts(self):
        """What the workers are sent, the user's function first."""
        return [('decor_fun', self.view.decor_fun), ('dataset', self.view.items)]

    @staticmethod
    def describe(index):
        return 'the example at dataset index {}'.format(index)

    def make(self, indices, epochs):
        """Returns the examples at ``indices``; ``epochs`` matter only with a seed."""
        items = self._items
        decor_fun = self._decor_fun
        batch = []
        append = batch.append
        try:
            if self.seed is not None:
                get = self.view._get
                for index, epoch in zip(indices, epochs):
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
            epoch = '' if epochs is None else ', epoch {}'.format(epochs[len(batch)])
            _add_note(exc, 'raised by {} (dataset index {}{})'.format(what, index, epoch))
            raise
        return batch
