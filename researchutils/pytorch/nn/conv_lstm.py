"""The torch twin of ``researchutils.chainer.links.ConvLSTM``: a convolutional LSTM layer with
peephole connections (Shi et al. 2015), stateful as Chainer's LSTM links.

Chainer name -> torch name (a Chainer link's arrays copy into these unchanged), for each gate
``g`` in ``c`` (the cell input, F.lstm's a), ``i``, ``f``, ``o``:

=============  ================  ===============================================
Chainer        torch             shape
=============  ================  ===============================================
``Wx{g}/W``    ``Wx{g}.weight``  ``(out_channels, in_channels, kh, kw)``
``Wx{g}/b``    ``Wx{g}.bias``    ``(out_channels,)``
``Wh{g}/W``    ``Wh{g}.weight``  ``(out_channels, out_channels, kh, kw)``, no bias
``Wci``        ``Wci``           ``(1, out_channels, H', W')``; also ``Wcf``, ``Wco``
``c``, ``h``   ``c``, ``h``      the state ``(B, out_channels, H', W')``, or None
=============  ================  ===============================================

Each ``Wx{g}`` / ``Wh{g}`` is a ``torch.nn.Conv2d`` (``Wx{g}`` a ``torch.nn.LazyConv2d`` until
the first step when ``in_channels`` is None); the peepholes are parameters, uninitialized
(``torch.nn.UninitializedParameter``) until the first step fixes the state's size, then zero,
as on the Chainer side. Tests: ``tests/pytorch/nn/test_conv_lstm.py``.
"""
from __future__ import annotations

from typing import Any

import torch

from researchutils._layer_checks import check_clip_bounds, check_conv_sizes
from researchutils.pytorch._tensor_checks import check_float_tensor, check_same_dtype
from researchutils.pytorch.functions import grad_clip_lstm
from researchutils.pytorch.nn._arguments import (
    Initializer,
    check_image_batch,
    check_initializer,
    check_state,
    initialize,
    lecun_normal_,
)

# F.lstm's gate order (a, i, f, o); the original names the cell input 'c'.
_GATES = ('c', 'i', 'f', 'o')


class _ClipGradient(torch.autograd.Function):
    """Identity whose gradient is clipped to ``[low, high]`` (zero derivative outside)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, low: float | None,
                high: float | None) -> torch.Tensor:
        ctx.low, ctx.high = low, high
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return torch.clamp(gy, ctx.low, ctx.high), None, None


def _interleave(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Stacks per-gate tensors (U, ...) into F.lstm's layout (4U, ...): gate g of u at 4u+g."""
    stacked = torch.stack(tensors, dim=1)
    return stacked.reshape((-1,) + tuple(stacked.shape[2:]))


class ConvLSTM(torch.nn.Module):
    """Convolutional LSTM layer with peepholes, equal to its Chainer twin.

    Shi et al. (2015), equations (3): the gates are convolutions of the input (``Wx*``,
    stride ``stride``, with bias) and of the previous output (``Wh*``, stride 1, no bias),
    zero-padded by ``ksize // 2``; the input and forget gates also see the previous cell
    through the peepholes ``Wci``, ``Wcf``, and the output gate sees the new cell through
    ``Wco`` (elementwise, one weight per unit and pixel). The state has the input's height
    and width divided by ``stride``, rounded up; the peepholes are made (zero) at the first
    step, which fixes the spatial size the layer accepts.

    The state is kept as by :class:`~researchutils.pytorch.GradClipLSTM`: :attr:`c` and
    :attr:`h` are None until the first step, :meth:`reset_state`, :meth:`set_state`, a batch
    that may shrink but not grow, a state that ``module.to(...)`` does not move. With
    ``clip_min`` / ``clip_max`` the gradient with respect to each gate's pre-activation
    (peephole term included) is clipped in the backward pass.
    Given the twin's weights, every output and gradient equals the twin's.

    Args:
        in_channels (int or None): Input channels; None defers it to the first step.
        out_channels (int): Channels of the state and output.
        ksize (int or pair of ints): Kernel size, odd.
        stride (int or pair of ints): Stride of the input convolutions.
        initialW: Initializer of every convolution weight (None: Chainer's LeCunNormal),
            a number or a callable that fills a tensor in place.
        initial_bias: Initializer of the input convolutions' biases (None: zero).
        clip_min (float or None): Lower bound of the gate gradients, keyword only.
        clip_max (float or None): Upper bound of the gate gradients, keyword only.

    Attributes:
        c (torch.Tensor or None): Cell state ``(B, out_channels, H', W')``.
        h (torch.Tensor or None): Output of the previous step, same shape.

    Raises:
        TypeError: a size that is not an int, a bound that is not a real number, an
            initializer that is not one.
        ValueError: an even or non-positive ``ksize``, a size below 1,
            ``clip_min > clip_max``.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import ConvLSTM
        >>> lstm = ConvLSTM(3, 8, ksize=3)
        >>> for frame in torch.zeros(4, 2, 3, 16, 16):  # (time, batch, C, H, W)
        ...     h = lstm(frame)
        >>> h.shape
        torch.Size([2, 8, 16, 16])
    """

    c: torch.Tensor | None
    h: torch.Tensor | None

    def __init__(self, in_channels: int | None, out_channels: int,
                 ksize: int | tuple[int, int], stride: int | tuple[int, int] = 1,
                 initialW: Initializer | None = None, initial_bias: Initializer | None = None,
                 *, clip_min: float | None = None, clip_max: float | None = None) -> None:
        super().__init__()
        in_channels, self.out_channels, self.ksize, self.stride, self.pad = check_conv_sizes(
            in_channels, out_channels, ksize, stride, same_size=True)
        self.clip_min, self.clip_max = check_clip_bounds(clip_min, clip_max)
        check_initializer(initialW, 'initialW')
        check_initializer(initial_bias, 'initial_bias')
        self.initialW, self.initial_bias = initialW, initial_bias
        for gate in _GATES:
            upward: torch.nn.Module = (
                torch.nn.LazyConv2d(out_channels, self.ksize, self.stride, self.pad)
                if in_channels is None else
                torch.nn.Conv2d(in_channels, out_channels, self.ksize, self.stride, self.pad))
            setattr(self, 'Wx' + gate, upward)
            setattr(self, 'Wh' + gate, torch.nn.Conv2d(out_channels, out_channels, self.ksize,
                                                       1, self.pad, bias=False))
            initialize(getattr(self, 'Wh' + gate).weight, initialW, lecun_normal_)
        for gate in 'ifo':
            setattr(self, 'Wc' + gate, torch.nn.UninitializedParameter())
        if in_channels is not None:
            self._initialize_upward()
        self.reset_state()

    def _upward(self, gate: str) -> torch.nn.Module:
        module: torch.nn.Module = getattr(self, 'Wx' + gate)
        return module

    def _initialize_upward(self) -> None:
        for gate in _GATES:
            initialize(self._upward(gate).weight, self.initialW, lecun_normal_)
            initialize(self._upward(gate).bias, self.initial_bias, torch.nn.init.zeros_)

    def reset_state(self) -> None:
        """Clears the state: :attr:`c` and :attr:`h` become None (zero at the next step)."""
        self.c = self.h = None

    def set_state(self, c: torch.Tensor, h: torch.Tensor) -> None:
        """Sets the state.

        Args:
            c (torch.Tensor): The cell state ``(B, out_channels, H', W')``.
            h (torch.Tensor): The output ``(B, out_channels, H', W')``.

        Raises:
            TypeError: ``c`` or ``h`` is not a floating point tensor.
        """
        self.c, self.h = check_state(c, h)

    def _initialize(self, x: torch.Tensor, state_shape: tuple[int, ...] | None) -> None:
        if state_shape is None:
            if torch.nn.parameter.is_lazy(self.Wxc.weight):
                for gate in _GATES:
                    self._upward(gate).weight.materialize(
                        (self.out_channels, x.shape[1]) + self.ksize)
                    self._upward(gate).bias.materialize((self.out_channels,))
                self._initialize_upward()
            return
        for gate in 'ifo':
            peephole = getattr(self, 'Wc' + gate)
            if torch.nn.parameter.is_lazy(peephole):
                peephole.materialize((1,) + state_shape[1:], dtype=x.dtype, device=x.device)
                with torch.no_grad():
                    peephole.zero_()
            elif tuple(peephole.shape[1:]) != state_shape[1:]:
                raise ValueError(
                    'the state has shape {} but the peephole weight Wc{} was made for '
                    '{}: a ConvLSTM takes one spatial size'.format(
                        state_shape, gate, tuple(peephole.shape)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Advances the state by one step and returns the new output.

        Args:
            x (torch.Tensor): Input ``(B, in_channels, H, W)``; ``B`` may shrink from one
                step to the next (never grow).

        Returns:
            torch.Tensor: Output ``(B, out_channels, ceil(H / sy), ceil(W / sx))``.

        Raises:
            TypeError: ``x`` is not a floating point tensor of the parameters' dtype, or
                its batch is larger than the state's.
            ValueError: ``x`` is not 4-dimensional, or gives a state of another size.
        """
        check_float_tensor(x, 'x')
        check_image_batch(x)
        check_same_dtype(x, 'x', self.Whc.weight, 'the parameters')
        self._initialize(x, None)
        batch = len(x)
        W_x = _interleave([self._upward(g).weight for g in _GATES])
        b_x = _interleave([self._upward(g).bias for g in _GATES])
        gates = torch.nn.functional.conv2d(x, W_x, b_x, self.stride, self.pad)
        state_shape = (batch, self.out_channels) + tuple(gates.shape[2:])
        self._initialize(x, state_shape)
        c_prev, h_rest = self.c, None
        if self.h is not None:
            if batch > len(self.h):
                raise TypeError(
                    'the batch size of x ({}) must not exceed the batch size of the '
                    'previous state h ({})'.format(batch, len(self.h)))
            if self.h.shape[2:] != gates.shape[2:]:
                raise ValueError('x gives a state of shape {} but the previous state h has '
                                 'shape {}'.format(state_shape, tuple(self.h.shape)))
            h_used = self.h[:batch]
            if batch < len(self.h):
                h_rest = self.h[batch:]
            W_h = _interleave([getattr(self, 'Wh' + g).weight for g in _GATES])
            gates = gates + torch.nn.functional.conv2d(h_used, W_h, None, 1, self.pad)
        if c_prev is None:
            c_prev = torch.zeros(state_shape, dtype=gates.dtype, device=gates.device)
        c_used = c_prev[:batch]

        # Peepholes on C_{t-1} enter the input and forget gates' pre-activations.
        gates = gates.reshape((batch, self.out_channels, 4) + tuple(gates.shape[2:]))
        zero = torch.zeros_like(self.Wci)
        peepholes = torch.stack([zero, self.Wci, self.Wcf, zero], dim=2)
        gates = gates + c_used.unsqueeze(2) * peepholes
        gate_o = gates[:, :, 3]
        gates = gates.reshape((batch, 4 * self.out_channels) + tuple(gates.shape[3:]))
        c, _ = grad_clip_lstm(c_prev, gates, self.clip_min, self.clip_max)
        # The output gate looks at the new cell C_t, which the fused cell cannot: it is
        # applied here, and the cell's own h is left unused (its o slot gets a zero gradient,
        # clipped, as on the Chainer side).
        c_new = c[:batch]
        gate_o = gate_o + self.Wco * c_new
        if self.clip_min is not None or self.clip_max is not None:
            gate_o = _ClipGradient.apply(gate_o, self.clip_min, self.clip_max)
        y = torch.sigmoid(gate_o) * torch.tanh(c_new)
        self.c = c
        self.h = y if h_rest is None else torch.cat([y, h_rest], dim=0)
        return y
