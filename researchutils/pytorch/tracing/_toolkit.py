"""Table entries for researchutils' own Chainer functions: each calls its torch twin of
:mod:`researchutils.pytorch.functions` (so GradClipLSTM's clip survives) or
:mod:`~researchutils.pytorch.tracing.ops`. Tests: ``tests/pytorch/tracing/test_toolkit.py``."""
from __future__ import annotations

from collections.abc import Callable

from researchutils.pytorch.tracing._call import Call

Entry = Callable[[Call], str]


def _grad_clip_lstm(call: Call) -> str:
    return 'toolkit.grad_clip_lstm({}, {}, clip_min={}, clip_max={})'.format(
        call.args[0], call.args[1], call.lit('clip_min'), call.lit('clip_max'))


def _average_k_step_squared_error(call: Call) -> str:
    return 'toolkit.average_k_step_squared_error({}, {}, {})'.format(
        call.args[0], call.args[1], call.lit('k_step'))


def _clip_gradient(call: Call) -> str:
    return 'ops.clip_gradient({}, {}, {})'.format(call.args[0], call.lit('low'),
                                                  call.lit('high'))


TOOLKIT: dict[str, Entry] = {
    'GradClipLSTM': _grad_clip_lstm,
    'AverageKStepSquaredError': _average_k_step_squared_error,
    '_ClipGradient': _clip_gradient,
}
