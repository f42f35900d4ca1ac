"""convert: the traced module's names, its forward and gradients against Chainer's, its
argument checks. Models: tests/pytorch/tracing/models.py; the checks: equality.py."""
from __future__ import annotations

import numpy

from researchutils.pytorch import convert
from tests.pytorch.tracing import models
from tests.pytorch.tracing.equality import compare, torch


def _x(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.RandomState(seed).uniform(-1, 1, shape).astype(numpy.float32)


def test_mlp_parameters_are_named_after_the_links_paths() -> None:
    module = convert(models.MLP(), _x(2, 5))
    assert sorted(name for name, _ in module.named_parameters()) == [
        'l1.bias', 'l1.weight', 'l2.bias', 'l2.weight', 'l3.bias', 'l3.weight']
    assert all(isinstance(value, torch.nn.Parameter) and value.requires_grad
               for value in module.parameters())
    assert isinstance(module.l1, torch.nn.Linear)


def test_mlp_forward_and_gradients_equal_chainers() -> None:
    model = models.MLP()
    x = _x(3, 5)
    compare(model, convert(model, x), [_x(3, 5, seed=1)])
