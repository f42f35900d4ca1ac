"""A batch's arrays as a model gets them, for training and prediction alike (private).

Shared by :mod:`researchutils.chainer.models` (``prepare_batch`` and the closure's
results) and :mod:`researchutils.chainer.training` (the Predictor), so that a
batch is prepared, and a result read, the same way in training and validation.
"""
from __future__ import annotations

from collections.abc import Mapping

import chainer
import numpy
from chainer import backend

from researchutils._typing import Array, VariableOrArray


def send_arrays(batch: Mapping[str, VariableOrArray],
                devices: Mapping[str, chainer.backend.Device],
                default_device: chainer.backend.Device) -> dict[str, Array]:
    """Returns ``batch`` with each entry as an array on its device.

    Variables give their array; floating arrays become float32, integer and
    boolean ones keep their dtype (integer labels stay integer for
    ``softmax_cross_entropy``); any other dtype is refused. Entry ``key`` goes to
    ``devices.get(key, default_device)`` (:class:`chainer.backend.Device` objects).

    Raises:
        TypeError: An entry is not numeric; the message names its key.
    """
    prepared = {}
    for key, value in batch.items():
        if isinstance(value, chainer.Variable):
            value = value.array
        if backend.get_array_module(value) is numpy:
            value = numpy.asarray(value)
        if value.dtype.kind not in 'biuf':
            raise TypeError('batch[{!r}] must be numeric, got dtype {}'.format(key, value.dtype))
        if value.dtype.kind == 'f' and value.dtype != numpy.float32:
            value = value.astype(numpy.float32)
        prepared[key] = devices.get(key, default_device).send(value)
    return prepared


def to_float(value: object, kind: str, name: str) -> float:
    """A loss or metric result (Variable, 0-d or size-1 array, scalar) as a Python float."""
    if isinstance(value, chainer.Variable):
        value = value.array
    if backend.get_array_module(value) is not numpy:
        value = backend.CpuDevice().send(value)
    value = numpy.asarray(value)
    if value.size != 1:
        raise ValueError(
            '{} {!r} must return a scalar, got an array of shape {}'.format(
                kind, name, value.shape))
    return float(value.reshape(()))
