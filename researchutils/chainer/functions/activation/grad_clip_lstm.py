"""LSTM unit whose gate gradients are clipped on the way back (derivative clipping).

The forward pass is Chainer 7's :func:`chainer.functions.lstm`; the backward pass clips the
gradient with respect to the gate pre-activations ``x`` elementwise to ``[clip_min,
clip_max]`` (Graves 2013, "Generating Sequences With Recurrent Neural Networks", section 2.1).
Tests: ``tests/chainer/functions/activation/test_grad_clip_lstm.py``.
"""
from __future__ import annotations

import chainer
import numpy
from chainer import backend, function_node
from chainer.backends import cuda
from chainer.utils import type_check

from researchutils._typing import Array, FloatArray, Variable, VariableOrArray
from researchutils.chainer._array_checks import check_array
from researchutils.chainer._clip_bounds import check_clip_bounds


def _gate_view(array: Array) -> Array:
    """(B, 4U, ...) -> (B, U, 4, ...): gate g of unit u is channel 4u + g."""
    return array.reshape((array.shape[0], array.shape[1] // 4, 4) + array.shape[2:])


# Used by the CuPy forward kernel: the sigmoid through tanh, as on the CPU.
_PREAMBLE = '''
template <typename T> __device__ T sigmoid_of(T x) {
    const T half = 0.5;
    return tanh(x * half) * half + half;
}
'''


def _cupy_forward(c_prev: Array, gates: Array, acts: Array,
                  batch: int) -> tuple[Array, Array, Array]:
    c_next = cuda.cupy.empty_like(c_prev)
    h = cuda.cupy.empty_like(c_next[:batch])
    tanh_c = cuda.cupy.empty_like(h)
    cuda.elementwise(
        'T c_prev, T xa, T xi, T xf, T xo',
        'T c, T h, T ta, T si, T sf, T so, T tc',
        '''
        ta = tanh(xa);
        si = sigmoid_of(xi);
        sf = sigmoid_of(xf);
        so = sigmoid_of(xo);
        c = ta * si + sf * c_prev;
        tc = tanh(c);
        h = so * tc;
        ''',
        'researchutils_grad_clip_lstm_fwd', preamble=_PREAMBLE,
    )(c_prev[:batch], gates[:, :, 0], gates[:, :, 1], gates[:, :, 2], gates[:, :, 3],
      c_next[:batch], h, acts[0], acts[1], acts[2], acts[3], tanh_c)
    return c_next, h, tanh_c


def _cupy_backward(c_prev: Array, acts: Array, tanh_c: Array, gc: Array, gh: Array,
                   gc_prev: Array, gx_gates: Array, low: float, high: float,
                   batch: int) -> None:
    dtype = c_prev.dtype.type
    cuda.elementwise(
        'T c_prev, T ta, T si, T sf, T so, T tc, T gc, T gh, T low, T high',
        'T gc_prev, T ga, T gi, T gf, T go',
        '''
        const T one = 1.0;
        T g = gh * so * (one - tc * tc) + gc;
        T raw_a = g * si * (one - ta * ta);
        T raw_i = g * ta * si * (one - si);
        T raw_f = g * c_prev * sf * (one - sf);
        T raw_o = gh * tc * so * (one - so);
        ga = raw_a < low ? low : (raw_a > high ? high : raw_a);
        gi = raw_i < low ? low : (raw_i > high ? high : raw_i);
        gf = raw_f < low ? low : (raw_f > high ? high : raw_f);
        go = raw_o < low ? low : (raw_o > high ? high : raw_o);
        gc_prev = g * sf;
        ''',
        'researchutils_grad_clip_lstm_bwd',
    )(c_prev[:batch], acts[0], acts[1], acts[2], acts[3], tanh_c,
      gc[:batch], gh, dtype(low), dtype(high),
      gc_prev[:batch], gx_gates[:, :, 0], gx_gates[:, :, 1], gx_gates[:, :, 2],
      gx_gates[:, :, 3])


def _numpy_forward(c_prev: FloatArray, gates: FloatArray, acts: FloatArray,
                   batch: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    a, i, f, o = acts
    numpy.tanh(gates[:, :, 0], out=a)
    for k in (1, 2, 3):
        # sigmoid(x) = tanh(x / 2) / 2 + 1 / 2: one transcendental call, no overflow.
        sig = acts[k]
        numpy.multiply(gates[:, :, k], 0.5, out=sig)
        numpy.tanh(sig, out=sig)
        sig *= 0.5
        sig += 0.5
    c_next = numpy.empty_like(c_prev)
    c = c_next[:batch]
    numpy.multiply(a, i, out=c)
    c += f * c_prev[:batch]
    tanh_c = numpy.tanh(c)
    h = o * tanh_c
    return c_next, h, tanh_c


def _numpy_clip(gx: FloatArray, clip_min: float | None, clip_max: float | None) -> None:
    """Clips ``gx`` in place.

    NumPy's clip and its maximum/minimum with a scalar bound run without SIMD; against a
    bound array of one sample's size they vectorize, and the pair costs about half.
    """
    row = gx.size // len(gx) if len(gx) else 0
    if row < 256 or not gx.flags.c_contiguous:
        numpy.clip(gx, clip_min, clip_max, out=gx)
        return
    rows = gx.reshape(len(gx), row)
    if clip_min is not None:
        numpy.maximum(rows, numpy.full(row, clip_min, gx.dtype), out=rows)
    if clip_max is not None:
        numpy.minimum(rows, numpy.full(row, clip_max, gx.dtype), out=rows)


def _numpy_backward(c_prev: FloatArray, acts: FloatArray, tanh_c: FloatArray,
                    gc: FloatArray, gh: FloatArray, gc_prev: FloatArray,
                    gx_gates: FloatArray, batch: int) -> None:
    a, i, f, o = acts
    ga, gi, gf, go = (gx_gates[:, :, k] for k in range(4))
    # g: the total gradient reaching c, through h and directly.
    g = tanh_c * tanh_c
    numpy.subtract(1, g, out=g)
    g *= o
    g *= gh
    g += gc[:batch]
    numpy.multiply(a, a, out=ga)
    numpy.subtract(1, ga, out=ga)
    ga *= i
    ga *= g
    numpy.subtract(1, i, out=gi)
    gi *= i
    gi *= a
    gi *= g
    numpy.subtract(1, f, out=gf)
    gf *= f
    gf *= c_prev[:batch]
    gf *= g
    numpy.subtract(1, o, out=go)
    go *= o
    go *= tanh_c
    go *= gh
    numpy.multiply(g, f, out=gc_prev[:batch])


class GradClipLSTM(function_node.FunctionNode):
    """LSTM unit with derivative clipping on the gate pre-activations.

    See :func:`grad_clip_lstm` for the computation. The activated gates and ``tanh(c)`` are
    kept from the forward pass, so the backward pass evaluates no transcendental function.

    Args:
        clip_min (float or None): Lower bound of the gradient with respect to ``x``.
        clip_max (float or None): Upper bound of the gradient with respect to ``x``.
    """

    def __init__(self, clip_min: float | None = None, clip_max: float | None = None) -> None:
        self.clip_min, self.clip_max = check_clip_bounds(clip_min, clip_max)

    def check_type_forward(self, in_types: type_check.TypeInfoTuple) -> None:
        type_check._argname(in_types, ('c_prev', 'x'))
        c_type, x_type = in_types
        type_check.expect(
            c_type.dtype.kind == 'f',
            x_type.dtype == c_type.dtype,
            c_type.ndim >= 2,
            x_type.ndim == c_type.ndim,
        )
        # Separate call: shapes may only be indexed once the ranks are known to fit.
        type_check.expect(
            x_type.shape[0] <= c_type.shape[0],
            x_type.shape[1] == 4 * c_type.shape[1],
        )
        for axis in range(2, type_check.eval(c_type.ndim)):
            type_check.expect(x_type.shape[axis] == c_type.shape[axis])

    def forward(self, inputs: tuple[Array, Array]) -> tuple[Array, Array]:
        self.retain_inputs((0, 1))
        c_prev, x = inputs
        batch = len(x)
        gates = _gate_view(x)
        xp = backend.get_array_module(x)
        # Activated gates, gate-major and contiguous: (4, B, U, ...).
        acts = xp.empty((4,) + gates.shape[:2] + gates.shape[3:], dtype=x.dtype)
        if xp is numpy:
            c_next, h, tanh_c = _numpy_forward(c_prev, gates, acts, batch)
        else:
            c_next, h, tanh_c = _cupy_forward(c_prev, gates, acts, batch)
        c_next[batch:] = c_prev[batch:]
        self._acts = acts
        self._tanh_c = tanh_c
        return c_next, h

    def backward(self, indexes: tuple[int, ...],
                 grad_outputs: tuple[Variable | None, Variable | None]
                 ) -> tuple[Variable, Variable]:
        c_prev, x = self.get_retained_inputs()
        gc, gh = grad_outputs
        xp = backend.get_array_module(x)
        # An output nobody used gets no gradient; it contributes zero.
        if gc is None:
            gc = xp.zeros_like(c_prev.array)
        if gh is None:
            gh = xp.zeros_like(self._tanh_c)
        node = GradClipLSTMGrad(self.clip_min, self.clip_max, self._acts, self._tanh_c)
        return node.apply((c_prev, x, gc, gh))


class GradClipLSTMGrad(function_node.FunctionNode):
    """Gradient of :class:`GradClipLSTM`; differentiable itself, so double backprop works.

    Inputs are ``(c_prev, x, gc, gh)``, outputs ``(gc_prev, gx)`` with ``gx`` clipped. Its
    own backward is composed of differentiable Chainer functions, with the gradient of ``gx``
    zero wherever the clip was active.

    Args:
        clip_min (float or None): Lower bound of ``gx``.
        clip_max (float or None): Upper bound of ``gx``.
        acts (ndarray): The activated gates of the forward pass, ``(4, B, U, ...)``.
        tanh_c (ndarray): ``tanh(c)`` of the forward pass, ``(B, U, ...)``.
    """

    def __init__(self, clip_min: float | None, clip_max: float | None, acts: Array,
                 tanh_c: Array) -> None:
        self.clip_min = clip_min
        self.clip_max = clip_max
        self._acts = acts
        self._tanh_c = tanh_c
        self._mask: Array | None = None

    def forward(self, inputs: tuple[Array, Array, Array, Array]) -> tuple[Array, Array]:
        self.retain_inputs((0, 1, 2, 3))
        c_prev, x, gc, gh = inputs
        batch = len(x)
        xp = backend.get_array_module(x)
        # C-contiguous whatever the inputs' layout: the in-place clip relies on it.
        gc_prev = xp.empty(c_prev.shape, c_prev.dtype)
        gx = xp.empty(x.shape, x.dtype)
        gx_gates = _gate_view(gx)
        clipping = self.clip_min is not None or self.clip_max is not None
        # The mask is only needed if this node will be differentiated (double backprop).
        need_mask = clipping and chainer.config.enable_backprop
        if xp is numpy:
            _numpy_backward(c_prev, self._acts, self._tanh_c, gc, gh, gc_prev, gx_gates,
                            batch)
            if need_mask:
                self._mask = self._inside_bounds(gx)
            if clipping:
                _numpy_clip(gx, self.clip_min, self.clip_max)
        else:
            inf = float('inf')
            low = -inf if self.clip_min is None or need_mask else self.clip_min
            high = inf if self.clip_max is None or need_mask else self.clip_max
            _cupy_backward(c_prev, self._acts, self._tanh_c, gc, gh, gc_prev, gx_gates,
                           low, high, batch)
            if need_mask:
                self._mask = self._inside_bounds(gx)
                if self.clip_min is not None:
                    xp.maximum(gx, self.clip_min, out=gx)
                if self.clip_max is not None:
                    xp.minimum(gx, self.clip_max, out=gx)
        gc_prev[batch:] = gc[batch:]
        return gc_prev, gx

    def _inside_bounds(self, raw: Array) -> Array:
        inside: Array | bool = True
        if self.clip_min is not None:
            inside = raw >= raw.dtype.type(self.clip_min)
        if self.clip_max is not None:
            inside = inside & (raw <= raw.dtype.type(self.clip_max))
        return inside

    def backward(self, indexes: tuple[int, ...],
                 grad_outputs: tuple[Variable | None, Variable | None]
                 ) -> tuple[Variable, Variable, Variable, Variable]:
        return _grad_of_lstm_grad(self.get_retained_inputs(), grad_outputs, self._mask)


def _grad_of_lstm_grad(inputs: tuple[Variable, Variable, Variable, Variable],
                       grad_outputs: tuple[Variable | None, Variable | None],
                       mask: Array | None) -> tuple[Variable, Variable, Variable, Variable]:
    """Vector-Jacobian product of ``(c_prev, x, gc, gh) -> (gc_prev, gx_unclipped)``.

    Written with differentiable functions, so it can be differentiated again. ``mask`` (or
    None) zeroes the incoming gradient of ``gx`` where the clip was active.
    """
    F = chainer.functions
    c_prev, x, gc, gh = inputs
    ggc_prev, ggx = grad_outputs
    batch = len(x)
    zeros = x.xp.zeros
    if ggc_prev is None:
        ggc_prev = chainer.Variable(zeros(c_prev.shape, c_prev.dtype))
    if ggx is None:
        ggx = chainer.Variable(zeros(x.shape, x.dtype))
    elif mask is not None:
        ggx = ggx * mask.astype(x.dtype)

    gate_shape = (batch, x.shape[1] // 4, 4) + x.shape[2:]
    a, i, f, o = F.separate(F.reshape(x, gate_shape), axis=2)
    a, i, f, o = F.tanh(a), F.sigmoid(i), F.sigmoid(f), F.sigmoid(o)
    va, vi, vf, vo = F.separate(F.reshape(ggx, gate_shape), axis=2)
    if batch < len(c_prev):
        cp, cp_rest = F.split_axis(c_prev, [batch], axis=0)
        u, u_rest = F.split_axis(ggc_prev, [batch], axis=0)
        gc_b = F.split_axis(gc, [batch], axis=0)[0]
    else:
        cp, u, gc_b, cp_rest, u_rest = c_prev, ggc_prev, gc, None, None

    c = a * i + f * cp
    t = F.tanh(c)
    dtanh_c = 1 - t * t
    da = 1 - a * a
    di = i * (1 - i)
    df = f * (1 - f)
    do = o * (1 - o)
    g = gh * o * dtanh_c + gc_b

    # Gradient flowing into g from every output that depends on it.
    gg = u * f + va * i * da + vi * a * di + vf * cp * df
    d_gh = gg * o * dtanh_c + vo * t * do
    d_o = gg * gh * dtanh_c + vo * gh * t * (1 - 2 * o)
    d_t = -2 * gg * gh * o * t + vo * gh * do
    d_c = d_t * dtanh_c
    d_a = -2 * va * g * i * a + vi * g * di + d_c * i
    d_i = va * g * da + vi * g * a * (1 - 2 * i) + d_c * a
    d_f = u * g + vf * g * cp * (1 - 2 * f) + d_c * cp
    d_cp = vf * g * df + d_c * f

    d_x = F.reshape(F.stack([d_a * da, d_i * di, d_f * df, d_o * do], axis=2), x.shape)
    if cp_rest is None:
        return d_cp, d_x, gg, d_gh
    # Rows past the batch only pass through: c_prev's rows there get no gradient.
    d_c_prev = F.concat([d_cp, chainer.Variable(zeros(cp_rest.shape, cp_rest.dtype))], axis=0)
    d_gc = F.concat([gg, u_rest], axis=0)
    return d_c_prev, d_x, d_gc, d_gh


def grad_clip_lstm(c_prev: VariableOrArray, x: VariableOrArray, clip_min: float | None = None,
                   clip_max: float | None = None) -> tuple[Variable, Variable]:
    """Long short-term memory unit with derivative clipping.

    The forward computation equals :func:`chainer.functions.lstm`. With the gates of unit
    ``u`` at channels ``4u + g`` of ``x`` (``g`` = 0, 1, 2, 3 for a, i, f, o):

    .. math::

        a &= \\tanh(x_a), \\quad i = \\sigma(x_i), \\quad f = \\sigma(x_f),
        \\quad o = \\sigma(x_o), \\\\
        c &= a \\odot i + f \\odot c_{prev}, \\qquad h = o \\odot \\tanh(c).

    In the backward pass the gradient with respect to ``x`` (the gate pre-activations) is
    clipped elementwise, :math:`\\nabla_x \\leftarrow \\min(\\max(\\nabla_x, c_{min}),
    c_{max})`, as in Graves (2013), section 2.1. The gradient with respect to ``c_prev`` is
    not clipped, so the cell state carries unclipped gradients back in time. The clip is
    fused into the backward computation; its derivative (for double backprop) is zero
    where the clip was active.

    Args:
        c_prev (:class:`~chainer.Variable` or ndarray): Previous cell state, shape
            ``(B_c, U, ...)``, float16, float32 or float64.
        x (:class:`~chainer.Variable` or ndarray): Gate pre-activations, shape
            ``(B, 4U, ...)`` with ``B <= B_c`` and the same dtype and trailing dimensions.
            Rows ``B:`` of ``c_prev`` are passed through to ``c`` unchanged.
        clip_min (float or None): Lower bound of the gradient with respect to ``x``;
            ``None`` leaves it unbounded below.
        clip_max (float or None): Upper bound; ``None`` leaves it unbounded above.

    Returns:
        tuple: ``(c, h)``, two :class:`~chainer.Variable`: the new cell state, shape
        ``(B_c, U, ...)``, and the output, shape ``(B, U, ...)``.

    Raises:
        ValueError: ``clip_min > clip_max``, checked when the function is called.
        TypeError: a bound that is not a real number, or ``c_prev`` or ``x`` that is
            not an array or a Variable (None, a list).
        chainer.utils.type_check.InvalidType: arrays of the wrong dtype or shape.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.functions import grad_clip_lstm
        >>> c_prev = np.zeros((2, 3), np.float32)
        >>> x = np.random.randn(2, 12).astype(np.float32)
        >>> c, h = grad_clip_lstm(c_prev, x, clip_min=-1.0, clip_max=1.0)
        >>> c.shape, h.shape
        ((2, 3), (2, 3))
    """
    check_array('c_prev', c_prev, 'c_prev')
    check_array('x', x, 'x')
    return GradClipLSTM(clip_min, clip_max).apply((c_prev, x))
