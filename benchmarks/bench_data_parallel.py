"""Cost of DataParallelChainerNetwork + DataParallelChainerOptimizer against the plain module.

One training step (the closure: forward, loss, backward, update) on the same full batch,
plain module versus the wrappers with k replicas on one device. Replicas on one device run one
after another, so the wrappers cannot be faster there; what is measured is their overhead:
scattering the batch, gathering the outputs, summing the replicas' gradients and copying the
parameters back. Runs alternate between the variants; each figure is the best of
several rounds of several steps (the best, not the median, because the machine may be
shared). The two hooks are also timed alone, and so is ``synchronize_replicas``, which every
forward runs before the replicas (so that they never compute with weights the master no longer
has). A GPU row (k replicas on '@cupy:0') is added when CuPy sees a GPU.

Usage: ``python benchmarks/bench_data_parallel.py [--rounds 9] [--steps 20]``
"""
import argparse
import os
import sys
import time

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import bench_devices  # noqa: E402

from researchutils.chainer.models import (
    AbstractChainerNetwork,
    DataParallelChainerNetwork,
    DataParallelChainerOptimizer,
    ParallelOptimizerCumulateGradientsHook,
    ParallelOptimizerUpdateModelParameters,
)


class MLP(AbstractChainerNetwork):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__(n_in=n_in, n_hidden=n_hidden, n_out=n_out)
        with self.init_scope():
            self.l1 = L.Linear(n_in, n_hidden)
            self.l2 = L.Linear(n_hidden, n_hidden)
            self.l3 = L.Linear(n_hidden, n_out)

    def forward(self, x):
        return {'pred': self.l3(F.relu(self.l2(F.relu(self.l1(x)))))}


def _setup(sizes, devices):
    module = MLP(*sizes)
    if devices is None:
        optimizer = chainer.optimizers.MomentumSGD(lr=0.01).setup(module)
        return module, optimizer
    model = DataParallelChainerNetwork(module, devices)
    return model, DataParallelChainerOptimizer(chainer.optimizers.MomentumSGD(lr=0.01)).setup(
        model)


def _steps(model, optimizer, batch, steps):
    start = time.perf_counter()
    for _ in range(steps):
        AbstractChainerNetwork.closure(model, batch, {'default': optimizer},
                                       losses={'ce': F.softmax_cross_entropy})
    if chainer.backend.get_array_module(batch['data']) is not np:
        chainer.backends.cuda.cupy.cuda.Device().synchronize()
    return (time.perf_counter() - start) / steps


def _hook_time(optimizer, steps):
    hooks = (ParallelOptimizerCumulateGradientsHook(), ParallelOptimizerUpdateModelParameters())
    start = time.perf_counter()
    for _ in range(steps):
        for hook in hooks:
            hook(optimizer)
    return (time.perf_counter() - start) / steps


def _synchronize_time(model, steps):
    start = time.perf_counter()
    for _ in range(steps):
        model.synchronize_replicas()
    return (time.perf_counter() - start) / steps


def compare(name, sizes, batch_size, device, replica_counts, rounds, steps):
    rng = np.random.RandomState(0)
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': rng.randn(batch_size, sizes[0]),
         'label': rng.randint(0, sizes[2], size=batch_size).astype(np.int32)}, device, device)
    variants = [('plain', None)] + [('k={}'.format(k), [device] * k) for k in replica_counts]
    built = []
    for label, devices in variants:
        model, optimizer = _setup(sizes, devices)
        if devices is None:
            model.to_device(device)
        _steps(model, optimizer, batch, 2)  # warm-up: allocations, lazy state
        built.append((label, model, optimizer))
    times = {label: [] for label, _, _ in built}
    for _ in range(rounds):
        for label, model, optimizer in built:
            times[label].append(_steps(model, optimizer, batch, steps))
    plain = min(times['plain'])
    print('{} ({}, batch {}, device {}): plain {:.3f} ms/step'.format(
        name, 'x'.join(str(s) for s in sizes), batch_size, device, plain * 1e3))
    for label, model, optimizer in built[1:]:
        best = min(times[label])
        hooks = min(_hook_time(optimizer, steps) for _ in range(rounds))
        synchronize = min(_synchronize_time(model, steps) for _ in range(rounds))
        print('  {:5s} {:8.3f} ms/step  ratio to plain {:5.2f}  overhead {:+.3f} ms/step'
              '  (hooks alone {:.3f} ms, synchronize_replicas {:.3f} ms)'.format(
                  label, best * 1e3, best / plain, (best - plain) * 1e3, hooks * 1e3,
                  synchronize * 1e3))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=9)
    parser.add_argument('--steps', type=int, default=20)
    args = parser.parse_args()
    print('chainer {}, numpy {}'.format(chainer.__version__, np.__version__))
    for device in bench_devices():
        if device.xp is np:
            for name, sizes, batch_size in [('tiny MLP', (32, 64, 10), 64),
                                            ('medium MLP', (256, 512, 10), 256)]:
                compare(name, sizes, batch_size, '@numpy', (1, 2, 3), args.rounds, args.steps)
        else:
            compare('medium MLP', (256, 512, 10), 256, '@cupy:0', (1, 2), args.rounds,
                    args.steps)


if __name__ == '__main__':
    main()
