"""Loss functions."""
from researchutils.chainer.functions.loss.average_k_step_squared_error import (  # noqa: F401
    AverageKStepSquaredError,
    average_k_step_squared_error,
)

__all__ = ['AverageKStepSquaredError', 'average_k_step_squared_error']
