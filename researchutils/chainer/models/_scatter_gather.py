"""Splitting a batch across devices and gathering the outputs back, for data parallelism.

:func:`scatter` cuts every array and Variable of a call's arguments into contiguous chunks, one
per device; :func:`gather` concatenates one output structure per device on one device. Both
recurse into tuples, lists (namedtuples too) and dicts, and keep Variables differentiable.
:class:`~researchutils.chainer.models.DataParallelChainerNetwork` exposes them as its
``_scatter`` and ``_gather`` (Delira's names).

Tests: ``tests/chainer/models/test_scatter_gather.py``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import chainer
import chainer.functions as F
from chainer import backend

from researchutils._chunks import chunk_bounds
from researchutils._typing import DeviceSpec, VariableOrArray

#: What the forward pass's arguments and outputs are made of: Variables and arrays, nested
#: in dicts, lists and tuples, beside other values. Any to a checker, as Chainer's objects
#: are.
_Structure: TypeAlias = Any


def to_devices(devices: Iterable[DeviceSpec], argument: str) -> list[chainer.backend.Device]:
    """``devices`` as :class:`chainer.backend.Device` objects; a ValueError names ``argument``."""
    try:
        return [chainer.get_device(device) for device in devices]
    except Exception as error:
        raise ValueError('{} must hold devices that chainer.get_device accepts, got {!r} ({})'
                         .format(argument, devices, error)) from error


def _is_array(value: object) -> bool:
    return isinstance(value, chainer.get_array_types())


def _device_of(value: VariableOrArray) -> chainer.backend.Device:
    if isinstance(value, chainer.Variable):
        return value.device
    return backend.get_device_from_array(value)


def _rebuild(template: _Structure, items: list[_Structure]) -> _Structure:
    """A list, tuple or namedtuple of the same type as ``template`` holding ``items``."""
    if hasattr(template, '_fields'):
        return type(template)(*items)
    return type(template)(items)


def _batch_sizes(value: _Structure, dim: int, sizes: set[int]) -> None:
    """Collect ``shape[dim]`` of every array and Variable in ``value`` into ``sizes``."""
    if isinstance(value, chainer.Variable) or _is_array(value):
        if value.ndim <= dim:
            raise ValueError('cannot split an input of shape {} along dim={}'.format(
                value.shape, dim))
        sizes.add(value.shape[dim])
    elif isinstance(value, dict):
        for item in value.values():
            _batch_sizes(item, dim, sizes)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _batch_sizes(item, dim, sizes)


def _scatter_value(value: _Structure, bounds: list[int], devices: list[chainer.backend.Device],
                   dim: int) -> list[_Structure]:
    """Split ``value`` into ``len(bounds) - 1`` chunks, chunk ``i`` on ``devices[i]``.

    ``bounds`` are the chunks' edges: 0, each chunk's end.
    """
    count = len(bounds) - 1
    if isinstance(value, chainer.Variable):
        pieces = [value] if count == 1 else F.split_axis(value, bounds[1:-1], axis=dim)
        return [piece if piece.device == device else F.copy(piece, device)
                for piece, device in zip(pieces, devices)]
    if _is_array(value):
        index = (slice(None),) * dim
        return [device.send(value[index + (slice(start, stop),)])
                for start, stop, device in zip(bounds[:-1], bounds[1:], devices)]
    if isinstance(value, dict):
        per_key = {key: _scatter_value(item, bounds, devices, dim)
                   for key, item in value.items()}
        return [{key: chunks[i] for key, chunks in per_key.items()} for i in range(count)]
    if isinstance(value, (list, tuple)):
        per_item = [_scatter_value(item, bounds, devices, dim) for item in value]
        return [_rebuild(value, [chunks[i] for chunks in per_item]) for i in range(count)]
    return [value] * count


def scatter(inputs: Sequence[_Structure], kwargs: Mapping[str, _Structure],
            target_devices: Sequence[DeviceSpec], dim: int = 0
            ) -> tuple[list[tuple[_Structure, ...]], list[dict[str, _Structure]]]:
    """Split positional and keyword arguments into one chunk per device.

    Arrays and Variables are split along ``dim`` into contiguous chunks whose sizes differ
    by at most one, the first chunks taking the extra rows; Variables are split and copied
    with differentiable functions. Tuples, lists and dicts are split element-wise; other
    values are passed to every chunk as they are. With fewer rows than devices, one chunk
    per row is made; without any array, one chunk.

    Args:
        inputs (tuple): Positional arguments.
        kwargs (dict): Keyword arguments.
        target_devices (list): The devices, one per possible chunk.
        dim (int): The axis to split along; every array must have the same size there.

    Returns:
        tuple: ``(inputs_per_chunk, kwargs_per_chunk)``, two lists of the same length
        (at most ``len(target_devices)``): tuples of positional arguments and dicts of
        keyword arguments, chunk ``i`` on ``target_devices[i]``.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.models import DataParallelChainerNetwork
        >>> args, kwargs = DataParallelChainerNetwork._scatter(
        ...     (np.arange(5),), {'flag': True}, ['@numpy'] * 3)
        >>> [a[0].tolist() for a in args], kwargs[2]
        ([[0, 1], [2, 3], [4]], {'flag': True})
    """
    devices = to_devices(target_devices, 'target_devices')
    if not devices:
        raise ValueError('target_devices must not be empty, got {!r}'.format(target_devices))
    sizes: set[int] = set()
    _batch_sizes((inputs, kwargs), dim, sizes)
    if len(sizes) > 1:
        raise ValueError('inputs must share their size along dim={}, got sizes {}'.format(
            dim, sorted(sizes)))
    batch_size = sizes.pop() if sizes else 1
    chunks = chunk_bounds(batch_size, len(devices))
    bounds = [0] + [stop for _, stop in chunks]
    devices = devices[:len(chunks)]
    return (_scatter_value(tuple(inputs), bounds, devices, dim),
            _scatter_value(dict(kwargs), bounds, devices, dim))


def gather(predictions: Sequence[_Structure], dim: int, target_device: DeviceSpec
           ) -> _Structure:
    """Concatenate the replicas' outputs on one device.

    Recurses into dicts, lists and tuples; Variables are copied (differentiably) and
    concatenated along ``dim``, arrays likewise without a graph; 0-d values are stacked
    into shape ``(replicas,)``; ``None`` stays ``None``; other values are taken from the
    first replica.

    Args:
        predictions (list): One output structure per replica, all of the same shape.
        dim (int): The axis to concatenate along.
        target_device: Where the result goes (anything :func:`chainer.get_device`
            accepts).

    Returns:
        The gathered structure.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.models import DataParallelChainerNetwork
        >>> out = DataParallelChainerNetwork._gather(
        ...     [{'pred': np.zeros((2, 3))}, {'pred': np.ones((1, 3))}], 0, '@numpy')
        >>> out['pred'].shape
        (3, 3)
    """
    if not predictions:
        raise ValueError('predictions must not be empty, got {!r}'.format(predictions))
    return _gather_value(list(predictions), dim, chainer.get_device(target_device))


def _gather_value(values: list[_Structure], dim: int, device: chainer.backend.Device
                  ) -> _Structure:
    first = values[0]
    if first is None:
        return None
    if isinstance(first, dict):
        return {key: _gather_value([value[key] for value in values], dim, device)
                for key in first}
    if isinstance(first, (list, tuple)):
        return _rebuild(first, [_gather_value(list(items), dim, device)
                                for items in zip(*values)])
    if not (isinstance(first, chainer.Variable) or _is_array(first)):
        return first
    if any(isinstance(value, chainer.Variable) for value in values):
        pieces = [value if _device_of(value) == device else F.copy(value, device)
                  for value in values]
        if len(pieces) == 1:
            return chainer.as_variable(pieces[0])
        if first.ndim == 0:
            return F.stack(pieces)
        return F.concat(pieces, axis=dim)
    pieces = [device.send(value) for value in values]
    if len(pieces) == 1:
        return pieces[0]
    if first.ndim == 0:
        return device.xp.stack(pieces)
    return device.xp.concatenate(pieces, axis=dim)
