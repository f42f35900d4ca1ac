"""ONNX converters for the Chainer functions onnx_chainer lacks: the LSTM cells, and the two
functions researchutils' links use besides them.

Each converter is what onnx_chainer's ``external_converters`` hook calls: ``converter(params)``
with an ``onnx_chainer.functions.converter.FunctionConverterParams`` (``func``, the
FunctionNode; ``input_names``, ``output_names``; ``opset_version``; ``context``) returning
the ONNX nodes, the last of which write ``params.output_names``. :data:`CONVERTERS` maps
FunctionNode class names to them; :func:`researchutils.chainer.onnx.export` adds it to
onnx_chainer's own table. Importing this module imports neither onnx nor onnx_chainer (the
converters import onnx_chainer when called). Tests: ``tests/chainer/onnx/test_export.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy

__all__ = ['CONVERTERS']

# ONNX's largest int64, the end of a Slice that runs to the front with step -1.
_INT64_MAX = 2 ** 63 - 1


def _const(params: Any, values: Sequence[int], label: str) -> str:
    """An int64 Constant node; its name is unique within the function being converted."""
    label = '{}_{}'.format(label, len(params.context.constants))
    return str(params.context.add_const(numpy.array(values, numpy.int64), label))


def _slice(builder: Any, params: Any, name: str, axis: int, start: int, end: int,
           step: int = 1) -> str:
    """``name[start:end:step]`` along ``axis``: Slice's attributes before opset 10, its
    inputs from 10 (the only form with a step)."""
    if params.opset_version < 10:
        if step != 1:
            raise ValueError('a reversed Slice needs ONNX opset 10 or later, got opset_version='
                             '{}'.format(params.opset_version))
        return builder.op('Slice', [name], starts=[start], ends=[end], axes=[axis])
    bounds = [_const(params, [value], label) for value, label in (
        (start, 'starts'), (end, 'ends'), (axis, 'axes'), (step, 'steps'))]
    return builder.op('Slice', [name] + bounds)


def _reshape(builder: Any, params: Any, name: str, shape: Sequence[int], label: str) -> str:
    return builder.op('Reshape', [name, _const(params, shape, label)])


def _convert_lstm(params: Any) -> tuple[Any, ...]:
    """The step of :func:`chainer.functions.lstm` and of
    :func:`~researchutils.chainer.functions.grad_clip_lstm` (whose clip acts in the
    backward pass only): inputs ``(c_prev, x)``, outputs ``(c, h)``.

    ``x`` has shape ``(B, 4U, ...)``, gate ``g`` (a, i, f, o) of unit ``u`` at channel
    ``4u + g``: it is read as ``(B, U, 4, ...)`` and split on that axis. ``c_prev`` may have
    more rows than ``x`` (``B_c >= B``); its rows ``B:`` pass to ``c`` unchanged.

    .. math::

        c = \\tanh(x_a) \\sigma(x_i) + \\sigma(x_f) c_{prev}, \\qquad
        h = \\sigma(x_o) \\tanh(c)

    Args:
        params: onnx_chainer's ``FunctionConverterParams``.

    Returns:
        tuple: the ONNX nodes, which write ``c`` and ``h``.
    """
    from onnx_chainer import onnx_helper

    c_prev, x = params.input_names
    c_name, h_name = params.output_names
    c_shape = tuple(params.func.inputs[0].shape)
    batch, units, rest = params.func.inputs[1].shape[0], c_shape[1], c_shape[2:]
    builder = onnx_helper.GraphBuilder()
    gates = _reshape(builder, params, x, (batch, units, 4) + rest, 'gates_shape')
    # Split's sizes are an attribute up to opset 12, the last that export offers.
    split = builder.op('Split', [gates], num_outputs=4, axis=2, split=[1, 1, 1, 1])
    a, i, f, o = (_reshape(builder, params, gate, (batch, units) + rest, 'gate_shape')
                  for gate in split)
    whole = c_shape[0] == batch
    c_used = c_prev if whole else _slice(builder, params, c_prev, 0, 0, batch)
    products = [builder.op('Mul', [builder.op('Tanh', [a]), builder.op('Sigmoid', [i])]),
                builder.op('Mul', [builder.op('Sigmoid', [f]), c_used])]
    if whole:
        cell = builder.op_output_named('Add', products, [c_name])
    else:
        cell = builder.op('Add', products)
        kept = _slice(builder, params, c_prev, 0, batch, c_shape[0])
        builder.op_output_named('Concat', [cell, kept], [c_name], axis=0)
    builder.op_output_named(
        'Mul', [builder.op('Sigmoid', [o]), builder.op('Tanh', [cell])], [h_name])
    return builder.nodes()


def _convert_identity(params: Any) -> tuple[Any, ...]:
    """A function that is the identity in the forward pass (ConvLSTM's gradient clip).

    Args:
        params: onnx_chainer's ``FunctionConverterParams``.

    Returns:
        tuple: one Identity node.
    """
    from onnx_chainer import onnx_helper
    return onnx_helper.make_node('Identity', params.input_names, params.output_names),


def _convert_flip(params: Any) -> tuple[Any, ...]:
    """:func:`chainer.functions.flip`: the input reversed along ``func.axis`` (opset >= 10).

    Args:
        params: onnx_chainer's ``FunctionConverterParams``.

    Returns:
        tuple: the ONNX nodes; the last writes the output.
    """
    from onnx_chainer import onnx_helper
    builder = onnx_helper.GraphBuilder()
    ndim = len(params.func.inputs[0].shape)
    reversed_ = _slice(builder, params, params.input_names[0], params.func.axis % ndim,
                       -1, -_INT64_MAX, step=-1)
    builder.op_output_named('Identity', [reversed_], params.output_names)
    return builder.nodes()


#: FunctionNode class name -> converter: what :func:`~researchutils.chainer.onnx.export`
#: adds to onnx_chainer's converters. ``LSTM`` is :func:`chainer.functions.lstm` (and so
#: :class:`chainer.links.LSTM`), ``GradClipLSTM`` the function of
#: :func:`~researchutils.chainer.functions.grad_clip_lstm` (GradClipLSTM,
#: ActionConditionedLSTM, ConvLSTM), ``_ClipGradient`` ConvLSTM's clip of its output gate's
#: gradient, ``Flip`` :func:`chainer.functions.flip` (DeconvolutionPS on the CPU).
CONVERTERS: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    'LSTM': _convert_lstm,
    'GradClipLSTM': _convert_lstm,
    '_ClipGradient': _convert_identity,
    'Flip': _convert_flip,
}
