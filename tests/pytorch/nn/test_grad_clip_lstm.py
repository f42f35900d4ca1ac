"""researchutils.pytorch.GradClipLSTM equals researchutils.chainer.links.GradClipLSTM: given the
twin's weights, every output and every input and parameter gradient over a sequence that
carries the state (a batch that shrinks, the clip active)."""
import chainer
import numpy as np
import pytest

torch = pytest.importorskip('torch')

import researchutils.chainer.links as chainer_links  # noqa: E402
from researchutils.pytorch import GradClipLSTM  # noqa: E402
from tests.support.torch_twins import (  # noqa: E402
    assert_double_backward_equal,
    assert_equal_to_chainer,
    assert_gradients_equal,
    copy_chainer_parameters,
    to_torch,
)

CLIP = 0.02
BATCHES = (4, 4, 3, 3, 1)  # shrinking, as variable-length sequences sorted by length


def _sequence(in_size=5, seed=0):
    rng = np.random.RandomState(seed)
    inputs = [rng.randn(batch, in_size).astype(np.float32) for batch in BATCHES]
    weights = [rng.randn(batch, 6).astype(np.float32) for batch in BATCHES]
    return inputs, weights


def _run_chainer(link, inputs, weights):
    variables = [chainer.Variable(x) for x in inputs]
    outputs = [link(x) for x in variables]
    loss = sum(chainer.functions.sum(y * w) for y, w in zip(outputs, weights))
    link.cleargrads()
    loss.backward()
    return [y.array for y in outputs], [x.grad for x in variables]


def _run_torch(module, inputs, weights):
    tensors = [to_torch(x, True) for x in inputs]
    outputs = [module(x) for x in tensors]
    loss = sum((y * to_torch(w)).sum() for y, w in zip(outputs, weights))
    module.zero_grad()
    loss.backward()
    return outputs, [x.grad for x in tensors]


@pytest.mark.parametrize('bounds', [(-CLIP, CLIP), (None, CLIP)])
def test_a_sequence_equals_chainers_in_every_output_and_gradient(bounds):
    inputs, weights = _sequence()
    link = chainer_links.GradClipLSTM(5, 6, clip_min=bounds[0], clip_max=bounds[1])
    module = GradClipLSTM(5, 6, clip_min=bounds[0], clip_max=bounds[1])
    copy_chainer_parameters(link, module)
    expected_outputs, expected_input_grads = _run_chainer(link, inputs, weights)
    outputs, input_grads = _run_torch(module, inputs, weights)

    for step, (y, expected) in enumerate(zip(outputs, expected_outputs)):
        assert_equal_to_chainer(y, expected, 1e-6, 'output of step {}'.format(step))
    for step, (g, expected) in enumerate(zip(input_grads, expected_input_grads)):
        assert_equal_to_chainer(g, expected, 1e-5, 'gradient of x at step {}'.format(step))
    assert assert_gradients_equal(link, module, 1e-5) == [
        'lateral.weight', 'upward.weight', 'upward.bias']
    assert_equal_to_chainer(module.c, link.c.array, 1e-6, 'c')
    assert_equal_to_chainer(module.h, link.h.array, 1e-6, 'h')

    # The clip acted: without it, Chainer's gradients are others.
    unclipped = chainer_links.GradClipLSTM(5, 6)
    unclipped.copyparams(link)
    _run_chainer(unclipped, inputs, weights)
    assert not np.allclose(unclipped.upward.W.grad, link.upward.W.grad, rtol=1e-2)


def test_lazy_in_size_is_taken_from_the_first_step_and_flattened_as_chainer():
    rng = np.random.RandomState(1)
    frames = [rng.randn(2, 2, 3).astype(np.float32) for _ in range(3)]
    link = chainer_links.GradClipLSTM(4, clip_min=-CLIP, clip_max=CLIP)
    module = GradClipLSTM(4, clip_min=-CLIP, clip_max=CLIP)
    link(frames[0])
    module(to_torch(frames[0]))
    assert tuple(module.upward.weight.shape) == (16, 6)
    assert type(module.upward) is torch.nn.Linear
    link.reset_state()
    module.reset_state()
    copy_chainer_parameters(link, module)
    expected, _ = _run_chainer(link, frames, [np.ones((2, 4), np.float32)] * 3)
    outputs, _ = _run_torch(module, frames, [np.ones((2, 4), np.float32)] * 3)
    for y, reference in zip(outputs, expected):
        assert_equal_to_chainer(y, reference, 1e-6, 'output')
    assert_gradients_equal(link, module)


def test_parameters_are_initialized_as_chainer_initializes_them():
    torch.manual_seed(0)
    module = GradClipLSTM(400, 50)
    bias = module.upward.bias.detach().view(50, 4)
    assert bias[:, 2].eq(1).all() and bias[:, [0, 1, 3]].eq(0).all()
    # LeCunNormal: standard deviation sqrt(1 / fan_in).
    assert module.upward.weight.std().item() == pytest.approx((1 / 400) ** 0.5, rel=0.05)
    assert module.lateral.weight.std().item() == pytest.approx((1 / 50) ** 0.5, rel=0.05)
    custom = GradClipLSTM(3, 2, lateral_init=0.5, upward_init=torch.nn.init.ones_,
                          bias_init=-1.0, forget_bias_init=2.0)
    assert custom.lateral.weight.eq(0.5).all() and custom.upward.weight.eq(1).all()
    assert custom.upward.bias.tolist() == [-1.0, -1.0, 2.0, -1.0] * 2


def test_the_state_is_kept_reset_and_set_as_in_chainer():
    module = GradClipLSTM(3, 2)
    assert module.c is None and module.h is None
    first = module(torch.ones(2, 3))
    assert torch.equal(module.h, first) and module.c.shape == (2, 2)
    module.reset_state()
    assert module.c is None and module.h is None
    c, h = torch.randn(2, 2), torch.randn(2, 2)
    module.set_state(c, h)
    assert module.c is c and module.h is h
    with pytest.raises(TypeError, match='h must be a floating point torch.Tensor, got ndarray'):
        module.set_state(c, np.zeros((2, 2), np.float32))


def test_a_batch_that_grows_is_refused_as_chainer_refuses_it():
    module = GradClipLSTM(3, 2)
    link = chainer_links.GradClipLSTM(3, 2)
    module(torch.zeros(1, 3))
    link(np.zeros((1, 3), np.float32))
    with pytest.raises(TypeError) as ours:
        module(torch.zeros(2, 3))
    with pytest.raises(TypeError) as chainers:
        link(np.zeros((2, 3), np.float32))
    assert str(ours.value) == str(chainers.value)


def test_an_input_of_another_dtype_is_refused_naming_it():
    with pytest.raises(TypeError, match='x must have the dtype of the parameters, '
                                        'torch.float32, got torch.float64'):
        GradClipLSTM(3, 2)(torch.zeros(1, 3, dtype=torch.float64))


@pytest.mark.parametrize('arguments', [
    dict(in_size=0, out_size=3), dict(in_size=3, out_size=0), dict(in_size=3, out_size=2.0),
    dict(in_size=True, out_size=None), dict(in_size=3, out_size=2, clip_min=1, clip_max=0),
    dict(in_size=3, out_size=2, clip_min='1'),
])
def test_bad_arguments_are_refused_as_chainer_refuses_them(arguments):
    with pytest.raises((TypeError, ValueError)) as chainers:
        chainer_links.GradClipLSTM(**arguments)
    with pytest.raises(type(chainers.value)) as ours:
        GradClipLSTM(**arguments)
    assert str(ours.value) == str(chainers.value)


@pytest.mark.parametrize('name', ['lateral_init', 'upward_init', 'bias_init',
                                  'forget_bias_init'])
def test_an_initializer_that_is_not_one_is_refused_naming_it(name):
    with pytest.raises(TypeError, match='{} must be an initializer'.format(name)):
        GradClipLSTM(3, 2, **{name: 'zeros'})


def test_double_backward_equals_chainers_with_the_clip_active():
    link = chainer_links.GradClipLSTM(5, 6, clip_min=-CLIP, clip_max=CLIP)
    module = GradClipLSTM(5, 6, clip_min=-CLIP, clip_max=CLIP)
    copy_chainer_parameters(link, module)
    assert_double_backward_equal(link, module, _sequence()[0][:3])
