"""Average k-step squared error (Oh et al. 2015, "Action-Conditional Video Prediction
using Deep Networks in Atari Games", arXiv:1507.08750).

Tests: ``tests/chainer/functions/loss/test_average_k_step_squared_error.py``.
"""
from __future__ import annotations

import chainer
import numpy
from chainer import backend, function_node
from chainer.utils import type_check

from researchutils._checks import check_positive_int
from researchutils._typing import Array, Variable, VariableOrArray
from researchutils.chainer._array_checks import check_array


def _validate_k_step(k_step: int) -> int:
    return check_positive_int(k_step, 'k_step', type_error=ValueError)


class AverageKStepSquaredError(function_node.FunctionNode):
    """Sum of squared differences divided by ``2 * k_step``; see
    :func:`average_k_step_squared_error`.

    Args:
        k_step (int): Number of predicted steps, a positive integer.
    """

    def __init__(self, k_step: int) -> None:
        self.k_step = _validate_k_step(k_step)

    def check_type_forward(self, in_types: type_check.TypeInfoTuple) -> None:
        type_check._argname(in_types, ('x1', 'x2'))
        x1_type, x2_type = in_types
        type_check.expect(
            x1_type.dtype.kind == 'f',
            x1_type.dtype == x2_type.dtype,
            x1_type.shape == x2_type.shape,
        )

    def forward(self, inputs: tuple[Array, Array]) -> tuple[Array]:
        self.retain_inputs((0, 1))
        x1, x2 = inputs
        xp = backend.get_array_module(x1)
        diff = (x1 - x2).ravel()
        # float16 sums overflow and lose precision quickly: accumulate in float32.
        if diff.dtype == numpy.float16:
            diff = diff.astype(numpy.float32)
        total = diff.dot(diff) / (2 * self.k_step)
        return xp.asarray(total, dtype=x1.dtype),

    def backward(self, indexes: tuple[int, ...],
                 grad_outputs: tuple[Variable]) -> tuple[Variable, Variable]:
        x1, x2 = self.get_retained_inputs()
        gy, = grad_outputs
        F = chainer.functions
        coefficient = F.broadcast_to(gy, x1.shape) * (1.0 / self.k_step)
        diff = x1 - x2
        gx1 = coefficient * diff
        return gx1, -gx1


def average_k_step_squared_error(x1: VariableOrArray, x2: VariableOrArray,
                                 k_step: int) -> Variable:
    """Average k-step squared error of a k-step prediction.

    With predictions ``x1`` and targets ``x2`` over a batch ``i``, time steps ``t`` and
    prediction steps ``k``, as in Oh et al. (2015):

    .. math::

        L = \\frac{1}{2K} \\sum_{i, t, k} \\left\\| x_1 - x_2 \\right\\|^2,

    that is, the sum of squared differences over the whole arrays divided by
    ``2 * k_step``. The arrays may have any shape, as long as they share it.

    Args:
        x1 (:class:`~chainer.Variable` or ndarray): Predictions, float16, float32
            or float64, any shape.
        x2 (:class:`~chainer.Variable` or ndarray): Targets, same shape and dtype.
        k_step (int): Number of prediction steps K, a positive integer.

    Returns:
        ~chainer.Variable: A 0-dim variable of the input dtype. Differentiable (twice and
        more) with respect to both inputs.

    Raises:
        ValueError: ``k_step`` is not a positive integer.
        TypeError: ``x1`` or ``x2`` is not an array or a Variable (None, a list).
        chainer.utils.type_check.InvalidType: arrays of different dtypes or shapes.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.functions import average_k_step_squared_error
        >>> x1 = np.ones((2, 3), np.float32)
        >>> x2 = np.zeros((2, 3), np.float32)
        >>> float(average_k_step_squared_error(x1, x2, k_step=3).array)
        1.0
    """
    check_array('x1', x1, 'x1')
    check_array('x2', x2, 'x2')
    return AverageKStepSquaredError(k_step).apply((x1, x2))[0]
