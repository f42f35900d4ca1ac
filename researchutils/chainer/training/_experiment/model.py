"""The model of a ChainerExperiment run on its devices, and the Predictor of a model.

``gpu_ids`` entries become Chainer devices once, at construction (:func:`resolve_device`);
each run builds its model from the "model" parameters with the experiment's seed, leaving the
global NumPy random state as it was, and places it on this process's devices (one per
ChainerMN rank, or a DataParallelChainerNetwork over several). Tests:
``tests/chainer/training/_experiment/test_model.py``.
"""
from __future__ import annotations

import inspect
import numbers
from collections.abc import Sequence
from typing import Any

import chainer
import numpy

from researchutils.chainer.training.predictor import Predictor


def resolve_device(gpu_id: int | str) -> chainer.backend.Device:
    """The Chainer device of one ``gpu_ids`` entry (a GPU number or a device name)."""
    name = '@cupy:{}'.format(gpu_id) if isinstance(gpu_id, numbers.Integral) else gpu_id
    try:
        return chainer.get_device(name)
    except Exception as error:
        raise ValueError('gpu_ids entry {!r} is not a usable device ({}): use [] for the CPU, '
                         'GPU numbers with CuPy installed, or device names such as '
                         "'@numpy'".format(gpu_id, error)) from error


def rank_devices(devices: list[chainer.backend.Device],
                 comm: Any) -> list[chainer.backend.Device]:
    """The devices this process trains on: the CPU without ``gpu_ids``, one per ChainerMN rank."""
    if not devices:
        return [chainer.get_device('@numpy')]
    if comm is not None:
        return [devices[comm.intra_rank % len(devices)]]
    return devices


def build_model(model_cls: type[chainer.Link], kwargs: dict[str, Any], seed: int | None,
                devices: Sequence[chainer.backend.Device]) -> chainer.Link:
    """``model_cls(**kwargs)``, its weights drawn with ``seed``, on ``devices``.

    Raises:
        TypeError: ``kwargs`` (the "model" parameters) do not fit ``model_cls``.
    """
    state = numpy.random.get_state()
    if seed is not None:
        numpy.random.seed(seed)
    try:
        model = model_cls(**kwargs)
    except TypeError as error:
        raise TypeError('the "model" parameters {!r} do not fit {}: {}'.format(
            kwargs, model_cls.__name__, error)) from error
    finally:
        numpy.random.set_state(state)
    if len(devices) > 1:
        from researchutils.chainer.models import DataParallelChainerNetwork
        return DataParallelChainerNetwork(model, devices)
    model.to_device(devices[0])
    return model


def predictor(model: chainer.Link, model_cls: type[chainer.Link],
              key_mapping: dict[str, str] | None) -> Predictor:
    """The Predictor of ``model``: ``key_mapping``, or ``model_cls.forward``'s first argument
    mapped to "data"."""
    if key_mapping is None:
        arguments = list(inspect.signature(model_cls.forward).parameters)[1:]
        if not arguments:
            raise ValueError('{}.forward takes no argument to map; pass key_mapping'.format(
                model_cls.__name__))
        key_mapping = {arguments[0]: 'data'}
    return Predictor(model, key_mapping)
