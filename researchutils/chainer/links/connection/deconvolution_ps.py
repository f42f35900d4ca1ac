"""Up-sampling by sub-pixel convolution, a drop-in for ``chainer.links.Deconvolution2D``.

Tests: ``tests/chainer/links/connection/test_deconvolution_ps.py``.
"""
from __future__ import annotations

import chainer
import chainer.functions as F
import chainer.links as L
import numpy

from researchutils._checks import check_bool
from researchutils._layer_checks import (
    ceil_div,
    check_conv_sizes,
    check_outsize,
    subpixel_geometry,
)
from researchutils._typing import Initializer, Variable, VariableOrArray
from researchutils.chainer.links._arguments import (
    check_image_batch,
    check_initializer,
)


def _stride1_convolution(x: VariableOrArray, W: Variable, b: Variable | None,
                         pad: tuple[int, ...], by_col2im: bool) -> Variable:
    """``F.convolution_2d(x, W, b, pad=pad)``, computed one of two ways.

    ``by_col2im=False`` is that call: Chainer's CPU code gathers the input into a buffer of
    ``in_channels * kh * kw`` rows (im2col), one per weight column. ``by_col2im=True``
    computes the same correlation as a stride-1 transposed convolution with the kernel
    flipped and its two channel axes swapped: it first multiplies ``x`` by the weight
    (``out_channels * kh * kw`` rows) and then adds the products, each shifted by its
    kernel offset (col2im). The two give the same values up to float rounding, and the
    gradients reach ``W`` and ``b`` through plain functions either way (double backward,
    CuPy); the second is cheaper when ``out_channels < in_channels``.
    """
    if not by_col2im:
        return F.convolution_2d(x, W, b, pad=pad)
    kernel = W.shape[2:]
    # A deconvolution with pad q gives H - 1 + k - 2q rows; q = k - 1 - p gives the
    # convolution's H + 2p - k + 1. A larger p (q < 0) becomes zero rows around x.
    extra = [max(0, p - (k - 1)) for p, k in zip(pad, kernel)]
    if any(extra):
        x = F.pad(x, ((0, 0), (0, 0), (extra[0],) * 2, (extra[1],) * 2), 'constant')
    flipped = F.transpose(F.flip(F.flip(W, 2), 3), (1, 0, 2, 3))
    return F.deconvolution_2d(
        x, flipped, b, pad=tuple(max(0, k - 1 - p) for p, k in zip(pad, kernel)))


class DeconvolutionPS(chainer.Chain):
    """Two-dimensional up-sampling by a convolution followed by a pixel shuffle.

    Sub-pixel convolution (Shi et al. 2016, "Real-Time Single Image and Video
    Super-Resolution Using an Efficient Sub-Pixel Convolutional Neural Network"): a
    stride-1 convolution with kernel ``ceil(ksize / stride)`` computes
    ``out_channels * sy * sx`` channels at the input's resolution, and the pixel shuffle
    moves channel ``(dy * sx + dx) * out_channels + c`` to channel ``c``, pixel
    ``(sy * i + dy, sx * j + dx)`` (the layout of :func:`chainer.functions.depth2space`).
    A transposed convolution with the same arguments computes the same family of
    functions.

    On the CPU the stride-1 convolution is computed in whichever of two equivalent ways
    needs the smaller buffer: Chainer's convolution (im2col, ``in_channels * kh' * kw'``
    rows) when ``out_channels * sy * sx >= in_channels`` (the usual decoder layer), and
    otherwise as a transposed convolution with the same weight flipped (col2im,
    ``out_channels * sy * sx * kh' * kw'`` rows; an output layer with few channels). Both
    use the same parameters and give the same values up to float rounding. On the GPU it
    is always Chainer's (cuDNN) convolution. Timings: ``benchmarks/bench_deconvolution_ps.py``.

    For the same arguments and input, the output has the shape that
    :class:`chainer.links.Deconvolution2D` gives:
    ``(B, out_channels, sy * (H - 1) + kh - 2 * ph, sx * (W - 1) + kw - 2 * pw)``,
    or ``outsize`` when given. The input is zero-padded (or cropped) symmetrically, one
    extra row or column going to the end, and the shuffled result is cropped to that size.
    Each call works out the sizes for its own input.

    Args:
        in_channels (int or None): Number of input channels; ``None`` defers it to the
            first call.
        out_channels (int): Number of output channels.
        ksize (int or pair of ints): Kernel size of the equivalent deconvolution.
        stride (int or pair of ints): Up-sampling factor ``(sy, sx)``.
        pad (int or pair of ints): Padding of the equivalent deconvolution; it shrinks the
            output by ``2 * pad``.
        nobias (bool): ``True`` for no bias.
        outsize (pair of ints or None): Output height and width; as for
            ``Deconvolution2D``, within ``stride - 1`` of the size computed from ``pad``.
        initialW: Initializer of the convolution's weight, shape
            ``(out_channels * sy * sx, in_channels, ceil(kh / sy), ceil(kw / sx))``.
        initial_bias: Initializer of the bias, shape ``(out_channels * sy * sx,)``.

    Attributes:
        conv (~chainer.links.Convolution2D): The convolution before the shuffle.

    Raises:
        TypeError: a size that is not an int (or a pair of ints), a ``nobias`` that is
            not a bool (the string ``'False'`` included), an initializer that is not one.
        ValueError: a size out of range: ``ksize``, ``stride``, ``out_channels`` below 1,
            ``pad`` below 0, ``outsize`` not two positive ints.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.links import DeconvolutionPS
        >>> up = DeconvolutionPS(16, 8, ksize=4, stride=2, pad=1)
        >>> up(np.zeros((1, 16, 10, 12), np.float32)).shape
        (1, 8, 20, 24)
    """

    def __init__(self, in_channels: int | None, out_channels: int,
                 ksize: int | tuple[int, int], stride: int | tuple[int, int] = 1,
                 pad: int | tuple[int, int] = 0, nobias: bool = False,
                 outsize: tuple[int, int] | None = None, initialW: Initializer | None = None,
                 initial_bias: Initializer | None = None) -> None:
        super().__init__()
        in_channels, self.out_channels, self.ksize, self.stride, self.pad = check_conv_sizes(
            in_channels, out_channels, ksize, stride, pad)
        nobias = check_bool(nobias, 'nobias')
        check_initializer(initialW, 'initialW')
        check_initializer(initial_bias, 'initial_bias')
        self.outsize = check_outsize(outsize)
        (kh, kw), (sy, sx) = self.ksize, self.stride
        with self.init_scope():
            self.conv = L.Convolution2D(
                in_channels, self.out_channels * sy * sx,
                (ceil_div(kh, sy), ceil_div(kw, sx)), nobias=nobias,
                initialW=initialW, initial_bias=initial_bias)

    def forward(self, x: VariableOrArray) -> Variable:
        """Up-samples ``x``.

        Args:
            x (:class:`~chainer.Variable` or ndarray): Input of shape
                ``(B, in_channels, H, W)``.

        Returns:
            ~chainer.Variable: Output of shape ``(B, out_channels, H_out, W_out)``, the
            shape :class:`chainer.links.Deconvolution2D` gives.
        """
        check_image_batch(x)
        if self.conv.W.array is None:
            with chainer.using_device(self.device):
                self.conv._initialize_params(x.shape[1])
        out_sizes, conv_pad, crop = subpixel_geometry(
            x.shape[2:], self.ksize, self.stride, self.pad, self.outsize, self.conv.W.shape[2:])
        W, b = self.conv.W, self.conv.b
        by_col2im = self.xp is numpy and W.shape[0] < W.shape[1]
        h = _stride1_convolution(x, W, b, tuple(conv_pad), by_col2im)
        h = self._shuffle(h)
        if h.shape[2:] != tuple(out_sizes) or any(crop):
            h = h[:, :, crop[0]:crop[0] + out_sizes[0], crop[1]:crop[1] + out_sizes[1]]
        return h

    def _shuffle(self, h: Variable) -> Variable:
        (sy, sx), c = self.stride, self.out_channels
        if sy == sx == 1:
            return h
        if sy == sx:
            return F.depth2space(h, sy)
        batch, _, height, width = h.shape
        h = F.reshape(h, (batch, sy, sx, c, height, width))
        h = F.transpose(h, (0, 3, 4, 1, 5, 2))
        return F.reshape(h, (batch, c, height * sy, width * sx))
