"""Checks of the tensors a torch twin is called with, naming the argument and what it got.

The Chainer side refuses a wrong array with Chainer's ``InvalidType``; torch has no such
machinery, so the twins raise TypeError (not a tensor, another dtype) or ValueError (a shape
that does not fit) with the argument's name and the values.
Tests: ``tests/pytorch/test_functions.py`` and ``tests/pytorch/nn/`` (the refusals).
"""
from __future__ import annotations

import torch


def check_float_tensor(value: object, name: str) -> torch.Tensor:
    """Returns ``value``, a floating point ``torch.Tensor``; TypeError for anything else.

    Example:
        >>> import torch
        >>> check_float_tensor(torch.zeros(2, dtype=torch.int64), 'x')
        Traceback (most recent call last):
        ...
        TypeError: x must be a floating point torch.Tensor, got dtype torch.int64
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError('{} must be a floating point torch.Tensor, got {}'.format(
            name, type(value).__name__))
    if not value.dtype.is_floating_point:
        raise TypeError('{} must be a floating point torch.Tensor, got dtype {}'.format(
            name, value.dtype))
    return value


def check_same_dtype(value: torch.Tensor, name: str, reference: torch.Tensor,
                     reference_name: str) -> None:
    """TypeError unless tensors ``value`` and ``reference`` share a dtype (never converted).

    Example:
        >>> import torch
        >>> check_same_dtype(torch.zeros(1), 'x', torch.zeros(1), 'c_prev')
    """
    if value.dtype != reference.dtype:
        raise TypeError('{} must have the dtype of {}, {}, got {}'.format(
            name, reference_name, reference.dtype, value.dtype))
