"""researchutils.pytorch.DeconvolutionPS equals researchutils.chainer.links.DeconvolutionPS:
given the twin's weights, the output and every input and parameter gradient."""
import chainer
import numpy as np
import pytest

torch = pytest.importorskip('torch')

import researchutils.chainer.links as chainer_links  # noqa: E402
from researchutils.pytorch import DeconvolutionPS  # noqa: E402
from tests.support.torch_twins import (  # noqa: E402
    assert_equal_to_chainer,
    assert_gradients_equal,
    copy_chainer_parameters,
    to_torch,
)

# (in_channels, out_channels, ksize, stride, pad, nobias, outsize, input height and width)
CASES = [
    (4, 3, 4, 2, 1, False, None, (5, 6)),
    (3, 2, 3, (2, 3), (1, 0), False, None, (4, 5)),   # unequal strides
    (5, 2, 3, 1, 1, False, None, (4, 4)),             # no shuffle
    (4, 3, 4, 2, 1, True, (11, 12), (5, 6)),          # outsize, no bias
    (16, 1, 3, 2, 1, False, None, (3, 4)),            # few output channels (col2im on Chainer)
    (2, 2, 5, 3, 2, False, None, (3, 3)),             # kernel not a multiple of the stride
]


def _compare(link, module, x, seed):
    weight = np.random.RandomState(seed).randn(*link(x).shape).astype(np.float32)
    x_var = chainer.Variable(x)
    y = link(x_var)
    link.cleargrads()
    chainer.functions.sum(y * weight).backward()
    x_torch = to_torch(x, True)
    y_torch = module(x_torch)
    (y_torch * to_torch(weight)).sum().backward()
    assert_equal_to_chainer(y_torch, y.array, 1e-6, 'output')
    assert_equal_to_chainer(x_torch.grad, x_var.grad, 1e-5, 'gradient of x')
    return assert_gradients_equal(link, module, 1e-5)


@pytest.mark.parametrize('case', CASES)
def test_output_and_gradients_equal_chainers(case):
    in_channels, out_channels, ksize, stride, pad, nobias, outsize, size = case
    arguments = dict(ksize=ksize, stride=stride, pad=pad, nobias=nobias, outsize=outsize)
    link = chainer_links.DeconvolutionPS(in_channels, out_channels, **arguments)
    module = DeconvolutionPS(in_channels, out_channels, **arguments)
    copy_chainer_parameters(link, module)
    x = np.random.RandomState(0).randn(2, in_channels, *size).astype(np.float32)
    names = _compare(link, module, x, 1)
    assert names == (['conv.weight'] if nobias else ['conv.weight', 'conv.bias'])


def test_lazy_in_channels_come_from_the_first_call():
    link = chainer_links.DeconvolutionPS(None, 3, 4, 2, 1)
    module = DeconvolutionPS(None, 3, 4, 2, 1)
    x = np.random.RandomState(2).randn(1, 5, 3, 3).astype(np.float32)
    link(x)
    module(to_torch(x))
    assert tuple(module.conv.weight.shape) == (12, 5, 2, 2)
    assert type(module.conv) is torch.nn.Conv2d
    copy_chainer_parameters(link, module)
    _compare(link, module, x, 3)


def test_parameters_are_initialized_as_chainer_initializes_them():
    torch.manual_seed(0)
    module = DeconvolutionPS(64, 8, ksize=4, stride=2)
    assert module.conv.bias.eq(0).all()
    assert module.conv.weight.std().item() == pytest.approx((1 / (64 * 4)) ** 0.5, rel=0.05)
    custom = DeconvolutionPS(2, 1, 2, 2, initialW=0.5, initial_bias=torch.nn.init.ones_)
    assert custom.conv.weight.eq(0.5).all() and custom.conv.bias.eq(1).all()


@pytest.mark.parametrize('arguments', [
    dict(in_channels=0, out_channels=3, ksize=3), dict(in_channels=2, out_channels=3, ksize=0),
    dict(in_channels=2, out_channels=3, ksize=(3, 3, 3)),
    dict(in_channels=2, out_channels=3, ksize=3, stride=0),
    dict(in_channels=2, out_channels=3, ksize=3, pad=-1),
    dict(in_channels=2, out_channels=3, ksize=3, nobias='False'),
    dict(in_channels=2, out_channels=3, ksize=3, outsize=5),
    dict(in_channels=2, out_channels=3, ksize=3, outsize=(5, 0)),
    dict(in_channels=2, out_channels=3, ksize=3, initialW='zeros'),
])
def test_bad_arguments_are_refused_as_chainer_refuses_them(arguments):
    with pytest.raises((TypeError, ValueError)) as chainers:
        chainer_links.DeconvolutionPS(**arguments)
    with pytest.raises(type(chainers.value)) as ours:
        DeconvolutionPS(**arguments)
    if 'initialW' not in arguments:  # Chainer's message names Chainer's initializers
        assert str(ours.value) == str(chainers.value)


@pytest.mark.parametrize('arguments, shape', [
    (dict(ksize=3, stride=2, pad=3), (1, 2, 1, 1)),
    (dict(ksize=4, stride=2, pad=1, outsize=(20, 20)), (1, 2, 5, 5)),
])
def test_an_output_size_that_does_not_fit_is_refused_as_chainer_refuses_it(arguments, shape):
    with pytest.raises(ValueError) as chainers:
        chainer_links.DeconvolutionPS(2, 3, **arguments)(np.zeros(shape, np.float32))
    with pytest.raises(ValueError) as ours:
        DeconvolutionPS(2, 3, **arguments)(torch.zeros(shape))
    assert str(ours.value) == str(chainers.value)


def test_an_input_that_is_not_a_batch_of_maps_is_refused_naming_it():
    with pytest.raises(ValueError, match=r'x must be a batch of feature maps \(B, C, H, W\), '
                                         r'got shape \(2, 3, 4\)'):
        DeconvolutionPS(2, 3, 3)(torch.zeros(2, 3, 4))
