"""ConvLSTM step (forward + backward) against the same cell written plainly.

The plain cell is what one writes with Chainer's own pieces: one ``L.Convolution2D`` for the
input and one for the state (each already computing all four gates), the peephole terms
added with ``F`` functions, ``F.lstm`` for the cell and the output gate applied after it
(``F.lstm`` cannot look at the new cell). Both cells have the same parameters.

Targets (CPU): ConvLSTM <= 1.0x the plain cell; with clipping active <= 1.05x of the
unclipped plain cell.
"""
import os
import sys

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import bench_devices, compare, report, synchronizer  # noqa: E402

from researchutils.chainer.links import ConvLSTM  # noqa: E402


class PlainConvLSTM(chainer.Chain):
    """The peephole ConvLSTM of Shi et al. (2015) from L.Convolution2D and F.lstm."""

    def __init__(self, in_channels, out_channels, ksize, spatial):
        super().__init__()
        pad = ksize // 2
        with self.init_scope():
            self.upward = L.Convolution2D(in_channels, 4 * out_channels, ksize, pad=pad)
            self.lateral = L.Convolution2D(out_channels, 4 * out_channels, ksize, pad=pad,
                                           nobias=True)
            shape = (1, out_channels) + spatial
            self.Wci = chainer.Parameter(np.random.uniform(-1, 1, shape).astype(np.float32))
            self.Wcf = chainer.Parameter(np.random.uniform(-1, 1, shape).astype(np.float32))
            self.Wco = chainer.Parameter(np.random.uniform(-1, 1, shape).astype(np.float32))
        self.out_channels = out_channels

    def forward(self, x, c, h):
        z = self.upward(x) + self.lateral(h)
        batch, _, height, width = z.shape
        za, zi, zf, zo = F.separate(
            F.reshape(z, (batch, self.out_channels, 4, height, width)), axis=2)
        zi = zi + F.broadcast_to(self.Wci, c.shape) * c
        zf = zf + F.broadcast_to(self.Wcf, c.shape) * c
        gates = F.reshape(F.stack([za, zi, zf, zo], axis=2), z.shape)
        c, _ = F.lstm(c, gates)
        h = F.sigmoid(zo + F.broadcast_to(self.Wco, c.shape) * c) * F.tanh(c)
        return c, h


def _bench(device, batch, channels, units, size, ksize=3):
    sync = synchronizer(device)
    rng = np.random.RandomState(0)
    spatial = (size, size)
    x = device.send(rng.uniform(-1, 1, (batch, channels) + spatial).astype(np.float32))
    c0 = device.send(rng.uniform(-1, 1, (batch, units) + spatial).astype(np.float32))
    h0 = device.send(rng.uniform(-1, 1, (batch, units) + spatial).astype(np.float32))
    gc = device.send(rng.uniform(-1, 1, (batch, units) + spatial).astype(np.float32))
    gh = device.send(rng.uniform(-1, 1, (batch, units) + spatial).astype(np.float32))

    plain = PlainConvLSTM(channels, units, ksize, spatial)
    ours = ConvLSTM(channels, units, ksize)
    clipped = ConvLSTM(channels, units, ksize, clip_min=-0.01, clip_max=0.01)
    for link in (ours, clipped):
        link(np.zeros((batch, channels) + spatial, np.float32))
    for link in (plain, ours, clipped):
        link.to_device(device)

    def run_plain():
        plain.cleargrads()
        c, h = plain(x, chainer.Variable(c0), chainer.Variable(h0))
        c.grad, h.grad = gc, gh
        chainer.backward([c, h], [c.grad_var, h.grad_var])
        sync()

    def run(link):
        def step():
            link.cleargrads()
            link.set_state(chainer.Variable(c0), chainer.Variable(h0))
            h = link(x)
            link.c.grad, h.grad = gc, gh
            chainer.backward([link.c, h], [link.c.grad_var, h.grad_var])
            sync()
        return step

    medians = compare({'ConvLSTM': run(ours),
                       'ConvLSTM (clip active)': run(clipped),
                       'plain L.Convolution2D + F.lstm': run_plain}, repeat=11, number=5)
    report('ConvLSTM step forward+backward, {} batch={} {}->{} channels {}x{} ksize={} '
           'float32'.format('CPU' if device.xp is np else 'GPU', batch, channels, units,
                            size, size, ksize),
           medians, 'plain L.Convolution2D + F.lstm')


def main():
    for device in bench_devices():
        _bench(device, 8, 16, 32, 32)
        _bench(device, 16, 32, 64, 16)


if __name__ == '__main__':
    main()
