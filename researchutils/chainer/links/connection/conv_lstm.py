"""Convolutional LSTM layer with peephole connections (Shi et al. 2015).

Tests: ``tests/chainer/links/connection/test_conv_lstm.py``.
"""
from __future__ import annotations

from collections.abc import Sequence

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import function_node, initializers

from researchutils._layer_checks import check_conv_sizes
from researchutils._typing import Array, Initializer, Variable, VariableOrArray
from researchutils.chainer._clip_bounds import check_clip_bounds
from researchutils.chainer.functions.activation.grad_clip_lstm import grad_clip_lstm
from researchutils.chainer.links._arguments import (
    check_image_batch,
    check_initializer,
)

# F.lstm's gate order (a, i, f, o); the original names the cell input 'c'.
_GATES = ('c', 'i', 'f', 'o')


class _ClipGradient(function_node.FunctionNode):
    """Identity whose gradient is clipped to ``[low, high]`` (zero derivative outside)."""

    def __init__(self, low: float | None, high: float | None) -> None:
        self.low, self.high = low, high

    def forward(self, inputs: tuple[Array]) -> tuple[Array]:
        return inputs[0],

    def backward(self, indexes: tuple[int, ...],
                 grad_outputs: tuple[Variable]) -> tuple[Variable]:
        gy, = grad_outputs
        if self.low is not None and self.low == self.high:
            return chainer.Variable(gy.xp.full_like(gy.array, self.low)),
        return F.clip(gy, self.low, self.high),


def _interleave(arrays: Sequence[Variable]) -> Variable:
    """Stacks per-gate arrays (U, ...) into F.lstm's layout (4U, ...): gate g of u at 4u+g."""
    stacked = F.stack(arrays, axis=1)
    return F.reshape(stacked, (-1,) + stacked.shape[2:])


class ConvLSTM(chainer.Chain):
    """Convolutional LSTM layer: an LSTM whose state is a stack of feature maps.

    Shi et al. (2015), "Convolutional LSTM Network: A Machine Learning Approach for
    Precipitation Nowcasting", equations (3), with ``*`` a convolution and ``\\circ`` the
    elementwise product:

    .. math::

        i_t &= \\sigma(W_{xi} * X_t + W_{hi} * H_{t-1} + W_{ci} \\circ C_{t-1} + b_i) \\\\
        f_t &= \\sigma(W_{xf} * X_t + W_{hf} * H_{t-1} + W_{cf} \\circ C_{t-1} + b_f) \\\\
        C_t &= f_t \\circ C_{t-1} + i_t \\circ \\tanh(W_{xc} * X_t + W_{hc} * H_{t-1} + b_c) \\\\
        o_t &= \\sigma(W_{xo} * X_t + W_{ho} * H_{t-1} + W_{co} \\circ C_t + b_o) \\\\
        H_t &= o_t \\circ \\tanh(C_t)

    The input convolutions ``Wx*`` (with bias) use ``stride``, the state convolutions
    ``Wh*`` (no bias) stride 1, all with zero padding ``ksize // 2`` ('same'), so the state
    has the input's height and width divided by ``stride``, rounded up. The peephole
    weights ``Wci``, ``Wcf``, ``Wco`` have one value per unit and pixel, shape
    ``(1, out_channels, H', W')``: they are created (zero) at the first call, which fixes
    the spatial size the link accepts. The four convolutions of each side run as one
    (the weights are interleaved into :func:`chainer.functions.lstm`'s gate layout at
    every step), so the step costs two convolutions, not eight.

    State is kept as in :class:`chainer.links.LSTM`: :attr:`c` and :attr:`h` start as
    ``None`` (zero), :meth:`reset_state` clears them, :meth:`set_state` sets them; a batch
    may shrink from one step to the next (the rows past it keep their state) but not grow.
    The parameters and their names are those of the original researchutils ConvLSTM, so
    files it saved load.

    With ``clip_min`` / ``clip_max`` the gradient with respect to each gate's
    pre-activation (peephole term included) is clipped elementwise in the backward pass,
    as in :class:`~researchutils.chainer.links.GradClipLSTM` (the cell input, input and
    forget gates through :func:`~researchutils.chainer.functions.grad_clip_lstm`).

    Args:
        in_channels (int or None): Input channels; ``None`` defers it to the first call.
        out_channels (int): Channels of the state and output (units per pixel).
        ksize (int or pair of ints): Kernel size, odd.
        stride (int or pair of ints): Stride of the input convolutions.
        initialW: Initializer of all convolution weights (``None``: Chainer's default).
        initial_bias: Initializer of the input convolutions' biases (``None``: zero).
        clip_min (float or None): Lower bound of the gate gradients, keyword only.
        clip_max (float or None): Upper bound of the gate gradients, keyword only.

    Attributes:
        c (~chainer.Variable): Cell state ``(B, out_channels, H', W')``, or None.
        h (~chainer.Variable): Output of the previous step, same shape, or None.

    Raises:
        TypeError: a size that is not an int, a bound that is not a real number, an
            initializer that is not one (a str, say).
        ValueError: an even or non-positive ``ksize``, a size below 1,
            ``clip_min > clip_max``.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.links import ConvLSTM
        >>> lstm = ConvLSTM(3, 8, ksize=3)
        >>> frames = np.zeros((4, 2, 3, 16, 16), np.float32)  # (time, batch, C, H, W)
        >>> for frame in frames:
        ...     h = lstm(frame)
        >>> h.shape
        (2, 8, 16, 16)
    """

    # The state: None (zero) until the first step.
    c: Variable | None
    h: Variable | None

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
        with self.init_scope():
            for gate in _GATES:
                setattr(self, 'Wx' + gate, L.Convolution2D(
                    in_channels, out_channels, self.ksize, self.stride, self.pad,
                    initialW=initialW, initial_bias=initial_bias))
                setattr(self, 'Wh' + gate, L.Convolution2D(
                    out_channels, out_channels, self.ksize, 1, self.pad, nobias=True,
                    initialW=initialW))
            for gate in 'ifo':
                setattr(self, 'Wc' + gate, chainer.Parameter(initializers.Zero()))
        self.reset_state()

    def device_resident_accept(self, visitor: chainer.device_resident.DeviceResidentsVisitor
                               ) -> None:
        super().device_resident_accept(visitor)
        for state in (self.c, self.h):
            if state is not None:
                visitor.visit_variable(state)

    def set_state(self, c: Variable, h: Variable) -> None:
        """Sets the state: :attr:`c` and :attr:`h`, Variables of the state's shape.

        Args:
            c (~chainer.Variable): The cell state ``(B, out_channels, H', W')``.
            h (~chainer.Variable): The output ``(B, out_channels, H', W')``.

        Raises:
            TypeError: ``c`` or ``h`` is not a :class:`~chainer.Variable`.
        """
        for name, value in (('c', c), ('h', h)):
            if not isinstance(value, chainer.Variable):
                raise TypeError('{} must be a chainer.Variable, not {}'.format(
                    name, type(value).__name__))
        c.to_device(self.device)
        h.to_device(self.device)
        self.c, self.h = c, h

    def reset_state(self, c: Variable | None = None, h: Variable | None = None) -> None:
        """Clears the state, or, with ``c`` and ``h`` (the original's form), sets it.

        Args:
            c (~chainer.Variable or None): The cell state, as in :meth:`set_state`.
            h (~chainer.Variable or None): The output, as in :meth:`set_state`.
        """
        if c is None and h is None:
            self.c = self.h = None
        else:
            self.set_state(c, h)

    def _initialize(self, x: VariableOrArray) -> None:
        with chainer.using_device(self.device):
            if self.Wxc.W.array is None:
                for gate in _GATES:
                    getattr(self, 'Wx' + gate)._initialize_params(x.shape[1])

    def _initialize_peepholes(self, shape: tuple[int, ...]) -> None:
        with chainer.using_device(self.device):
            for gate in 'ifo':
                peephole = getattr(self, 'Wc' + gate)
                if peephole.array is None:
                    peephole.initialize((1,) + shape[1:])
                elif peephole.shape[1:] != shape[1:]:
                    raise ValueError(
                        'the state has shape {} but the peephole weight Wc{} was made for '
                        '{}: a ConvLSTM takes one spatial size'.format(
                            shape, gate, peephole.shape))

    def forward(self, x: VariableOrArray) -> Variable:
        """Advances the state by one step and returns the new output.

        Args:
            x (:class:`~chainer.Variable` or ndarray): Input ``(B, in_channels, H, W)``;
                ``B`` may shrink from one step to the next (never grow).

        Returns:
            ~chainer.Variable: Output ``(B, out_channels, ceil(H / sy), ceil(W / sx))``.
        """
        check_image_batch(x)
        self._initialize(x)
        batch = len(x)
        W_x = _interleave([getattr(self, 'Wx' + g).W for g in _GATES])
        b_x = _interleave([getattr(self, 'Wx' + g).b for g in _GATES])
        gates = F.convolution_2d(x, W_x, b_x, self.stride, self.pad)
        state_shape = (batch, self.out_channels) + gates.shape[2:]
        self._initialize_peepholes(state_shape)
        c_prev, h_rest = self.c, None
        if self.h is not None:
            if batch > len(self.h):
                raise TypeError(
                    'the batch size of x ({}) must not exceed the batch size of the '
                    'previous state h ({})'.format(batch, len(self.h)))
            if self.h.shape[2:] != gates.shape[2:]:
                raise ValueError('x gives a state of shape {} but the previous state h has '
                                 'shape {}'.format(state_shape, self.h.shape))
            h_used = self.h
            if batch < len(self.h):
                h_used, h_rest = F.split_axis(self.h, [batch], axis=0)
            W_h = _interleave([getattr(self, 'Wh' + g).W for g in _GATES])
            gates = gates + F.convolution_2d(h_used, W_h, None, 1, self.pad)
        if c_prev is None:
            with chainer.using_device(self.device):
                c_prev = chainer.Variable(self.xp.zeros(state_shape, gates.dtype))
        c_used = c_prev if len(c_prev) == batch else F.split_axis(c_prev, [batch], axis=0)[0]

        # Peepholes on C_{t-1} enter the input and forget gates' pre-activations.
        gates = F.reshape(gates, (batch, self.out_channels, 4) + gates.shape[2:])
        zero = self.xp.zeros(self.Wci.shape, gates.dtype)
        peepholes = F.stack([zero, self.Wci, self.Wcf, zero], axis=2)
        gates = gates + F.expand_dims(c_used, 2) * peepholes
        gate_o = F.split_axis(gates, [3], axis=2)[1]
        gates = F.reshape(gates, (batch, 4 * self.out_channels) + gates.shape[3:])
        # grad_clip_lstm is also the faster cell when nothing is clipped (bounds None).
        c, _ = grad_clip_lstm(c_prev, gates, self.clip_min, self.clip_max)
        # The output gate looks at the new cell C_t, which the fused cell cannot: it is
        # applied here, and the cell's own h is left unused (its o slot gets no gradient).
        c_new = c if len(c) == batch else F.split_axis(c, [batch], axis=0)[0]
        gate_o = F.reshape(gate_o, c_new.shape) + F.broadcast_to(self.Wco, c_new.shape) * c_new
        if self.clip_min is not None or self.clip_max is not None:
            gate_o = _ClipGradient(self.clip_min, self.clip_max).apply((gate_o,))[0]
        y = F.sigmoid(gate_o) * F.tanh(c_new)
        self.c = c
        self.h = y if h_rest is None else F.concat([y, h_rest], axis=0)
        return y
