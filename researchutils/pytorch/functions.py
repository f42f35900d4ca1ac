"""The toolkit's differentiable functions in torch: the gradient-clipping LSTM step and the
k-step prediction loss, each equal to its Chainer twin in ``researchutils.chainer.functions``.

:func:`grad_clip_lstm` is a ``torch.autograd.Function`` whose forward pass is Chainer's
``F.lstm`` on Chainer's interleaved gate layout (channel ``4u + g`` of ``x`` is unit ``u``,
gate ``g`` in the order a, i, f, o), and whose backward pass clips the gradient with respect
to ``x`` to ``[clip_min, clip_max]``; the gradient carried to ``c_prev`` is not clipped. The
backward pass is written in differentiable torch operations when torch records it
(``create_graph=True``), so it can be differentiated again, with zero derivative where the
clip was active, as Chainer's ``GradClipLSTMGrad``.

Chainer name -> torch name: ``GradClipLSTM`` (the FunctionNode) -> :class:`GradClipLSTMFunction`;
``grad_clip_lstm`` and ``average_k_step_squared_error`` keep their names and arguments.
Tests: ``tests/pytorch/test_functions.py``.
"""
from __future__ import annotations

from typing import Any

import torch

from researchutils._checks import check_positive_int
from researchutils._layer_checks import check_clip_bounds
from researchutils.pytorch._tensor_checks import check_float_tensor, check_same_dtype


def _gate_view(x: torch.Tensor) -> torch.Tensor:
    """(B, 4U, ...) -> (B, U, 4, ...): gate g of unit u is channel 4u + g."""
    return x.reshape((x.shape[0], x.shape[1] // 4, 4) + tuple(x.shape[2:]))


def _activations(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The activated gates a, i, f, o of ``x``, each (B, U, ...)."""
    gates = _gate_view(x)
    return (torch.tanh(gates[:, :, 0]), torch.sigmoid(gates[:, :, 1]),
            torch.sigmoid(gates[:, :, 2]), torch.sigmoid(gates[:, :, 3]))


def _gradients(c_prev: torch.Tensor, x: torch.Tensor, gc: torch.Tensor, gh: torch.Tensor,
               clip_min: float | None, clip_max: float | None,
               acts: tuple[torch.Tensor, ...], tanh_c: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gc_prev, gx)`` of one step, ``gx`` clipped; differentiable in every input.

    ``torch.clamp``'s derivative is one inside ``[clip_min, clip_max]`` (bounds included)
    and zero outside, which is Chainer's mask in double backprop.
    """
    batch = len(x)
    a, i, f, o = acts
    # g: the total gradient reaching c, through h and directly.
    g = gh * o * (1 - tanh_c * tanh_c) + gc[:batch]
    gx = torch.stack([g * i * (1 - a * a), g * a * i * (1 - i),
                      g * c_prev[:batch] * f * (1 - f), gh * tanh_c * o * (1 - o)], dim=2)
    gx = gx.reshape(x.shape)
    if clip_min is not None or clip_max is not None:
        gx = torch.clamp(gx, clip_min, clip_max)
    gc_prev = torch.cat([g * f, gc[batch:]], dim=0)
    return gc_prev, gx


class GradClipLSTMFunction(torch.autograd.Function):
    """The LSTM step of Chainer's ``F.lstm`` with the gate gradients clipped in backward.

    Call it through :func:`grad_clip_lstm`, which checks the arguments. The activated gates
    and ``tanh(c)`` are kept from the forward pass for a backward pass that is not
    recorded; a recorded one (``create_graph=True``) recomputes them from ``x`` so that
    torch can differentiate it.

    Example:
        >>> import torch
        >>> c, h = GradClipLSTMFunction.apply(torch.zeros(1, 2), torch.zeros(1, 8), -1.0, 1.0)
        >>> h.shape
        torch.Size([1, 2])
    """

    @staticmethod
    def forward(ctx: Any, c_prev: torch.Tensor, x: torch.Tensor, clip_min: float | None,
                clip_max: float | None) -> tuple[torch.Tensor, torch.Tensor]:
        batch = len(x)
        acts = _activations(x)
        a, i, f, o = acts
        c = a * i + f * c_prev[:batch]
        tanh_c = torch.tanh(c)
        h = o * tanh_c
        ctx.save_for_backward(c_prev, x, *acts, tanh_c)
        ctx.clip_min, ctx.clip_max = clip_min, clip_max
        return torch.cat([c, c_prev[batch:]], dim=0), h

    @staticmethod
    def backward(ctx: Any, gc: torch.Tensor, gh: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        c_prev, x, *acts, tanh_c = ctx.saved_tensors
        if torch.is_grad_enabled():
            # Recorded for double backprop: the activations as functions of x.
            acts = list(_activations(x))
            tanh_c = torch.tanh(acts[0] * acts[1] + acts[2] * c_prev[:len(x)])
        gc_prev, gx = _gradients(c_prev, x, gc, gh, ctx.clip_min, ctx.clip_max, tuple(acts),
                                 tanh_c)
        return gc_prev, gx, None, None


def grad_clip_lstm(c_prev: torch.Tensor, x: torch.Tensor, clip_min: float | None = None,
                   clip_max: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Long short-term memory step with derivative clipping, as Chainer's twin computes it.

    With the gates of unit ``u`` at channels ``4u + g`` of ``x`` (``g`` = 0, 1, 2, 3 for
    a, i, f, o; Chainer's layout, not ``torch.nn.LSTMCell``'s blocks i, f, g, o):

    .. math::

        a &= \\tanh(x_a), \\quad i = \\sigma(x_i), \\quad f = \\sigma(x_f),
        \\quad o = \\sigma(x_o), \\\\
        c &= a \\odot i + f \\odot c_{prev}, \\qquad h = o \\odot \\tanh(c).

    In the backward pass the gradient with respect to ``x`` is clipped elementwise to
    ``[clip_min, clip_max]`` (Graves 2013, section 2.1); the gradient with respect to
    ``c_prev`` is not. Differentiable twice: the derivative of the clipped gradient is zero
    where the clip was active. Equal to
    :func:`researchutils.chainer.functions.grad_clip_lstm` for the same arrays.

    Args:
        c_prev (torch.Tensor): Previous cell state ``(B_c, U, ...)``, floating point.
        x (torch.Tensor): Gate pre-activations ``(B, 4U, ...)``, ``B <= B_c``, same dtype
            and trailing dimensions. Rows ``B:`` of ``c_prev`` pass to ``c`` unchanged.
        clip_min (float or None): Lower bound of the gradient with respect to ``x``;
            ``None`` leaves it unbounded below.
        clip_max (float or None): Upper bound; ``None`` leaves it unbounded above.

    Returns:
        tuple: ``(c, h)``: the new cell state ``(B_c, U, ...)`` and the output ``(B, U, ...)``.

    Raises:
        TypeError: ``c_prev`` or ``x`` is not a floating point tensor, their dtypes differ,
            or a bound is not a real number.
        ValueError: shapes that do not fit (named with both shapes), or
            ``clip_min > clip_max``.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import grad_clip_lstm
        >>> c_prev = torch.zeros(2, 3)
        >>> x = torch.randn(2, 12, requires_grad=True)
        >>> c, h = grad_clip_lstm(c_prev, x, clip_min=-1.0, clip_max=1.0)
        >>> c.shape, h.shape
        (torch.Size([2, 3]), torch.Size([2, 3]))
    """
    clip_min, clip_max = check_clip_bounds(clip_min, clip_max)
    check_float_tensor(c_prev, 'c_prev')
    check_float_tensor(x, 'x')
    check_same_dtype(x, 'x', c_prev, 'c_prev')
    if c_prev.ndim < 2 or x.ndim != c_prev.ndim:
        raise ValueError('c_prev must have at least 2 dimensions and x as many, got c_prev of '
                         'shape {} and x of shape {}'.format(tuple(c_prev.shape),
                                                             tuple(x.shape)))
    if (x.shape[0] > c_prev.shape[0] or x.shape[1] != 4 * c_prev.shape[1]
            or x.shape[2:] != c_prev.shape[2:]):
        raise ValueError('x must have shape (B, 4 * U, ...) for c_prev of shape (B_c, U, ...) '
                         'with B <= B_c, got x of shape {} and c_prev of shape {}'.format(
                             tuple(x.shape), tuple(c_prev.shape)))
    c, h = GradClipLSTMFunction.apply(c_prev, x, clip_min, clip_max)
    return c, h


def average_k_step_squared_error(x1: torch.Tensor, x2: torch.Tensor,
                                 k_step: int) -> torch.Tensor:
    """Average k-step squared error: the sum of squared differences divided by ``2 * k_step``.

    As Oh et al. (2015) and :func:`researchutils.chainer.functions.average_k_step_squared_error`:

    .. math::

        L = \\frac{1}{2K} \\sum_{i, t, k} \\left\\| x_1 - x_2 \\right\\|^2.

    float16 inputs are summed in float32, as on the Chainer side. Differentiable (twice and
    more) by torch's own operations.

    Args:
        x1 (torch.Tensor): Predictions, floating point, any shape.
        x2 (torch.Tensor): Targets, the same shape and dtype.
        k_step (int): Number of prediction steps K, a positive integer.

    Returns:
        torch.Tensor: A 0-dim tensor of the inputs' dtype.

    Raises:
        ValueError: ``k_step`` is not a positive integer (as the Chainer twin, a ValueError
            for a non-integer too); the shapes differ.
        TypeError: ``x1`` or ``x2`` is not a floating point tensor, or their dtypes differ.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import average_k_step_squared_error
        >>> float(average_k_step_squared_error(torch.ones(2, 3), torch.zeros(2, 3), k_step=3))
        1.0
    """
    k_step = check_positive_int(k_step, 'k_step', type_error=ValueError)
    check_float_tensor(x1, 'x1')
    check_float_tensor(x2, 'x2')
    check_same_dtype(x2, 'x2', x1, 'x1')
    if x1.shape != x2.shape:
        raise ValueError('x2 must have the shape of x1, {}, got {}'.format(
            tuple(x1.shape), tuple(x2.shape)))
    diff = (x1 - x2).reshape(-1)
    if diff.dtype == torch.float16:
        diff = diff.float()
    return (torch.dot(diff, diff) / (2 * k_step)).to(x1.dtype)
