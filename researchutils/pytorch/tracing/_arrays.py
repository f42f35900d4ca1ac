"""Table entries for Chainer's array functions (shape, indexing, joining, splitting), each a
torch expression. Tests: ``tests/pytorch/tracing/test_functions.py``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from researchutils.pytorch.tracing._call import Call, literal

Entry = Callable[[Call], str]


def _index(call: Call, item: Any) -> str:
    if item is Ellipsis:
        return '...'
    if item is None:
        return 'None'
    if isinstance(item, slice):
        parts = ['' if part is None else literal(part)
                 for part in (item.start, item.stop, item.step)]
        return ':'.join(parts[:2]) + ('' if item.step is None else ':' + parts[2])
    if isinstance(item, (int, numpy.integer)):
        return literal(item)
    return '{}.long()'.format(call.constant(numpy.asarray(item)))


def _get_item(call: Call) -> str:
    slices = call.attr('slices')
    if not isinstance(slices, tuple):
        slices = (slices,)
    if not slices:
        return call.args[0]
    return '{}[{}]'.format(call.args[0], ', '.join(_index(call, item) for item in slices))


def _split_axis(call: Call) -> str:
    axis = call.attr('axis')
    size = call.in_shape(0)[axis]
    indices = call.attr('indices')
    if indices is None:
        sections = call.attr('sections')
        indices = [size // sections * i for i in range(1, sections)]
    bounds = [0] + [min(int(i), size) for i in indices] + [size]
    lengths = [max(end - start, 0) for start, end in zip(bounds, bounds[1:])]
    return 'torch.split({}, {}, dim={})'.format(call.args[0], literal(lengths), axis)


def _transpose(call: Call) -> str:
    axes = call.attr('axes')
    if axes is None:
        axes = tuple(reversed(range(len(call.in_shape(0)))))
    return '{}.permute({})'.format(call.args[0], literal(tuple(axes)))


def _rollaxis(call: Call) -> str:
    ndim = len(call.in_shape(0))
    axis, start = call.attr('axis') % ndim, call.attr('start')
    start = start % (ndim + 1) if start < 0 else start
    order = list(range(ndim))
    order.remove(axis)
    order.insert(start if start <= axis else start - 1, axis)
    return '{}.permute({})'.format(call.args[0], literal(tuple(order)))


def _squeeze(call: Call) -> str:
    axis = call.attr('axis')
    shape = call.in_shape(0)
    if axis is None:
        axis = tuple(i for i, size in enumerate(shape) if size == 1)
    axis = axis if isinstance(axis, tuple) else (axis,)
    return 'torch.squeeze({}, dim={})'.format(call.args[0], literal(tuple(axis)))


def _repeat(call: Call) -> str:
    repeats, axis = call.attr('repeats'), call.attr('axis')
    x = call.args[0]
    if axis is None:
        x, axis = '{}.reshape(-1)'.format(x), 0
    if len(repeats) == 1:
        return 'torch.repeat_interleave({}, {}, dim={})'.format(x, literal(repeats[0]), axis)
    counts = call.constant(numpy.asarray(repeats, numpy.int64))
    return 'torch.repeat_interleave({}, {}, dim={})'.format(x, counts, axis)


def _tile(call: Call) -> str:
    reps = call.attr('reps')
    return 'torch.tile({}, {})'.format(call.args[0], literal(tuple(reps)))


def _permutate(call: Call) -> str:
    indices = numpy.asarray(call.attr('indices'))
    if call.attr('inv'):
        indices = numpy.argsort(indices)
    return 'torch.index_select({}, {}, {}.long())'.format(
        call.args[0], call.attr('axis'), call.constant(indices))


def _pad(call: Call) -> str:
    width = numpy.broadcast_to(numpy.asarray(call.attr('pad_width')),
                               (len(call.in_shape(0)), 2))
    pairs = [int(value) for pair in reversed(width.tolist()) for value in pair]
    mode = call.attr('mode')
    if mode != 'constant':
        raise call.fail('only mode=\'constant\' pads in torch as in NumPy, got {!r}'.format(mode))
    value = call.attr('keywords', {}).get('constant_values', 0)
    return 'functional.pad({}, {}, value={})'.format(call.args[0], literal(pairs),
                                                    literal(float(numpy.asarray(value))))


def _resize(call: Call) -> str:
    mode = call.attr('mode', 'bilinear')
    size = (call.attr('out_H'), call.attr('out_W'))
    if mode == 'nearest':
        return 'functional.interpolate({}, size={}, mode=\'nearest\')'.format(
            call.args[0], literal(size))
    return 'functional.interpolate({}, size={}, mode=\'bilinear\', align_corners={})'.format(
        call.args[0], literal(size), call.lit('align_corners', True))


def _where(call: Call) -> str:
    condition = call.constant(numpy.asarray(call.attr('condition')))
    if len(call.args) == 3:    # Chainer versions with the condition as an input
        return 'torch.where({}.bool(), {}, {})'.format(*call.args)
    return 'torch.where({}.bool(), {}, {})'.format(condition, *call.args)


def _cast(call: Call) -> str:
    return '{}.to(torch.{})'.format(call.args[0], numpy.dtype(call.attr('type')).name)


def _stack_like(function: str) -> Entry:
    return lambda call: 'torch.{}([{}])'.format(function, ', '.join(call.args))


def _transpose_sequence(call: Call) -> str:
    lengths = [shape[0] for shape in call.step.in_shapes]
    rows = []
    for t in range(max(lengths, default=0)):
        items = ['{}[{}]'.format(arg, t) for arg, length in zip(call.args, lengths)
                 if length > t]
        rows.append('torch.stack([{}])'.format(', '.join(items)))
    return '({},)'.format(', '.join(rows)) if len(rows) == 1 else '({})'.format(', '.join(rows))


def _out_shape(call: Call) -> tuple[int, ...]:
    shape = call.step.out_shapes[0]
    assert shape is not None    # the output is used, so its node is alive
    return shape


def _broadcast_to(call: Call) -> str:
    return '{}.expand({})'.format(call.args[0], literal(_out_shape(call)))


def _reshape(call: Call) -> str:
    return '{}.reshape({})'.format(call.args[0], literal(_out_shape(call)))


def _space_depth(function: str) -> Entry:
    return lambda call: 'ops.{}({}, {})'.format(function, call.args[0], call.lit('r'))


def _separate(call: Call) -> str:
    return 'torch.unbind({}, dim={})'.format(call.args[0], call.lit('axis'))


ARRAYS: dict[str, Entry] = {
    'Reshape': _reshape,
    'ExpandDims': lambda call: 'torch.unsqueeze({}, {})'.format(call.args[0], call.lit('axis')),
    'Squeeze': _squeeze,
    'Transpose': _transpose,
    'Swapaxes': lambda call: 'torch.transpose({}, {}, {})'.format(
        call.args[0], call.lit('axis1'), call.lit('axis2')),
    'Moveaxis': lambda call: 'torch.movedim({}, {}, {})'.format(
        call.args[0], literal(tuple(call.attr('source'))),
        literal(tuple(call.attr('destination')))),
    'Rollaxis': _rollaxis,
    'BroadcastTo': _broadcast_to,
    'GetItem': _get_item,
    'SelectItem': lambda call: 'ops.select_item({}, {})'.format(*call.args),
    'Concat': lambda call: 'torch.cat([{}], dim={})'.format(', '.join(call.args),
                                                          call.lit('axis')),
    'Stack': lambda call: 'torch.stack([{}], dim={})'.format(', '.join(call.args),
                                                           call.lit('axis')),
    'Hstack': _stack_like('hstack'),
    'Vstack': _stack_like('vstack'),
    'Dstack': _stack_like('dstack'),
    'SplitAxis': _split_axis,
    'Separate': _separate,
    'TransposeSequence': _transpose_sequence,
    'Repeat': _repeat,
    'Tile': _tile,
    'Permutate': _permutate,
    'Pad': _pad,
    'ResizeImages': _resize,
    'Where': _where,
    'Cast': _cast,
    'Depth2Space': _space_depth('depth2space'),
    'Space2Depth': _space_depth('space2depth'),
    'Flip': lambda call: 'torch.flip({}, ({},))'.format(call.args[0], call.lit('axis')),
}
