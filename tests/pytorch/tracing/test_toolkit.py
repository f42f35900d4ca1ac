"""researchutils' own functions and links converted: each equals Chainer's forward and
gradients over steps that carry the state, with the gradient clips active."""
from __future__ import annotations

from typing import Any

import chainer
import numpy

from researchutils.chainer.functions import average_k_step_squared_error
from researchutils.chainer.links import (
    ActionConditionedLSTM,
    ConvLSTM,
    DeconvolutionPS,
    GradClipLSTM,
)
from researchutils.pytorch import convert, write_source
from tests.pytorch.tracing.equality import compare, relative


def _x(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.RandomState(seed).uniform(-1, 1, shape).astype(numpy.float32)


class _Steps(chainer.Chain):
    """Three steps of a recurrent link from a zero state, then a k-step loss."""

    def __init__(self, link: chainer.Link, with_actions: bool = False) -> None:
        super().__init__()
        self.with_actions = with_actions
        with self.init_scope():
            self.cell = link

    def forward(self, *inputs: Any) -> Any:
        self.cell.reset_state()
        outputs = []
        for step in range(3):
            if self.with_actions:
                outputs.append(self.cell(inputs[0][:, step], inputs[1][:, step]))
            else:
                outputs.append(self.cell(inputs[0][:, step]))
        stacked = chainer.functions.stack(outputs, axis=1)
        return stacked, average_k_step_squared_error(stacked, stacked * 0.5 + 0.1, 3)


def _gradients(model: chainer.Link, inputs: list[numpy.ndarray]) -> dict[str, numpy.ndarray]:
    model.cleargrads()
    chainer.functions.sum(model(*inputs)[0] * 4.0).backward()
    return {path: param.grad.copy() for path, param in model.namedparams()}


def test_grad_clip_lstm_keeps_its_clip(tmp_path: Any) -> None:
    model = _Steps(GradClipLSTM(3, 4, clip_min=-0.02, clip_max=0.02))
    inputs = [_x(2, 3, 3)]
    clipped = _gradients(model, inputs)
    model.cell.clip_min, model.cell.clip_max = None, None
    open_ = _gradients(model, inputs)
    assert relative(clipped['/cell/upward/W'], open_['/cell/upward/W']) > 0.1
    model.cell.clip_min, model.cell.clip_max = -0.02, 0.02
    module = convert(model, inputs)
    assert 'toolkit.grad_clip_lstm' in write_source(module, str(tmp_path / 'steps.py'))
    compare(model, module, [_x(2, 3, 3, seed=1)])


def test_action_conditioned_lstm() -> None:
    model = _Steps(ActionConditionedLSTM(3, 4, action_size=2, clip_min=-0.05, clip_max=0.05),
                   with_actions=True)
    inputs = [_x(2, 3, 3), _x(2, 3, 2, seed=1)]
    compare(model, convert(model, inputs), [_x(2, 3, 3, seed=2), _x(2, 3, 2, seed=3)])


def test_conv_lstm_with_its_peepholes_and_clip(tmp_path: Any) -> None:
    model = _Steps(ConvLSTM(2, 3, 3, clip_min=-0.05, clip_max=0.05))
    inputs = [_x(2, 3, 2, 5, 5)]
    module = convert(model, inputs)
    assert 'ops.clip_gradient' in write_source(module, str(tmp_path / 'steps.py'))
    compare(model, module, [_x(2, 3, 2, 5, 5, seed=1)])


def test_deconvolution_ps() -> None:
    model = DeconvolutionPS(3, 2, 3, stride=2, pad=1)
    x = _x(2, 3, 4, 4)
    compare(model, convert(model, x), [_x(2, 3, 4, 4, seed=1)])
