"""A real, tiny Chainer training run (a few milliseconds per iteration) for tests."""
import chainer
import chainer.links as L
import numpy
from chainer import training
from chainer.datasets import TupleDataset
from chainer.iterators import SerialIterator


class Crash(Exception):
    """The error a :func:`crash_at` extension raises inside the training loop."""


def make_model(seed=0):
    """A two-class classifier over 3 features, with parameters drawn from ``seed``."""
    numpy.random.seed(seed)
    return L.Classifier(L.Linear(3, 2))


def make_trainer(out, stop_iteration=6, batch_size=4, model=None):
    """A Trainer of a linear classifier on 16 fixed samples (4 iterations per epoch)."""
    rng = numpy.random.RandomState(1)
    x = rng.standard_normal((16, 3)).astype(numpy.float32)
    t = (x.sum(axis=1) > 0).astype(numpy.int32)
    iterator = SerialIterator(TupleDataset(x, t), batch_size, shuffle=False)
    model = make_model() if model is None else model
    optimizer = chainer.optimizers.SGD(lr=0.1)
    optimizer.setup(model)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    return training.Trainer(updater, (stop_iteration, 'iteration'), out=str(out))


def crash_at(iteration, error=None):
    """An extension that raises ``error`` (a :class:`Crash`) at ``iteration``."""

    @training.make_extension(trigger=(1, 'iteration'))
    def crash(trainer):
        if trainer.updater.iteration == iteration:
            raise error if error is not None else Crash('crash at iteration %d' % iteration)

    return crash
