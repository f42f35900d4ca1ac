"""grad_clip_lstm forward+backward against F.lstm and against F.lstm with F.clip on the
gate gradient; the k-step loss against F.sum(F.squared_difference(...)) / (2 * k).

Target (CPU): grad_clip_lstm within 1.05x of F.lstm's time, with clipping active.
"""
import os
import sys

import chainer
import chainer.functions as F
import numpy as np
from chainer import function_node

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import bench_devices, compare, report, synchronizer  # noqa: E402

from researchutils.chainer.functions import average_k_step_squared_error, grad_clip_lstm  # noqa: E402


class _ClipGradient(function_node.FunctionNode):
    """Identity whose backward applies F.clip: the 'clip after the fact' alternative."""

    def forward(self, inputs):
        return inputs[0],

    def backward(self, indexes, grad_outputs):
        return F.clip(grad_outputs[0], -0.01, 0.01),


def _lstm_step(function, c_prev, x, gc, gh):
    c_var, x_var = chainer.Variable(c_prev), chainer.Variable(x)
    c, h = function(c_var, x_var)
    c.grad = gc
    h.grad = gh
    # Backward from both outputs, as inside an unrolled LSTM.
    chainer.backward([c, h], [c.grad_var, h.grad_var])


def bench_lstm(device):
    for batch, units in [(64, 256), (128, 512)]:
        _bench_lstm_size(device, batch, units)


def _bench_lstm_size(device, batch, units):
    xp = device.xp
    sync = synchronizer(device)
    rng = np.random.RandomState(0)
    c_prev = device.send(rng.uniform(-1, 1, (batch, units)).astype(np.float32))
    x = device.send(rng.uniform(-3, 3, (batch, 4 * units)).astype(np.float32))
    gc = device.send(rng.uniform(-1, 1, (batch, units)).astype(np.float32))
    gh = device.send(rng.uniform(-1, 1, (batch, units)).astype(np.float32))

    def ours():
        _lstm_step(lambda c, x: grad_clip_lstm(c, x, -0.01, 0.01), c_prev, x, gc, gh)
        sync()

    def chainer_lstm():
        _lstm_step(F.lstm, c_prev, x, gc, gh)
        sync()

    def chainer_lstm_then_clip():
        _lstm_step(lambda c, x: F.lstm(c, _ClipGradient().apply((x,))[0]),
                   c_prev, x, gc, gh)
        sync()

    medians = compare({'grad_clip_lstm (clip active)': ours,
                       'F.lstm (no clip)': chainer_lstm,
                       'F.lstm backward then F.clip': chainer_lstm_then_clip})
    report('forward+backward, {} batch={} units={} float32'.format(
        'CPU' if xp is np else 'GPU', batch, units), medians, 'F.lstm (no clip)')


def bench_k_step(device):
    sync = synchronizer(device)
    rng = np.random.RandomState(0)
    shape = (32, 5, 3, 32, 32)
    x1 = device.send(rng.uniform(-1, 1, shape).astype(np.float32))
    x2 = device.send(rng.uniform(-1, 1, shape).astype(np.float32))

    def run(loss_fn):
        v1, v2 = chainer.Variable(x1), chainer.Variable(x2)
        loss_fn(v1, v2).backward()
        sync()

    medians = compare({
        'average_k_step_squared_error': lambda: run(
            lambda a, b: average_k_step_squared_error(a, b, 5)),
        'F.sum(F.squared_difference) / (2k)': lambda: run(
            lambda a, b: F.sum(F.squared_difference(a, b)) / 10),
    })
    report('k-step loss forward+backward, shape {} float32'.format(shape), medians,
           'F.sum(F.squared_difference) / (2k)')


def main():
    for device in bench_devices():
        bench_lstm(device)
        bench_k_step(device)


if __name__ == '__main__':
    main()
