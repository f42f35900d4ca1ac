"""Differentiable functions: the gradient-clipping LSTM and the k-step prediction loss.

Example:
    >>> from researchutils.chainer.functions import (
    ...     grad_clip_lstm, average_k_step_squared_error)
"""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'activation.grad_clip_lstm': ['GradClipLSTM', 'GradClipLSTMGrad', 'grad_clip_lstm'],
    'loss.average_k_step_squared_error': ['AverageKStepSquaredError',
                                          'average_k_step_squared_error'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
