"""researchutils.pytorch.ConvLSTM equals researchutils.chainer.links.ConvLSTM: given the twin's
weights, every output and every input and parameter gradient (peepholes included) over a
sequence that carries the state, with the clip active."""
import chainer
import numpy as np
import pytest

torch = pytest.importorskip('torch')

import researchutils.chainer.links as chainer_links  # noqa: E402
from researchutils.pytorch import ConvLSTM  # noqa: E402
from tests.support.torch_twins import (  # noqa: E402
    assert_double_backward_equal,
    assert_equal_to_chainer,
    assert_gradients_equal,
    copy_chainer_parameters,
    to_torch,
)

CLIP = 0.01
BATCHES = (3, 3, 2, 2)


def _link_pair(stride=1, bounds=(-CLIP, CLIP), frame=None, in_channels=2):
    """The Chainer link and its twin, both initialized by a first step, the twin given the
    link's weights (the peepholes made random, as after training)."""
    link = chainer_links.ConvLSTM(in_channels, 3, 3, stride, clip_min=bounds[0],
                                  clip_max=bounds[1])
    module = ConvLSTM(in_channels, 3, 3, stride, clip_min=bounds[0], clip_max=bounds[1])
    frame = np.zeros((1, 2, 5, 6), np.float32) if frame is None else frame
    link(frame)
    module(to_torch(frame))
    link.reset_state()
    module.reset_state()
    rng = np.random.RandomState(9)
    for name in ('Wci', 'Wcf', 'Wco'):
        getattr(link, name).array[...] = rng.randn(*getattr(link, name).shape)
    copy_chainer_parameters(link, module)
    return link, module


def _sequence(seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randn(batch, 2, 5, 6).astype(np.float32) for batch in BATCHES]


def _run(link, module, frames, stride):
    variables = [chainer.Variable(x) for x in frames]
    outputs = [link(x) for x in variables]
    rng = np.random.RandomState(1)
    weights = [rng.randn(*y.shape).astype(np.float32) for y in outputs]
    link.cleargrads()
    sum(chainer.functions.sum(y * w) for y, w in zip(outputs, weights)).backward()
    tensors = [to_torch(x, True) for x in frames]
    torch_outputs = [module(x) for x in tensors]
    module.zero_grad()
    sum((y * to_torch(w)).sum() for y, w in zip(torch_outputs, weights)).backward()
    for step, (y, reference) in enumerate(zip(torch_outputs, outputs)):
        assert_equal_to_chainer(y, reference.array, 1e-6, 'output of step {}'.format(step))
    for step, (x, reference) in enumerate(zip(tensors, variables)):
        assert_equal_to_chainer(x.grad, reference.grad, 1e-5,
                                'gradient of x at step {}'.format(step))
    return assert_gradients_equal(link, module, 1e-5)


@pytest.mark.parametrize('stride', [1, 2, (1, 2)])
def test_a_sequence_equals_chainers_in_every_output_and_gradient(stride):
    link, module = _link_pair(stride)
    names = _run(link, module, _sequence(), stride)
    assert {'Wci', 'Wcf', 'Wco', 'Wxc.weight', 'Wxc.bias', 'Whc.weight'} <= set(names)
    assert len(names) == 4 * 3 + 3
    assert_equal_to_chainer(module.c, link.c.array, 1e-6, 'c')
    # The clip acted: without it, Chainer's gradients are others.
    unclipped = chainer_links.ConvLSTM(2, 3, 3, stride)
    unclipped(np.zeros((1, 2, 5, 6), np.float32))
    unclipped.reset_state()
    unclipped.copyparams(link)
    unclipped.cleargrads()
    sum(chainer.functions.sum(unclipped(x)) for x in _sequence()).backward()
    link.reset_state()
    link.cleargrads()
    sum(chainer.functions.sum(link(x)) for x in _sequence()).backward()
    for name in ('Wco', 'Wxo', 'Wxc'):
        ours, theirs = getattr(link, name), getattr(unclipped, name)
        ours = ours.grad if isinstance(ours, chainer.Parameter) else ours.W.grad
        theirs = theirs.grad if isinstance(theirs, chainer.Parameter) else theirs.W.grad
        assert not np.allclose(ours, theirs, rtol=1e-2), name


def test_bounds_that_exclude_zero_clip_the_unused_slot_as_chainer_does():
    # clip_min > 0: the fused cell's output-gate slot, whose gradient is zero, gets clip_min.
    link, module = _link_pair(bounds=(0.001, 0.01))
    _run(link, module, _sequence(2), 1)


def test_lazy_in_channels_come_from_the_first_step():
    link = chainer_links.ConvLSTM(None, 3, 3, clip_min=-CLIP, clip_max=CLIP)
    module = ConvLSTM(None, 3, 3, clip_min=-CLIP, clip_max=CLIP)
    frames = _sequence(3)
    link(frames[0])
    module(to_torch(frames[0]))
    assert tuple(module.Wxi.weight.shape) == (3, 2, 3, 3)
    assert tuple(module.Wci.shape) == (1, 3, 5, 6) and module.Wci.eq(0).all()
    link.reset_state()
    module.reset_state()
    copy_chainer_parameters(link, module)
    _run(link, module, frames, 1)


def test_the_state_is_kept_reset_and_set():
    module = ConvLSTM(2, 3, 3)
    y = module(torch.zeros(2, 2, 4, 4))
    assert torch.equal(module.h, y) and module.c.shape == (2, 3, 4, 4)
    module.reset_state()
    assert module.c is None and module.h is None
    c, h = torch.ones(2, 3, 4, 4), torch.ones(2, 3, 4, 4)
    module.set_state(c, h)
    assert module.c is c and module.h is h
    with pytest.raises(TypeError, match='c must be a floating point torch.Tensor'):
        module.set_state(None, h)


def test_a_batch_that_grows_or_another_size_is_refused_as_chainer_refuses_it():
    for x, later in ((np.zeros((1, 2, 4, 4), np.float32), np.zeros((2, 2, 4, 4), np.float32)),
                     (np.zeros((2, 2, 4, 4), np.float32), np.zeros((2, 2, 4, 6), np.float32))):
        link, module = chainer_links.ConvLSTM(2, 3, 3), ConvLSTM(2, 3, 3)
        link(x)
        module(to_torch(x))
        with pytest.raises((TypeError, ValueError)) as chainers:
            link(later)
        with pytest.raises(type(chainers.value)) as ours:
            module(to_torch(later))
        assert str(ours.value) == str(chainers.value)


@pytest.mark.parametrize('arguments', [
    dict(in_channels=2, out_channels=3, ksize=2), dict(in_channels=2, out_channels=0, ksize=3),
    dict(in_channels=0, out_channels=3, ksize=3), dict(in_channels=2, out_channels=3, ksize=3,
                                                       stride=0),
    dict(in_channels=2, out_channels=3, ksize=3, clip_min=1, clip_max=-1),
])
def test_bad_arguments_are_refused_as_chainer_refuses_them(arguments):
    with pytest.raises((TypeError, ValueError)) as chainers:
        chainer_links.ConvLSTM(**arguments)
    with pytest.raises(type(chainers.value)) as ours:
        ConvLSTM(**arguments)
    assert str(ours.value) == str(chainers.value)


def test_an_initializer_that_is_not_one_is_refused_naming_it():
    with pytest.raises(TypeError, match='initial_bias must be an initializer'):
        ConvLSTM(2, 3, 3, initial_bias='zeros')


def test_double_backward_equals_chainers_with_the_clip_active():
    link, module = _link_pair()
    assert_double_backward_equal(link, module, _sequence(4)[:2])
