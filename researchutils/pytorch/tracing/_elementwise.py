"""Table entries for Chainer's activations, arithmetic and reductions (one per FunctionNode
class name), each a torch expression. Tests: ``tests/pytorch/tracing/test_functions.py``."""
from __future__ import annotations

from collections.abc import Callable

from researchutils.pytorch.tracing._call import Call, literal

Entry = Callable[[Call], str]


def _unary(template: str) -> Entry:
    """An entry ``template.format(x)`` for a function of one input."""
    return lambda call: template.format(call.args[0])


def _binary(operator: str) -> Entry:
    return lambda call: '{} {} {}'.format(call.args[0], operator, call.args[1])


def _constant_left(operator: str) -> Entry:
    return lambda call: '{} {} {}'.format(call.lit('value'), operator, call.args[0])


def _constant_right(operator: str) -> Entry:
    return lambda call: '{} {} {}'.format(call.args[0], operator, call.lit('value'))


def _dims(call: Call) -> str:
    axis = call.attr('axis')
    if axis is None:
        return literal(tuple(range(len(call.in_shape(0)))))
    return literal(tuple(axis) if isinstance(axis, (tuple, list)) else (axis,))


def _reduce(function: str) -> Entry:
    def entry(call: Call) -> str:
        return 'torch.{}({}, dim={}, keepdim={})'.format(
            function, call.args[0], _dims(call), call.lit('keepdims', False))
    return entry


def _extreme(function: str) -> Entry:
    def entry(call: Call) -> str:
        return 'torch.{}({}, dim={}, keepdim={})'.format(
            function, call.args[0], _dims(call), call.lit('keepdims', False))
    return entry


def _prod(call: Call) -> str:
    axis = call.attr('axis')
    x = call.args[0]
    if axis is None:
        return 'torch.prod({})'.format(x)
    dims = axis if isinstance(axis, tuple) else (axis,)
    expression = x
    for dim in sorted((d % len(call.in_shape(0)) for d in dims), reverse=True):
        expression = 'torch.prod({}, dim={}, keepdim={})'.format(
            expression, dim, call.lit('keepdims', False))
    return expression


def _arg(function: str) -> Entry:
    def entry(call: Call) -> str:
        axis = call.attr('axis')
        if axis is None:
            return 'torch.{}({}).to(torch.int32)'.format(function, call.args[0])
        return 'torch.{}({}, dim={}).to(torch.int32)'.format(function, call.args[0], axis)
    return entry


def _softplus(call: Call) -> str:
    return 'functional.softplus({}, beta={})'.format(call.args[0], call.lit('beta'))


def _add(call: Call) -> str:
    return ' + '.join(call.args)


def _clip(call: Call) -> str:
    return 'torch.clamp({}, {}, {})'.format(call.args[0], call.lit('x_min'), call.lit('x_max'))


def _matmul(call: Call) -> str:
    a, b = call.args
    if call.attr('transa'):
        a = '{}.transpose(-1, -2)'.format(a)
    if call.attr('transb'):
        b = '{}.transpose(-1, -2)'.format(b)
    product = 'torch.matmul({}, {})'.format(a, b)
    return '{}.transpose(-1, -2)'.format(product) if call.attr('transc') else product


def _log_sum_exp(call: Call) -> str:
    return 'torch.logsumexp({}, dim={})'.format(call.args[0], _dims(call))


def _mean(call: Call) -> str:
    return 'torch.mean({}, dim={}, keepdim={})'.format(call.args[0], _dims(call),
                                                       call.lit('keepdims', False))


def _prelu(call: Call) -> str:
    x, weight = call.args
    extra = len(call.in_shape(0)) - 1 - len(call.in_shape(1))
    shaped = '{}.reshape({})'.format(weight, literal(call.in_shape(1) + (1,) * extra))
    return 'torch.where({x} >= 0, {x}, {x} * {w})'.format(x=x, w=shaped)


def _linear_interpolate(call: Call) -> str:
    p, x, y = call.args
    return '{p} * {x} + (1 - {p}) * {y}'.format(p=p, x=x, y=y)


ELEMENTWISE: dict[str, Entry] = {
    # activations
    'ReLU': _unary('torch.relu({})'),
    'Sigmoid': _unary('torch.sigmoid({})'),
    'Tanh': _unary('torch.tanh({})'),
    'Softplus': _softplus,
    'LeakyReLU': lambda call: 'functional.leaky_relu({}, {})'.format(call.args[0],
                                                                   call.lit('slope')),
    'ELU': lambda call: 'functional.elu({}, alpha={})'.format(call.args[0], call.lit('alpha')),
    'ClippedReLU': lambda call: 'torch.clamp({}, 0.0, {})'.format(call.args[0],
                                                                  call.lit('cap')),
    'HardSigmoid': _unary('ops.hard_sigmoid({})'),
    'PReLUFunction': _prelu,
    'LogSoftmax': lambda call: 'torch.log_softmax({}, dim={})'.format(call.args[0],
                                                                      call.lit('axis')),
    'Softmax': lambda call: 'torch.softmax({}, dim={})'.format(call.args[0], call.lit('axis')),
    # arithmetic
    'Add': _add,
    'Sub': _binary('-'),
    'Mul': _binary('*'),
    'Div': _binary('/'),
    'Neg': _unary('-{}'),
    'Absolute': _unary('torch.abs({})'),
    'AddConstant': _constant_right('+'),
    'SubFromConstant': _constant_left('-'),
    'MulConstant': _constant_right('*'),
    'DivFromConstant': _constant_left('/'),
    'PowVarConst': _constant_right('**'),
    'PowConstVar': _constant_left('**'),
    'PowVarVar': _binary('**'),
    'Maximum': lambda call: 'torch.maximum({}, {})'.format(*call.args),
    'Minimum': lambda call: 'torch.minimum({}, {})'.format(*call.args),
    'MatMul': _matmul,
    'LinearInterpolate': _linear_interpolate,
    'Clip': _clip,
    'Identity': lambda call: '({},)'.format(', '.join(call.args)) if len(call.args) > 1
    else call.args[0],
    'Copy': _unary('{}.clone()'),
    'Square': _unary('torch.square({})'),
    'Sqrt': _unary('torch.sqrt({})'),
    'RsqrtGPU': _unary('torch.rsqrt({})'),
    'Exp': _unary('torch.exp({})'),
    'Log': _unary('torch.log({})'),
    'Sin': _unary('torch.sin({})'),
    'Cos': _unary('torch.cos({})'),
    'Tan': _unary('torch.tan({})'),
    'Sinh': _unary('torch.sinh({})'),
    'Cosh': _unary('torch.cosh({})'),
    'Arcsin': _unary('torch.asin({})'),
    'Arccos': _unary('torch.acos({})'),
    'Arctan': _unary('torch.atan({})'),
    'sign': _unary('torch.sign({})'),
    # reductions
    'Sum': _reduce('sum'),
    'Mean': _mean,
    'Max': _extreme('amax'),
    'Min': _extreme('amin'),
    'Prod': _prod,
    'LogSumExp': _log_sum_exp,
    'ArgMax': _arg('argmax'),
    'ArgMin': _arg('argmin'),
}
