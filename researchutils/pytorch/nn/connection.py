"""Torch twins of the Chainer connection links that torch has no exact module for.

Each computes what its Chainer link computes, with Chainer's parameter names where torch's
module would name them otherwise, so that :func:`researchutils.pytorch.weights.from_chainer`
and :func:`~researchutils.pytorch.weights.load_chainer_weights` fill them by their kind:

- :class:`Linear`: ``L.Linear`` flattens every axis after the batch axes, ``nn.Linear``
  acts on the last axis only;
- :class:`Deconvolution2D`: ``L.Deconvolution2D``'s fixed ``outsize``;
- :class:`DepthwiseConvolution2D`: ``L.DepthwiseConvolution2D``, whose ``W`` has the shape
  ``(channel_multiplier, in_channels, kh, kw)`` (the loaders reorder it);
- :class:`EmbedID`: ``L.EmbedID``'s ``ignore_label``, which may lie outside the vocabulary
  (``nn.Embedding``'s ``padding_idx`` may not, and returns its row instead of zeros);
- :class:`Highway` and :class:`Maxout`, which torch lacks.

Tests: ``tests/pytorch/weights/test_conversion.py`` (each against its Chainer link).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from researchutils._checks import check_bool, check_callable, check_int, check_positive_int
from researchutils._layer_checks import check_outsize, check_pair


class Linear(nn.Linear):
    """``L.Linear``: ``x`` flattened after its batch axes, times ``weight.T``, plus ``bias``.

    Args:
        in_size (int): Features of the flattened input.
        out_size (int): Output features.
        nobias (bool): True for no bias.

    Shapes: ``x`` is ``(N, ...)`` with ``in_size`` elements after the batch axis (float32);
    the result is ``(N, out_size)``. ``forward(x, n_batch_axes)`` keeps ``n_batch_axes`` axes.

    Example:
        >>> import torch
        >>> Linear(6, 2)(torch.zeros(4, 2, 3)).shape
        torch.Size([4, 2])
    """

    def __init__(self, in_size: int, out_size: int, nobias: bool = False) -> None:
        super().__init__(check_positive_int(in_size, 'in_size'),
                         check_positive_int(out_size, 'out_size'),
                         bias=not check_bool(nobias, 'nobias'))

    def forward(self, x: Any, n_batch_axes: int = 1) -> Any:
        n_batch_axes = check_positive_int(n_batch_axes, 'n_batch_axes')
        return super().forward(x.flatten(start_dim=n_batch_axes))


class Deconvolution2D(nn.ConvTranspose2d):
    """``L.Deconvolution2D``: ``nn.ConvTranspose2d`` whose output size may be fixed.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        ksize (int or pair of ints): Kernel size.
        stride (int or pair of ints): Stride.
        pad (int or pair of ints): Padding taken off the output.
        nobias (bool): True for no bias.
        outsize (pair of ints or None): The ``(height, width)`` of every output, or None for
            the smallest one, ``stride * (size - 1) + dilate * (ksize - 1) + 1 - 2 * pad``.
        dilate (int or pair of ints): Dilation.
        groups (int): Groups of channels (both counts divisible by it).

    Shapes: ``(N, in_channels, H, W)`` to ``(N, out_channels, H', W')``, float32.

    Example:
        >>> import torch
        >>> Deconvolution2D(3, 2, 3, stride=2, outsize=(10, 10))(torch.zeros(1, 3, 4, 4)).shape
        torch.Size([1, 2, 10, 10])
    """

    def __init__(self, in_channels: int, out_channels: int, ksize: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, pad: int | tuple[int, int] = 0,
                 nobias: bool = False, outsize: tuple[int, int] | None = None, *,
                 dilate: int | tuple[int, int] = 1, groups: int = 1) -> None:
        in_channels = check_positive_int(in_channels, 'in_channels')
        out_channels = check_positive_int(out_channels, 'out_channels')
        groups = check_positive_int(groups, 'groups')
        if in_channels % groups or out_channels % groups:
            raise ValueError('groups must divide in_channels ({}) and out_channels ({}), got '
                             '{!r}'.format(in_channels, out_channels, groups))
        super().__init__(in_channels, out_channels, check_pair('ksize', ksize, 1),
                         stride=check_pair('stride', stride, 1),
                         padding=check_pair('pad', pad, 0),
                         dilation=check_pair('dilate', dilate, 1), groups=groups,
                         bias=not check_bool(nobias, 'nobias'))
        self.outsize = check_outsize(outsize)

    def forward(self, x: Any) -> Any:
        return super().forward(x, output_size=self.outsize)


class DepthwiseConvolution2D(nn.Conv2d):
    """``L.DepthwiseConvolution2D``: each input channel convolved with its own
    ``channel_multiplier`` filters; output channel ``c * channel_multiplier + m``.

    ``weight`` has torch's grouped layout ``(in_channels * channel_multiplier, 1, kh, kw)``;
    Chainer's ``W`` ``(channel_multiplier, in_channels, kh, kw)`` is reordered by the loaders.

    Args:
        in_channels (int): Input channels.
        channel_multiplier (int): Filters per input channel.
        ksize (int or pair of ints): Kernel size.
        stride (int or pair of ints): Stride.
        pad (int or pair of ints): Padding.
        nobias (bool): True for no bias.

    Example:
        >>> import torch
        >>> DepthwiseConvolution2D(3, 2, 3)(torch.zeros(1, 3, 5, 5)).shape
        torch.Size([1, 6, 3, 3])
    """

    def __init__(self, in_channels: int, channel_multiplier: int, ksize: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, pad: int | tuple[int, int] = 0,
                 nobias: bool = False) -> None:
        in_channels = check_positive_int(in_channels, 'in_channels')
        multiplier = check_positive_int(channel_multiplier, 'channel_multiplier')
        super().__init__(in_channels, in_channels * multiplier, check_pair('ksize', ksize, 1),
                         stride=check_pair('stride', stride, 1),
                         padding=check_pair('pad', pad, 0), groups=in_channels,
                         bias=not check_bool(nobias, 'nobias'))
        self.channel_multiplier = multiplier


class EmbedID(nn.Embedding):
    """``L.EmbedID``: rows of ``weight`` by id; ``ignore_label`` gives zeros and no gradient.

    Args:
        in_size (int): Vocabulary size.
        out_size (int): Embedding size.
        ignore_label (int or None): An id (in the vocabulary or not, e.g. -1) whose output
            is zeros.

    Shapes: ids ``(...)`` int32/int64 to ``(..., out_size)`` float32.

    Example:
        >>> import torch
        >>> embed = EmbedID(5, 2, ignore_label=-1)
        >>> embed(torch.tensor([[-1, 3]]))[0, 0].tolist()
        [0.0, 0.0]
    """

    def __init__(self, in_size: int, out_size: int, ignore_label: int | None = None) -> None:
        super().__init__(check_positive_int(in_size, 'in_size'),
                         check_positive_int(out_size, 'out_size'))
        self.ignore_label = check_int(ignore_label, 'ignore_label', allow_none=True)

    def forward(self, ids: Any) -> Any:
        if self.ignore_label is None:
            return super().forward(ids)
        ignored = ids == self.ignore_label
        rows = super().forward(torch.where(ignored, torch.zeros_like(ids), ids))
        return rows.masked_fill(ignored.unsqueeze(-1), 0)

    def extra_repr(self) -> str:
        return '{}, ignore_label={}'.format(super().extra_repr(), self.ignore_label)


class Highway(nn.Module):
    """``L.Highway``: ``activate(plain(x)) * t + x * (1 - t)``, ``t = sigmoid(transform(x))``.

    Args:
        in_out_size (int): Features of ``x`` and of the result.
        nobias (bool): True for no biases in ``plain`` and ``transform``.
        activate (callable): Tensor to tensor, applied to ``plain(x)``; ``torch.relu`` by
            default, as Chainer's ``F.relu``.

    Shapes: ``(N, in_out_size)`` float32, kept.

    Example:
        >>> import torch
        >>> Highway(4)(torch.zeros(2, 4)).shape
        torch.Size([2, 4])
    """

    def __init__(self, in_out_size: int, nobias: bool = False,
                 activate: Callable[..., Any] = torch.relu) -> None:
        super().__init__()
        in_out_size = check_positive_int(in_out_size, 'in_out_size')
        bias = not check_bool(nobias, 'nobias')
        check_callable(activate, 'activate')
        self.activate = activate
        self.plain = nn.Linear(in_out_size, in_out_size, bias=bias)
        self.transform = nn.Linear(in_out_size, in_out_size, bias=bias)

    def forward(self, x: Any) -> Any:
        gate = torch.sigmoid(self.transform(x))
        return self.activate(self.plain(x)) * gate + x * (1 - gate)


class Maxout(nn.Module):
    """``L.Maxout``: ``linear(x)`` in groups of ``pool_size`` features, the largest of each.

    Output feature ``m`` is the largest of ``linear(x)``'s features ``m * pool_size`` to
    ``m * pool_size + pool_size - 1``, as in ``F.maxout``.

    Args:
        in_size (int): Features of the flattened input.
        out_size (int): Output features.
        pool_size (int): Features per group.

    Example:
        >>> import torch
        >>> Maxout(4, 3, 2)(torch.zeros(5, 4)).shape
        torch.Size([5, 3])
    """

    def __init__(self, in_size: int, out_size: int, pool_size: int) -> None:
        super().__init__()
        self.out_size = check_positive_int(out_size, 'out_size')
        self.pool_size = check_positive_int(pool_size, 'pool_size')
        self.linear = Linear(in_size, self.out_size * self.pool_size)

    def forward(self, x: Any) -> Any:
        y = self.linear(x)
        return y.reshape(y.shape[0], self.out_size, self.pool_size).amax(dim=2)
