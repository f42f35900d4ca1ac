"""DeconvolutionPS against chainer.links.Deconvolution2D with the same arguments.

Both links map the same input to an output of the same shape (ksize 4, stride 2, pad 1:
twice the height and width); forward + backward, gradients for the input and parameters.

Target: DeconvolutionPS faster than Deconvolution2D (ratio < 1.0x).
"""
import os
import sys

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import bench_devices, compare, report, synchronizer  # noqa: E402

from researchutils.chainer.links import DeconvolutionPS  # noqa: E402


def _bench(device, batch, in_channels, out_channels, size, ksize=4, stride=2, pad=1):
    sync = synchronizer(device)
    rng = np.random.RandomState(0)
    x = device.send(rng.uniform(-1, 1, (batch, in_channels, size, size)).astype(np.float32))
    ours = DeconvolutionPS(in_channels, out_channels, ksize, stride, pad)
    theirs = L.Deconvolution2D(in_channels, out_channels, ksize, stride, pad)
    for link in (ours, theirs):
        link.to_device(device)
    shape = ours(x).shape
    assert shape == theirs(x).shape, (shape, theirs(x).shape)
    gy = device.send(rng.uniform(-1, 1, shape).astype(np.float32))

    def run(link):
        def step():
            link.cleargrads()
            xv = chainer.Variable(x)
            y = link(xv)
            F.sum(y * gy).backward()
            sync()
        return step

    medians = compare({'DeconvolutionPS': run(ours), 'L.Deconvolution2D': run(theirs)},
                      repeat=11, number=5)
    report('forward+backward, {} batch={} {}->{} channels {}x{} -> {}x{} ksize={} stride={} '
           'pad={} float32'.format('CPU' if device.xp is np else 'GPU', batch, in_channels,
                                   out_channels, size, size, shape[2], shape[3], ksize,
                                   stride, pad),
           medians, 'L.Deconvolution2D')


def main():
    for device in bench_devices():
        _bench(device, 16, 64, 32, 16)
        _bench(device, 8, 32, 16, 32)
        _bench(device, 8, 64, 3, 32, ksize=8, stride=2, pad=3)


if __name__ == '__main__':
    main()
