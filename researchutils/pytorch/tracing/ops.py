"""Chainer's functions that are no single torch call, written with torch operations.

The source that :func:`researchutils.pytorch.write_source` writes calls these where
Chainer's semantics need more than one torch call (the LSTM's interleaved gates, EmbedID's
ignored label, the loss's normalization); every other function is a torch call in place.
Each takes and returns torch tensors, in Chainer's conventions, and is differentiable by
autograd. Tests: ``tests/pytorch/tracing/test_functions.py`` (each against Chainer).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional

__all__ = ['clip_gradient', 'lstm', 'embed_id', 'select_item', 'softmax_cross_entropy',
           'depth2space', 'space2depth', 'unpooling_2d', 'roi_pooling_2d', 'gaussian',
           'hard_sigmoid']


class _ClipGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, low: float | None,
                high: float | None) -> torch.Tensor:
        ctx.bounds = low, high
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        low, high = ctx.bounds
        if low is not None and low == high:
            return torch.full_like(gy, low), None, None
        return torch.clamp(gy, low, high), None, None


def clip_gradient(x: torch.Tensor, low: float | None, high: float | None) -> torch.Tensor:
    """``x`` unchanged, its gradient clipped to ``[low, high]`` (ConvLSTM's clip of its
    output gate; a bound None is open; equal bounds give that constant gradient).

    Example:
        >>> x = torch.ones(2, requires_grad=True)
        >>> (clip_gradient(x, -0.5, 0.5) * 3).sum().backward()
        >>> x.grad.tolist()
        [0.5, 0.5]
    """
    y: torch.Tensor = _ClipGradient.apply(x, low, high)
    return y


def lstm(c_prev: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Chainer's ``F.lstm`` step: ``x`` holds the gates interleaved (a, i, f, o per unit).

    Args:
        c_prev (torch.Tensor): The cell state, ``(B0, U, ...)``; rows past ``len(x)`` are
            carried unchanged, as Chainer does for a shrinking batch.
        x (torch.Tensor): The gates' input, ``(B, 4U, ...)``, channel ``4u + g`` unit u, gate g.

    Returns:
        tuple: the new cell state ``(B0, U, ...)`` and the output ``(B, U, ...)``.

    Example:
        >>> c, h = lstm(torch.zeros(2, 3), torch.zeros(2, 12))
        >>> tuple(c.shape), tuple(h.shape)
        ((2, 3), (2, 3))
    """
    batch = x.shape[0]
    gates = x.reshape((batch, x.shape[1] // 4, 4) + tuple(x.shape[2:]))
    a, i, f, o = gates.unbind(2)
    c = torch.tanh(a) * torch.sigmoid(i) + torch.sigmoid(f) * c_prev[:batch]
    h = torch.sigmoid(o) * torch.tanh(c)
    if batch < c_prev.shape[0]:
        c = torch.cat([c, c_prev[batch:]])
    return c, h


def embed_id(x: torch.Tensor, weight: torch.Tensor,
             ignore_label: int | None = None) -> torch.Tensor:
    """Chainer's ``F.embed_id``: rows of ``weight``; ``ignore_label`` gives zeros.

    Example:
        >>> embed_id(torch.tensor([0, -1]), torch.ones(2, 3), ignore_label=-1).tolist()
        [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    """
    if ignore_label is None:
        return functional.embedding(x.long(), weight)
    ignored = x == ignore_label
    rows = functional.embedding(torch.where(ignored, 0, x).long(), weight)
    return torch.where(ignored.unsqueeze(-1), 0, rows)


def select_item(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Chainer's ``F.select_item``: ``x[i, t[i]]`` for each row.

    Example:
        >>> select_item(torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([1, 0])).tolist()
        [2.0, 3.0]
    """
    return x.gather(1, t.long().unsqueeze(1)).squeeze(1)


def softmax_cross_entropy(x: torch.Tensor, t: torch.Tensor, *, normalize: bool = True,
                          ignore_label: int = -1, reduce: str = 'mean',
                          class_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Chainer's ``F.softmax_cross_entropy`` (class axis 1): the mean over the labels not
    ignored (``normalize``) or over the batch, or each element (``reduce='no'``).

    Example:
        >>> float(softmax_cross_entropy(torch.zeros(2, 4), torch.tensor([0, -1])))
        1.386...
    """
    target = t.long()
    ignored = target == ignore_label
    losses = functional.cross_entropy(x, torch.where(ignored, 0, target), weight=class_weight,
                                      reduction='none')
    losses = torch.where(ignored, 0, losses)
    if reduce == 'no':
        return losses
    if normalize:
        count = (~ignored).sum().clamp(min=1)
    else:
        count = torch.tensor(x.shape[0])
    return losses.sum() / count.to(losses.dtype)


def depth2space(x: torch.Tensor, r: int) -> torch.Tensor:
    """Chainer's ``F.depth2space`` (channels split as ``(r, r, C)``, DCR order).

    Example:
        >>> tuple(depth2space(torch.zeros(1, 8, 2, 2), 2).shape)
        (1, 2, 4, 4)
    """
    n, c, h, w = x.shape
    y = x.reshape(n, r, r, c // (r * r), h, w).permute(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (r * r), h * r, w * r)


def space2depth(x: torch.Tensor, r: int) -> torch.Tensor:
    """Chainer's ``F.space2depth``, the inverse of :func:`depth2space`.

    Example:
        >>> tuple(space2depth(torch.zeros(1, 2, 4, 4), 2).shape)
        (1, 8, 2, 2)
    """
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // r, r, w // r, r).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * r * r, h // r, w // r)


def unpooling_2d(x: torch.Tensor, ksize: tuple[int, int], stride: tuple[int, int],
                 pad: tuple[int, int], out_size: tuple[int, int]) -> torch.Tensor:
    """Chainer's ``F.unpooling_2d``: each value copied over its window, overlaps summed.

    Example:
        >>> unpooling_2d(torch.ones(1, 1, 1, 1), (2, 2), (2, 2), (0, 0), (2, 2)).tolist()
        [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    n, c, h, w = x.shape
    kh, kw = ksize
    # fold needs the size whose windows are exactly h x w; Chainer's cover_all sizes differ
    # by the windows' overhang, which is cropped (or the missing edge zero).
    covered = tuple((size - 1) * step + k - 2 * p
                    for size, step, k, p in zip((h, w), stride, ksize, pad))
    columns = x.reshape(n, c, 1, h * w).expand(n, c, kh * kw, h * w)
    y = functional.fold(columns.reshape(n, c * kh * kw, h * w), covered, ksize, padding=pad,
                        stride=stride)
    y = y[:, :, :out_size[0], :out_size[1]]
    return functional.pad(y, (0, out_size[1] - y.shape[3], 0, out_size[0] - y.shape[2]))


def roi_pooling_2d(x: torch.Tensor, rois: torch.Tensor, out_size: tuple[int, int],
                   spatial_scale: float) -> torch.Tensor:
    """Chainer's ``F.roi_pooling_2d``: each region ``(batch, x1, y1, x2, y2)`` max-pooled to
    ``out_size`` bins (bins rounded as Chainer rounds them).

    Example:
        >>> rois = torch.tensor([[0., 0., 0., 1., 1.]])
        >>> roi_pooling_2d(torch.arange(4.).reshape(1, 1, 2, 2), rois, (1, 1), 1.0).tolist()
        [[[[3.0]]]]
    """
    out_h, out_w = out_size
    height, width = x.shape[2:]
    pooled = []
    for roi in rois.detach().cpu().tolist():
        batch = int(roi[0])
        x1, y1, x2, y2 = (round(value * spatial_scale) for value in roi[1:])
        roi_h, roi_w = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        rows = []
        for i in range(out_h):
            top = min(max(int(i * roi_h / out_h) + y1, 0), height)
            bottom = min(max(-int(-(i + 1) * roi_h // out_h) + y1, 0), height)
            cells = []
            for j in range(out_w):
                left = min(max(int(j * roi_w / out_w) + x1, 0), width)
                right = min(max(-int(-(j + 1) * roi_w // out_w) + x1, 0), width)
                window = x[batch, :, top:bottom, left:right]
                cells.append(window.amax(dim=(1, 2)) if window.numel()
                             else x.new_zeros(x.shape[1]))
            rows.append(torch.stack(cells, -1))
        pooled.append(torch.stack(rows, -2))
    return torch.stack(pooled)


def gaussian(mean: torch.Tensor, ln_var: torch.Tensor) -> torch.Tensor:
    """Chainer's ``F.gaussian``: a sample ``mean + exp(ln_var / 2) * noise`` (torch's RNG).

    Example:
        >>> gaussian(torch.zeros(2), torch.full((2,), -float('inf'))).tolist()
        [0.0, 0.0]
    """
    return mean + torch.exp(ln_var * 0.5) * torch.randn_like(mean)


def hard_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """Chainer's ``F.hard_sigmoid``: ``clip(0.2 x + 0.5, 0, 1)`` (torch's slope is 1/6).

    Example:
        >>> hard_sigmoid(torch.tensor([-3., 0., 3.])).tolist()
        [0.0, 0.5, 1.0]
    """
    return torch.clamp(x * 0.2 + 0.5, 0.0, 1.0)


