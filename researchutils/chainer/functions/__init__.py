"""Differentiable functions: the gradient-clipping LSTM and the k-step prediction loss.

Example:
    >>> from researchutils.chainer.functions import (
    ...     grad_clip_lstm, average_k_step_squared_error)
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'activation.grad_clip_lstm': ['GradClipLSTM', 'GradClipLSTMGrad', 'grad_clip_lstm'],
    'loss.average_k_step_squared_error': ['AverageKStepSquaredError',
                                          'average_k_step_squared_error'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.functions.activation.grad_clip_lstm import (
        GradClipLSTM as GradClipLSTM,
    )
    from researchutils.chainer.functions.activation.grad_clip_lstm import (
        GradClipLSTMGrad as GradClipLSTMGrad,
    )
    from researchutils.chainer.functions.activation.grad_clip_lstm import (
        grad_clip_lstm as grad_clip_lstm,
    )
    from researchutils.chainer.functions.loss.average_k_step_squared_error import (
        AverageKStepSquaredError as AverageKStepSquaredError,
    )
    from researchutils.chainer.functions.loss.average_k_step_squared_error import (
        average_k_step_squared_error as average_k_step_squared_error,
    )
