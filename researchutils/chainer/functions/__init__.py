"""Differentiable functions: the gradient-clipping LSTM and the k-step prediction loss.

Example:
    >>> from researchutils.chainer.functions import (
    ...     grad_clip_lstm, average_k_step_squared_error)
"""
from researchutils.chainer.functions.activation.grad_clip_lstm import (  # noqa: F401
    GradClipLSTM,
    GradClipLSTMGrad,
    grad_clip_lstm,
)
from researchutils.chainer.functions.loss.average_k_step_squared_error import (  # noqa: F401
    AverageKStepSquaredError,
    average_k_step_squared_error,
)

__all__ = [
    'AverageKStepSquaredError',
    'GradClipLSTM',
    'GradClipLSTMGrad',
    'average_k_step_squared_error',
    'grad_clip_lstm',
]
