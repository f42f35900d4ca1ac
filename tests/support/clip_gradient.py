"""A test reference for gradient clipping: the identity forward, the gradient clipped backward.

Built from Chainer's own F.clip, independently of researchutils, for the tests of the links
whose gate gradients are clipped.
"""
import chainer.functions as F
import numpy
from chainer import function_node


class _ClipGradient(function_node.FunctionNode):

    def __init__(self, low, high):
        self.low, self.high = low, high

    def forward(self, inputs):
        return inputs[0],

    def backward(self, indexes, grad_outputs):
        return F.clip(grad_outputs[0], self.low, self.high),


def clip_gradient(x, low, high):
    """``x`` unchanged, with the gradient flowing back through it clipped to ``[low, high]``.

    ``None`` for a bound means no bound.
    """
    low = -numpy.inf if low is None else low
    high = numpy.inf if high is None else high
    return _ClipGradient(low, high).apply((x,))[0]
