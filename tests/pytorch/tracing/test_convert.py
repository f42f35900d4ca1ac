"""convert: the traced module's names, its forward and gradients against Chainer's, its
argument checks. Models: tests/pytorch/tracing/models.py; the checks: equality.py."""
from __future__ import annotations

import inspect
from typing import Any

import chainer
import chainer.functions as F
import numpy
import pytest

from researchutils.pytorch import convert
from tests.pytorch.tracing import models
from tests.pytorch.tracing.equality import compare, relative, torch


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


class _Step(chainer.Chain):
    """An L.LSTM step, its state read from the link."""

    def __init__(self) -> None:
        super().__init__()
        with self.init_scope():
            self.lstm = chainer.links.LSTM(3, 4)

    def forward(self, x: Any) -> Any:
        return self.lstm(x)


def test_states_become_inputs_and_outputs_and_the_model_keeps_its_state() -> None:
    model = _Step()
    model.lstm.set_state(chainer.Variable(_x(2, 4, seed=1)), chainer.Variable(_x(2, 4, seed=2)))
    before = model.lstm.c.array.copy()
    module = convert(model, _x(2, 3), states=['/lstm'])
    assert model.lstm.c.array.tolist() == before.tolist()
    assert list(inspect.signature(module.forward).parameters) == ['input', 'lstm_c', 'lstm_h']
    compare(model, module, [_x(2, 3, seed=3)],
            states=[(model.lstm, _x(2, 4, seed=4), _x(2, 4, seed=5))])


def test_training_trace_keeps_batch_norm_statistics_and_updates_them_as_chainer() -> None:
    model = models.VGGBlock(3, 3)
    x = _x(2, 2, 5, 5)
    model(x)    # the convolution's input size
    statistics = model.bn.avg_mean.copy()
    module = convert(model, x, train=True)
    assert model.bn.avg_mean.tolist() == statistics.tolist()
    assert module.training and isinstance(module.bn, torch.nn.BatchNorm2d)
    compare(model, module, [_x(2, 2, 5, 5, seed=1)], train=True)
    assert relative(module.bn.running_mean.numpy(), model.bn.avg_mean) <= 1e-6
    assert relative(module.bn.running_var.numpy(), model.bn.avg_var) <= 1e-6
    compare(model, module, [_x(2, 2, 5, 5, seed=2)], train=False)


def test_unknown_function_is_named_with_its_link_before_anything_is_built() -> None:
    class Cumulated(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.inner = _Step()

        def forward(self, x: Any) -> Any:
            return F.cumsum(self.inner(x), axis=1)

    with pytest.raises(ValueError, match=r'no torch operation for Cumsum \(called in / '
                                         r'\(Cumulated\)\)'):
        convert(Cumulated(), _x(2, 3))


@pytest.mark.parametrize('bad, error, words', [
    (dict(model=object()), TypeError, 'model must be a chainer.Link'),
    (dict(args='x'), TypeError, 'args'),
    (dict(args=[[1.0]]), TypeError, 'args'),
    (dict(train='yes'), TypeError, 'train'),
    (dict(states='/lstm'), TypeError, r"states.*write \['/lstm'\]"),
    (dict(states=['/nothing']), ValueError, "'/nothing' is not a link"),
    (dict(states=['/lstm']), ValueError, 'holds no state'),
    (dict(states=['/']), ValueError, 'no LSTM state'),
    (dict(input_names=['a', 'b']), ValueError, 'input_names has 2 names for 1 inputs'),
    (dict(input_names='a'), TypeError, 'input_names'),
    (dict(output_names=['a', 'b']), ValueError, 'output_names has 2 names'),
    (dict(output_names=[3]), TypeError, 'output_names'),
])
def test_bad_arguments_are_named(bad: dict[str, Any], error: type, words: str) -> None:
    arguments: dict[str, Any] = dict(model=_Step(), args=_x(2, 3))
    arguments.update(bad)
    with pytest.raises(error, match=words):
        convert(**arguments)


def test_clashing_names_are_refused() -> None:
    model = _Step()
    model.lstm.set_state(chainer.Variable(_x(2, 4)), chainer.Variable(_x(2, 4)))
    with pytest.raises(ValueError, match='distinct names'):
        convert(model, _x(2, 3), states=['/lstm'], input_names=['lstm/c'])


def test_a_link_converted_alone_keeps_chainers_names() -> None:
    link = chainer.links.Linear(3, 2)
    module = convert(link, _x(2, 3))
    assert sorted(name for name, _ in module.named_parameters()) == ['W', 'b']
    compare(link, module, [_x(4, 3, seed=1)])
