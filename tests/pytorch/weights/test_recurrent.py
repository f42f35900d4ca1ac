"""from_chainer on the recurrent links (researchutils/pytorch/nn/recurrent.py, n_step_rnn.py
and the LSTM rule of weights/_rules.py): over several steps carrying the state, every output
equals Chainer's (1e-6) and, after one backward through all the steps, every parameter and
input gradient (1e-5)."""
import chainer
import chainer.links as L
import numpy
import pytest

torch = pytest.importorskip('torch')

from researchutils.pytorch.weights import _rules, from_chainer  # noqa: E402
from tests.pytorch.weights.ported import (  # noqa: E402
    assert_gradients_equal,
    assert_outputs_equal,
    backward_both,
    both,
    check_ported,
    randomize,
)


def _floats(*shape, seed=3):
    return numpy.random.RandomState(seed).standard_normal(shape).astype(numpy.float32)


def _run_steps(link, module, batches):
    """Each batch through both, the state carried; one backward through every step."""
    pairs = [both(batch) for batch in batches]
    chainer_outputs = [link(variable) for variable, _ in pairs]
    torch_outputs = [module(tensor) for _, tensor in pairs]
    assert_outputs_equal(chainer_outputs, torch_outputs)
    backward_both(chainer_outputs, torch_outputs)
    return assert_gradients_equal(link, module, pairs)


def test_lstm_carries_its_state_over_steps_and_a_shrinking_batch():
    link = randomize(L.LSTM(3, 4))
    module = from_chainer(link)
    # a batch smaller than the state updates its first rows, as Chainer's LSTM does
    compared = _run_steps(link, module, [_floats(5, 3, seed=step) for step in range(3)]
                          + [_floats(3, 3, seed=9), _floats(2, 3, seed=10)])
    assert sorted(compared) == ['bias_ih', 'weight_hh', 'weight_ih']
    assert_outputs_equal([link.c, link.h], [module.c, module.h], 'state')


def test_lstm_reset_and_set_state_as_chainer():
    link = randomize(L.LSTM(3, 4))
    module = from_chainer(link)
    _run_steps(link, module, [_floats(2, 3, seed=1)])
    link.reset_state()
    module.reset_state()
    c, h = _floats(2, 4, seed=4), _floats(2, 4, seed=5)
    link.set_state(chainer.Variable(c.copy()), chainer.Variable(h.copy()))
    module.set_state(torch.tensor(c), torch.tensor(h))
    link.cleargrads()
    module.zero_grad()
    _run_steps(link, module, [_floats(2, 3, seed=6), _floats(2, 3, seed=7)])


@pytest.mark.parametrize('with_state', [False, True])
def test_stateless_lstm_equals_chainer(with_state):
    link = randomize(L.StatelessLSTM(3, 4))
    arrays = [_floats(2, 4, seed=1), _floats(2, 4, seed=2)] if with_state else []
    if with_state:
        check_ported(link, from_chainer(link), *arrays, _floats(2, 3))
    else:
        module = from_chainer(link)
        x_chainer, x_torch = both(_floats(2, 3))
        chainer_outputs, torch_outputs = link(None, None, x_chainer), module(None, None, x_torch)
        assert_outputs_equal(chainer_outputs, torch_outputs)
        backward_both(chainer_outputs, torch_outputs)
        assert_gradients_equal(link, module, [(x_chainer, x_torch)])


def test_lstm_gate_order_is_torchs_stacked_one():
    # Row 4u + g of Chainer's upward.W is unit u, gate g of a, i, f, o; torch stacks the
    # blocks i, f, g(= a), o of U rows each: written out for U = 2, independently.
    interleaved = torch.arange(8.0)  # units 0, 1 x gates a, i, f, o
    stacked = _rules.stack_gates(interleaved)
    assert stacked.tolist() == [1, 5, 2, 6, 0, 4, 3, 7]
    assert _rules.interleave_gates(stacked).tolist() == interleaved.tolist()


def test_lstm_bias_is_chainers_one_bias():
    module = from_chainer(randomize(L.LSTM(3, 4)))
    assert sorted(name for name, _ in module.named_parameters()) == [
        'bias_ih', 'weight_hh', 'weight_ih']
    assert not module.bias_hh.any()


@pytest.mark.parametrize('kind', [L.GRU, L.StatefulGRU])
def test_stateful_gru_first_step_and_carried_state_equal_chainer(kind):
    link = randomize(kind(3, 4))
    module = from_chainer(link)
    _run_steps(link, module, [_floats(2, 3, seed=step) for step in range(3)])


def test_stateless_gru_equals_chainer():
    link = randomize(L.StatelessGRU(3, 4))
    check_ported(link, from_chainer(link), _floats(2, 4, seed=1), _floats(2, 3))


def _sequences(lengths, size):
    return [_floats(length, size, seed=length) for length in lengths]


@pytest.mark.parametrize('kind, n_layers', [(L.NStepLSTM, 1), (L.NStepLSTM, 2),
                                            (L.NStepBiLSTM, 2)])
@pytest.mark.parametrize('given_state', [False, True])
def test_n_step_lstm_equals_chainer(kind, n_layers, given_state):
    link = randomize(kind(n_layers, 3, 4, 0.0))
    module = from_chainer(link)
    directions = 2 if kind is L.NStepBiLSTM else 1
    xs = _sequences([3, 5, 2], 3)
    pairs = [both(x) for x in xs]
    states = [both(_floats(n_layers * directions, 3, 4, seed=seed)) for seed in (7, 8)] \
        if given_state else [(None, None), (None, None)]
    chainer_outputs = link(states[0][0], states[1][0], [variable for variable, _ in pairs])
    torch_outputs = module(states[0][1], states[1][1], [tensor for _, tensor in pairs])
    assert_outputs_equal(chainer_outputs, torch_outputs)
    backward_both(chainer_outputs, torch_outputs)
    compared = assert_gradients_equal(link, module, pairs + (states if given_state else []))
    assert len(compared) == 4 * n_layers * directions


@pytest.mark.parametrize('kind', [L.NStepGRU, L.NStepBiGRU])
def test_n_step_gru_equals_chainer(kind):
    link = randomize(kind(2, 3, 4, 0.0))
    module = from_chainer(link)
    hx = both(_floats(2 * (2 if kind is L.NStepBiGRU else 1), 2, 4, seed=6))
    pairs = [both(x) for x in _sequences([2, 4], 3)]
    chainer_outputs = link(hx[0], [variable for variable, _ in pairs])
    torch_outputs = module(hx[1], [tensor for _, tensor in pairs])
    assert_outputs_equal(chainer_outputs, torch_outputs)
    backward_both(chainer_outputs, torch_outputs)
    assert_gradients_equal(link, module, pairs + [hx])


def test_n_step_dropout_acts_between_layers_in_train_mode_only():
    module = from_chainer(randomize(L.NStepLSTM(2, 3, 4, 0.5)))
    xs = [torch.tensor(x) for x in _sequences([6], 3)]
    module.eval()
    first = module(None, None, xs)[2][0]
    assert torch.equal(first, module(None, None, xs)[2][0])
    module.train()
    torch.manual_seed(0)
    assert not torch.equal(first, module(None, None, xs)[2][0])


def test_grad_clip_lstm_becomes_its_twin_with_the_clip_acting():
    from researchutils.chainer.links import GradClipLSTM as ChainerGradClipLSTM
    from researchutils.pytorch.nn.grad_clip_lstm import GradClipLSTM

    link = randomize(ChainerGradClipLSTM(3, 4, clip_min=-0.05, clip_max=0.05))
    module = from_chainer(link)
    assert isinstance(module, GradClipLSTM)
    assert (module.clip_min, module.clip_max) == (-0.05, 0.05)
    _run_steps(link, module, [_floats(3, 3, seed=step) * 3 for step in range(3)])
    # the clip acted: without it, Chainer's gradients are others
    free = randomize(L.LSTM(3, 4))
    _run_steps(free, from_chainer(free), [_floats(3, 3, seed=step) * 3 for step in range(3)])
    assert not numpy.allclose(free.upward.W.grad, link.upward.W.grad, rtol=1e-3)


def test_conv_lstm_becomes_its_twin_peepholes_and_clip_included():
    from researchutils.chainer.links import ConvLSTM as ChainerConvLSTM
    from researchutils.pytorch.nn.conv_lstm import ConvLSTM

    link = ChainerConvLSTM(2, 3, 3, clip_min=-0.05, clip_max=0.05)
    link(_floats(2, 2, 4, 5))  # Chainer makes its peepholes at the first step
    link.reset_state()
    randomize(link)
    module = from_chainer(link)
    assert isinstance(module, ConvLSTM) and module.Wci.shape == (1, 3, 4, 5)
    _run_steps(link, module, [_floats(2, 2, 4, 5, seed=step) * 3 for step in range(3)])


def test_action_conditioned_lstm_becomes_its_twin():
    from researchutils.chainer.links import ActionConditionedLSTM as ChainerActionConditionedLSTM

    link = randomize(ChainerActionConditionedLSTM(3, 4, action_size=2, clip_min=-0.1,
                                                  clip_max=0.1))
    module = from_chainer(link)
    steps = [(both(_floats(2, 3, seed=step) * 3), both(_floats(2, 2, seed=10 + step)))
             for step in range(3)]
    chainer_outputs = [link(x[0], a[0]) for x, a in steps]
    torch_outputs = [module(x[1], a[1]) for x, a in steps]
    assert_outputs_equal(chainer_outputs, torch_outputs)
    backward_both(chainer_outputs, torch_outputs)
    # the first step has no state, so its action (used on the state only) gets no gradient
    assert steps[0][1][0].grad is None and steps[0][1][1].grad is None
    assert_gradients_equal(link, module, [x for x, _ in steps] + [a for _, a in steps[1:]])


def test_lazy_parameters_of_a_hand_written_module_take_chainers_shapes():
    from researchutils.pytorch.weights import load_chainer_weights

    link = randomize(L.Linear(3, 2))
    module = load_chainer_weights(torch.nn.LazyLinear(2), link)
    assert torch.equal(module.weight, torch.tensor(link.W.array))
    assert torch.equal(module(torch.ones(1, 3)).detach(),
                       torch.tensor(link(numpy.ones((1, 3), numpy.float32)).array))
