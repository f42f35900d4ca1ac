"""Train an AbstractChainerNetwork on several processes with ChainerMN.

Every process (rank) builds the same network, receives its share of the data from
``chainermn.scatter_dataset`` and runs the network's own closure; the multi-node optimizer
averages the gradients over the ranks, so all ranks keep equal parameters. On one machine::

    mpiexec -n 2 python examples/chainermn/train.py --epochs 3

(as root or with more ranks than cores, add ``--allow-run-as-root --oversubscribe``). On
several machines, give mpiexec a host file; use ``--communicator pure_nccl`` with GPUs.
The data are two synthetic Gaussian blobs, so the example needs no download.
"""
import argparse

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer.dataset import concat_examples

from researchutils.chainer.iterators import DecorableSerialIterator
from researchutils.chainer.models import AbstractChainerNetwork
from researchutils.chainer.models.multi_node import (
    create_communicator,
    mean_across_ranks,
    setup_multi_node_optimizer,
)


class Classifier(AbstractChainerNetwork):
    """A two-layer perceptron returning ``{"pred": logits}``."""

    def __init__(self, n_hidden=16, n_out=2):
        super().__init__(n_hidden=n_hidden, n_out=n_out)
        with self.init_scope():
            self.hidden = L.Linear(None, n_hidden)
            self.out = L.Linear(n_hidden, n_out)

    def forward(self, x):
        return {'pred': self.out(F.relu(self.hidden(x)))}


def make_dataset(samples, seed=0):
    """Two Gaussian blobs in 2-D, labelled 0 and 1, as (x, label) pairs."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 2, size=samples).astype(np.int32)
    x = rng.randn(samples, 2).astype(np.float32) + 2.0 * labels[:, None] - 1.0
    return chainer.datasets.TupleDataset(x, labels)


def as_batch(examples, device='@numpy'):
    """A list of (x, label) pairs as the dict the closure expects."""
    x, labels = concat_examples(examples)
    return AbstractChainerNetwork.prepare_batch({'data': x, 'label': labels}, device, device)


def evaluate(network, dataset, batch_size, communicator):
    """Mean loss and accuracy over this rank's share, averaged over all ranks."""
    totals = {'loss': 0.0, 'accuracy': 0.0}
    iterator = DecorableSerialIterator(dataset, batch_size, repeat=False, shuffle=False)
    batches = 0
    for examples in iterator:
        metric_vals, loss_vals, _ = Classifier.closure(
            network, as_batch(examples), None, losses={'loss': F.softmax_cross_entropy},
            metrics={'accuracy': F.accuracy})
        totals['loss'] += loss_vals['loss']
        totals['accuracy'] += metric_vals['accuracy']
        batches += 1
    return mean_across_ranks({key: value / batches for key, value in totals.items()},
                             communicator)


def main(argv=None):
    """Train and return the last evaluation (the same dict on every rank)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=16, help='per rank')
    parser.add_argument('--samples', type=int, default=1024)
    parser.add_argument('--communicator', default='naive')
    parser.add_argument('--seed', type=int, default=0, help='of the initial weights')
    args = parser.parse_args(argv)

    import chainermn  # after create_communicator, which explains a missing install

    communicator = create_communicator(args.communicator)
    # The root's dataset is split; force_equal_length (the default) gives every rank the same
    # number of examples, hence the same number of steps.
    train = chainermn.scatter_dataset(
        make_dataset(args.samples, seed=0) if communicator.rank == 0 else None,
        communicator, shuffle=True, seed=0)
    test = chainermn.scatter_dataset(
        make_dataset(args.samples // 4, seed=1) if communicator.rank == 0 else None,
        communicator)

    np.random.seed(args.seed)  # Chainer's initializers draw from NumPy's global generator
    network = Classifier()
    network(np.zeros((1, 2), np.float32))  # initializes the lazy layer before the broadcast
    optimizer = setup_multi_node_optimizer(chainer.optimizers.Adam(alpha=0.01), network,
                                           communicator)
    iterator = DecorableSerialIterator(train, args.batch_size, shuffle=True,
                                       seed=communicator.rank)
    report = {}
    while iterator.epoch < args.epochs:
        Classifier.closure(network, as_batch(iterator.next()), {'default': optimizer},
                           losses={'loss': F.softmax_cross_entropy})
        if iterator.is_new_epoch:
            report = evaluate(network, test, args.batch_size, communicator)
            if communicator.rank == 0:
                print('epoch {}: test loss {:.4f}, accuracy {:.3f}'.format(
                    iterator.epoch, report['loss'], report['accuracy']), flush=True)
    return report


if __name__ == '__main__':
    main()
