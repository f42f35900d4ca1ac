"""Argument checks of the layers that both frameworks build: clip bounds, sizes, size pairs.

The Chainer links (``researchutils.chainer.links``) and their torch twins
(``researchutils.pytorch.nn``) take the same arguments and must refuse the same values with the
same words, so the rules live here once, in the standard library only (the torch side never
imports Chainer). Single numbers go through :mod:`researchutils._checks`.

Tests: ``tests/chainer/test_clip_bounds.py`` and ``tests/chainer/links/test_arguments.py``
(through the Chainer side's re-exports), ``tests/pytorch/nn/`` (the torch side's refusals).
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence

from researchutils._checks import check_float, check_int


def check_clip_bounds(clip_min: float | None,
                      clip_max: float | None) -> tuple[float | None, float | None]:
    """Returns ``(clip_min, clip_max)`` as floats (or None); an infinite bound is no bound.

    Raises:
        TypeError: A bound is a bool or not a real number.
        ValueError: A bound is NaN, or ``clip_min > clip_max``.

    Example:
        >>> check_clip_bounds(-1, None)
        (-1.0, None)
    """
    clip_min = check_float(clip_min, 'clip_min', finite=False, allow_none=True)
    clip_max = check_float(clip_max, 'clip_max', finite=False, allow_none=True)
    if clip_min is not None and clip_max is not None and clip_min > clip_max:
        raise ValueError('clip_min must not exceed clip_max, got clip_min={} and '
                         'clip_max={}'.format(clip_min, clip_max))
    return clip_min, clip_max


def check_pair(name: str, value: int | Sequence[int], minimum: int) -> tuple[int, int]:
    """Returns ``value`` (an int, or a pair of ints) as a tuple of two ints ``>= minimum``.

    Example:
        >>> check_pair('ksize', 3, 1)
        (3, 3)
    """
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError('{} must be an int or a pair of ints, got {!r}'.format(
                name, value))
        first, second = value
        return check_int(first, name, minimum=minimum), check_int(second, name, minimum=minimum)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('{} must be an int or a pair of ints, not {!r}'.format(name, value))
    size = check_int(value, name, minimum=minimum)
    return size, size


def check_sizes(in_size: object, out_size: object) -> tuple[int | None, int | None]:
    """Checks the sizes of an LSTM layer: ``(in_size, out_size)`` or ``(out_size,)`` alone.

    As in :class:`chainer.links.LSTM`, with ``out_size`` None the one size given is the
    output size and the input size is inferred at the first step. A size of 0 is refused
    (Chainer's own ``L.LSTM(0, 4)`` fails with a ZeroDivisionError).

    Example:
        >>> check_sizes(8, None)
        (8, None)
    """
    if out_size is None:
        check_int(in_size, 'in_size', minimum=1)
    else:
        check_int(in_size, 'in_size', minimum=1, allow_none=True)
        check_int(out_size, 'out_size', minimum=1)
    return in_size, out_size  # type: ignore[return-value]


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` in integers.

    Example:
        >>> ceil_div(7, 2)
        4
    """
    return -(-a // b)


def check_outsize(outsize: object) -> tuple[int, int] | None:
    """``outsize`` of a deconvolution: None, or a pair of ints >= 1.

    Example:
        >>> check_outsize([4, 6])
        (4, 6)
    """
    if outsize is None:
        return None
    if not isinstance(outsize, (tuple, list)):
        raise TypeError('outsize must be a pair of ints or None, not {!r}'.format(outsize))
    return check_pair('outsize', outsize, 1)


def _conv_outsize(size: int, k: int, s: int, p: int, cover_all: bool) -> int:
    # Chainer's chainer.utils.conv.get_conv_outsize, without importing Chainer.
    return (size + 2 * p - k + (s - 1 if cover_all else 0)) // s + 1


def subpixel_geometry(input_size: Sequence[int], ksize: tuple[int, int],
                      stride: tuple[int, int], pad: tuple[int, int],
                      outsize: tuple[int, int] | None, kernel: Sequence[int]
                      ) -> tuple[list[int], list[int], list[int]]:
    """Sizes of a sub-pixel up-sampling that gives a deconvolution's output shape.

    For an input of height and width ``input_size`` and a stride-1 convolution with a
    kernel of ``kernel`` (``ceil(ksize / stride)``), returns ``(out_sizes, conv_pad, crop)``:
    the output's height and width (``Deconvolution2D``'s, or ``outsize``), the padding of
    the convolution on each side, and the first row and column of the shuffled result to
    keep.

    Raises:
        ValueError: ``pad`` leaves no output, or ``outsize`` does not fit the input.

    Example:
        >>> subpixel_geometry((10, 12), (4, 4), (2, 2), (1, 1), None, (2, 2))
        ([20, 24], [1, 1], [2, 2])
    """
    out_sizes = []
    for axis, name in ((0, 'height'), (1, 'width')):
        size = input_size[axis]
        k, s, p = ksize[axis], stride[axis], pad[axis]
        smallest = s * (size - 1) + k - 2 * p
        if outsize is None:
            if smallest < 1:
                raise ValueError(
                    'pad={} leaves no output for an input {} of {} (ksize={}, '
                    'stride={})'.format(pad, name, size, ksize, stride))
            out_sizes.append(smallest)
            continue
        wanted = outsize[axis]
        # Deconvolution2D's rule: a convolution of the output (with or without cover_all)
        # gives back the input's size.
        if not (_conv_outsize(wanted, k, s, p, False) <= size
                <= _conv_outsize(wanted, k, s, p, True)):
            raise ValueError(
                'outsize={} does not fit an input {} of {}: a deconvolution with '
                'ksize={}, stride={}, pad={} gives an output {} from {} to {}'.format(
                    outsize, name, size, ksize, stride, pad, name,
                    max(smallest - s + 1, 1), smallest + s - 1))
        out_sizes.append(wanted)
    conv_pad, crop = [], []
    for axis, out in enumerate(out_sizes):
        s = stride[axis]
        # Padding that gives exactly ceil(out / s) rows; split floor before, rest after.
        total = ceil_div(out, s) + kernel[axis] - 1 - input_size[axis]
        # The convolution pads both sides alike; the extra rows are cropped afterwards.
        conv_pad.append(max(0, ceil_div(total, 2)))
        crop.append((conv_pad[-1] - total // 2) * s)
    return out_sizes, conv_pad, crop


def check_conv_sizes(in_channels: object, out_channels: object, ksize: object, stride: object,
                     pad: object = 0, *, same_size: bool = False
                     ) -> tuple[int | None, int, tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Checks a convolution layer's sizes, as ConvLSTM and DeconvolutionPS and their torch
    twins take them: ``(in_channels, out_channels, ksize, stride, pad)``.

    ``in_channels`` may be None (known at the first call); ``ksize`` and ``stride`` are an int
    or a pair of ints >= 1, ``pad`` one >= 0. With ``same_size`` (ConvLSTM's state keeps its
    size) the kernel must be odd in both directions and the padding is half of it, in place
    of ``pad``.

    Example:
        >>> check_conv_sizes(None, 8, 3, 1, same_size=True)
        (None, 8, (3, 3), (1, 1), (1, 1))
    """
    in_channels = check_int(in_channels, 'in_channels', minimum=1, allow_none=True)
    out_size = check_int(out_channels, 'out_channels', minimum=1)
    kernel = check_pair('ksize', ksize, 1)  # type: ignore[arg-type]
    if same_size and (kernel[0] % 2 == 0 or kernel[1] % 2 == 0):
        raise ValueError('ksize must be odd (the state keeps its size), got {!r}'.format(ksize))
    strides = check_pair('stride', stride, 1)  # type: ignore[arg-type]
    padding = ((kernel[0] // 2, kernel[1] // 2) if same_size
               else check_pair('pad', pad, 0))  # type: ignore[arg-type]
    return in_channels, out_size, kernel, strides, padding
