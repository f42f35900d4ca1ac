"""Loss functions, one module each (as in ``chainer.functions.loss``).

The names here are modules: ``average_k_step_squared_error`` is the module
:mod:`researchutils.chainer.functions.loss.average_k_step_squared_error`. The flat
names live one level up, in :mod:`researchutils.chainer.functions`.

Example:
    >>> from researchutils.chainer.functions.loss import average_k_step_squared_error
    >>> average_k_step_squared_error.average_k_step_squared_error.__name__
    'average_k_step_squared_error'
"""
from researchutils.chainer.functions.loss import average_k_step_squared_error

__all__ = ['average_k_step_squared_error']
