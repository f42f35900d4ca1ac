"""researchutils.pytorch.ActionConditionedLSTM equals its Chainer twin: given the twin's
weights, every output and every input, action and parameter gradient over a sequence that
carries the state, with the clip active."""
import chainer
import numpy as np
import pytest

torch = pytest.importorskip('torch')

import researchutils.chainer.links as chainer_links  # noqa: E402
from researchutils.pytorch import ActionConditionedLSTM  # noqa: E402
from tests.support.torch_twins import (  # noqa: E402
    assert_equal_to_chainer,
    assert_gradients_equal,
    copy_chainer_parameters,
    to_torch,
)

CLIP = 0.01
BATCHES = (3, 3, 3, 2)


def _sequence(seed=0, action_rows=None):
    rng = np.random.RandomState(seed)
    inputs = [rng.randn(batch, 4).astype(np.float32) for batch in BATCHES]
    actions = [rng.randn(action_rows or batch, 2, 3).astype(np.float32) for batch in BATCHES]
    return inputs, actions


def _run(link, module, inputs, actions):
    xs = [chainer.Variable(x) for x in inputs]
    as_ = [chainer.Variable(a) for a in actions]
    outputs = [link(x, a) for x, a in zip(xs, as_)]
    link.cleargrads()
    sum(chainer.functions.sum(y * y) for y in outputs).backward()
    xt = [to_torch(x, True) for x in inputs]
    at = [to_torch(a, True) for a in actions]
    torch_outputs = [module(x, a) for x, a in zip(xt, at)]
    module.zero_grad()
    sum((y * y).sum() for y in torch_outputs).backward()
    for step, (y, reference) in enumerate(zip(torch_outputs, outputs)):
        assert_equal_to_chainer(y, reference.array, 1e-6, 'output of step {}'.format(step))
    for step in range(len(inputs)):
        assert_equal_to_chainer(xt[step].grad, xs[step].grad, 1e-5, 'gradient of x')
    # The first step's action has no effect, and no gradient on either side.
    assert at[0].grad is None and as_[0].grad is None
    for step in range(1, len(inputs)):
        assert_equal_to_chainer(at[step].grad, as_[step].grad, 1e-5, 'gradient of a')
    return assert_gradients_equal(link, module, 1e-5)


@pytest.mark.parametrize('action_rows', [None, 1])
def test_a_sequence_equals_chainers_in_every_output_and_gradient(action_rows):
    link = chainer_links.ActionConditionedLSTM(4, 5, action_size=6, clip_min=-CLIP,
                                               clip_max=CLIP)
    module = ActionConditionedLSTM(4, 5, action_size=6, clip_min=-CLIP, clip_max=CLIP)
    copy_chainer_parameters(link, module)
    names = _run(link, module, *_sequence(0, action_rows))
    assert sorted(names) == ['Wa.weight', 'Wh.weight', 'lateral.weight', 'upward.bias',
                             'upward.weight']
    # The clip acted: without it, Chainer's gradients are others.
    unclipped = chainer_links.ActionConditionedLSTM(4, 5, action_size=6)
    unclipped.copyparams(link)
    inputs, actions = _sequence(0, action_rows)
    for model in (link, unclipped):
        model.reset_state()
        model.cleargrads()
        sum(chainer.functions.sum(model(x, a) ** 2) for x, a in zip(inputs, actions)).backward()
    assert not np.allclose(unclipped.Wa.W.grad, link.Wa.W.grad, rtol=1e-2)


def test_lazy_sizes_come_from_the_first_call_and_the_pair_form_works():
    link = chainer_links.ActionConditionedLSTM(5, clip_min=-CLIP, clip_max=CLIP)
    module = ActionConditionedLSTM(5, clip_min=-CLIP, clip_max=CLIP)
    inputs, actions = _sequence(1)
    link((inputs[0], actions[0]))
    module((to_torch(inputs[0]), to_torch(actions[0])))
    assert tuple(module.Wa.weight.shape) == (5, 6)
    assert tuple(module.upward.weight.shape) == (20, 4)
    link.reset_state()
    module.reset_state()
    copy_chainer_parameters(link, module)
    _run(link, module, inputs, actions)


@pytest.mark.parametrize('action, error', [
    (np.zeros((2, 6), np.float32), ValueError),   # rows neither 1 nor those of x
    (np.zeros((3, 5), np.float32), ValueError),   # not the action size
])
def test_a_bad_action_is_refused_as_chainer_refuses_it(action, error):
    link = chainer_links.ActionConditionedLSTM(4, 5, action_size=6)
    module = ActionConditionedLSTM(4, 5, action_size=6)
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(error) as chainers:
        link(x, action)
    with pytest.raises(error) as ours:
        module(to_torch(x), to_torch(action))
    assert str(ours.value) == str(chainers.value)


def test_an_action_of_another_dtype_or_kind_is_refused_naming_a():
    module = ActionConditionedLSTM(4, 5, action_size=3)
    with pytest.raises(TypeError, match=r'the action a must have the dtype of the module, '
                                        r'torch.float32, got torch.float64'):
        module(torch.zeros(2, 4), torch.eye(2, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match='a must be a torch.Tensor'):
        module(torch.zeros(2, 4), [[1.0, 0.0, 0.0]])
    with pytest.raises(TypeError, match='takes x and an action a'):
        module(torch.zeros(2, 4))


@pytest.mark.parametrize('arguments', [
    dict(in_size=4, out_size=5, action_size=0), dict(in_size=4, out_size=5, action_size=2.0),
    dict(in_size=4, out_size=0), dict(in_size=4, out_size=5, clip_min=1, clip_max=0),
])
def test_bad_arguments_are_refused_as_chainer_refuses_them(arguments):
    with pytest.raises((TypeError, ValueError)) as chainers:
        chainer_links.ActionConditionedLSTM(**arguments)
    with pytest.raises(type(chainers.value)) as ours:
        ActionConditionedLSTM(**arguments)
    assert str(ours.value) == str(chainers.value)


@pytest.mark.parametrize('name', ['h_fusion_init', 'a_fusion_init'])
def test_a_fusion_initializer_that_is_not_one_is_refused_naming_it(name):
    with pytest.raises(TypeError, match='{} must be an initializer'.format(name)):
        ActionConditionedLSTM(4, 5, **{name: 'ones'})
