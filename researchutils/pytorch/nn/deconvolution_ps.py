"""The torch twin of ``researchutils.chainer.links.DeconvolutionPS``: up-sampling by a stride-1
convolution followed by a pixel shuffle, with a transposed convolution's output shape.

Chainer name -> torch name (a Chainer link's arrays copy into these unchanged):

============  ===============  ====================================================
Chainer       torch            shape
============  ===============  ====================================================
``conv/W``    ``conv.weight``  ``(out_channels * sy * sx, in_channels, kh', kw')``,
                               ``kh' = ceil(kh / sy)``, ``kw' = ceil(kw / sx)``
``conv/b``    ``conv.bias``    ``(out_channels * sy * sx,)`` (absent with ``nobias``)
============  ===============  ====================================================

``conv`` is a ``torch.nn.Conv2d`` without padding (a ``torch.nn.LazyConv2d`` until the first
call when ``in_channels`` is None); the padding, which depends on the input's size, is added
before it. The shuffle is Chainer's ``depth2space`` layout: channel
``(dy * sx + dx) * out_channels + c`` goes to channel ``c``, pixel ``(sy * i + dy, sx * j + dx)``,
which is not ``torch.nn.PixelShuffle``'s (``c * sy * sx + dy * sx + dx``).
Tests: ``tests/pytorch/nn/test_deconvolution_ps.py``.
"""
from __future__ import annotations

import torch

from researchutils._checks import check_bool
from researchutils._layer_checks import (
    ceil_div,
    check_conv_sizes,
    check_outsize,
    subpixel_geometry,
)
from researchutils.pytorch._tensor_checks import check_float_tensor, check_same_dtype
from researchutils.pytorch.nn._arguments import (
    Initializer,
    check_image_batch,
    check_initializer,
    initialize,
    lecun_normal_,
)


class DeconvolutionPS(torch.nn.Module):
    """Two-dimensional up-sampling by sub-pixel convolution, as its Chainer twin.

    Shi et al. (2016): a stride-1 convolution with kernel ``ceil(ksize / stride)`` computes
    ``out_channels * sy * sx`` channels at the input's resolution, and the pixel shuffle
    spreads them over an output ``stride`` times larger, cropped to the shape
    ``chainer.links.Deconvolution2D`` gives for the same arguments:
    ``(B, out_channels, sy * (H - 1) + kh - 2 * ph, sx * (W - 1) + kw - 2 * pw)``, or
    ``outsize``. The weight is initialized as Chainer's (LeCunNormal, bias zero) unless
    ``initialW`` / ``initial_bias`` say otherwise. Given the twin's weights, every output
    and gradient equals the twin's.

    Args:
        in_channels (int or None): Input channels; None defers it to the first call.
        out_channels (int): Output channels.
        ksize (int or pair of ints): Kernel size of the equivalent deconvolution.
        stride (int or pair of ints): Up-sampling factor ``(sy, sx)``.
        pad (int or pair of ints): Padding of the equivalent deconvolution.
        nobias (bool): True for no bias.
        outsize (pair of ints or None): Output height and width, within ``stride - 1``
            of the size computed from ``pad``.
        initialW: Initializer of ``conv.weight``: None, a number or a callable that fills a
            tensor in place.
        initial_bias: Initializer of ``conv.bias``.

    Raises:
        TypeError: a size that is not an int (or a pair of ints), a ``nobias`` that is not
            a bool, an initializer that is not one.
        ValueError: a size out of range: ``ksize``, ``stride``, ``out_channels`` below 1,
            ``pad`` below 0, ``outsize`` not two positive ints.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import DeconvolutionPS
        >>> up = DeconvolutionPS(16, 8, ksize=4, stride=2, pad=1)
        >>> up(torch.zeros(1, 16, 10, 12)).shape
        torch.Size([1, 8, 20, 24])
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
        self.initialW, self.initial_bias = initialW, initial_bias
        (kh, kw), (sy, sx) = self.ksize, self.stride
        channels = self.out_channels * sy * sx
        kernel = (ceil_div(kh, sy), ceil_div(kw, sx))
        self.conv: torch.nn.Module = (
            torch.nn.LazyConv2d(channels, kernel, bias=not nobias) if in_channels is None
            else torch.nn.Conv2d(in_channels, channels, kernel, bias=not nobias))
        if in_channels is not None:
            self._initialize()

    def _initialize(self) -> None:
        initialize(self.conv.weight, self.initialW, lecun_normal_)
        if self.conv.bias is not None:
            initialize(self.conv.bias, self.initial_bias, torch.nn.init.zeros_)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Up-samples ``x``.

        Args:
            x (torch.Tensor): Input ``(B, in_channels, H, W)``, the parameters' dtype.

        Returns:
            torch.Tensor: Output ``(B, out_channels, H_out, W_out)``, the shape
            ``chainer.links.Deconvolution2D`` gives.

        Raises:
            TypeError: ``x`` is not a floating point tensor of the parameters' dtype.
            ValueError: ``x`` is not 4-dimensional, or the output size does not fit it.
        """
        check_float_tensor(x, 'x')
        check_image_batch(x)
        check_same_dtype(x, 'x', self.conv.weight, 'the parameters')
        if torch.nn.parameter.is_lazy(self.conv.weight):
            self.conv.weight.materialize((self.conv.out_channels, x.shape[1])
                                         + tuple(self.conv.kernel_size))
            if self.conv.bias is not None:
                self.conv.bias.materialize((self.conv.out_channels,))
            self._initialize()
        out_sizes, conv_pad, crop = subpixel_geometry(
            x.shape[2:], self.ksize, self.stride, self.pad, self.outsize,
            self.conv.kernel_size)
        if any(conv_pad):
            x = torch.nn.functional.pad(x, (conv_pad[1], conv_pad[1], conv_pad[0], conv_pad[0]))
        h = self._shuffle(self.conv(x))
        if tuple(h.shape[2:]) != tuple(out_sizes) or any(crop):
            h = h[:, :, crop[0]:crop[0] + out_sizes[0], crop[1]:crop[1] + out_sizes[1]]
        return h

    def _shuffle(self, h: torch.Tensor) -> torch.Tensor:
        (sy, sx), channels = self.stride, self.out_channels
        if sy == sx == 1:
            return h
        batch, _, height, width = h.shape
        h = h.reshape(batch, sy, sx, channels, height, width).permute(0, 3, 4, 1, 5, 2)
        return h.reshape(batch, channels, height * sy, width * sx)
