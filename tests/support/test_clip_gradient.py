"""Tests of the gradient clipping reference in tests/support/clip_gradient.py."""
import chainer
import chainer.functions as F
import numpy

from tests.support.clip_gradient import clip_gradient


def test_forward_is_the_identity():
    x = numpy.array([-2.0, 0.5, 3.0], numpy.float32)
    numpy.testing.assert_array_equal(clip_gradient(chainer.Variable(x), -1.0, 1.0).array, x)


def test_backward_clips_the_gradient_to_the_bounds():
    x = chainer.Variable(numpy.zeros(3, numpy.float32))
    F.sum(clip_gradient(x, -1.0, 1.0) * numpy.array([-5.0, 0.25, 5.0], numpy.float32)).backward()
    numpy.testing.assert_array_equal(x.grad, [-1.0, 0.25, 1.0])


def test_none_bounds_leave_the_gradient_unclipped():
    x = chainer.Variable(numpy.zeros(2, numpy.float32))
    F.sum(clip_gradient(x, None, None) * numpy.array([-5.0, 5.0], numpy.float32)).backward()
    numpy.testing.assert_array_equal(x.grad, [-5.0, 5.0])
