"""ActionConditionedLSTM: the previous output is fused with the action before the lateral
connection (Chiappa et al. 2017; Oh et al. 2015)."""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest
from chainer import gradient_check

from researchutils.chainer.links import ActionConditionedLSTM
from researchutils.chainer.links.connection import action_conditioned_lstm
from tests.support.clip_gradient import clip_gradient


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numpy_step(p, x, a, c, h):
    """One step in plain NumPy; gate g of unit u is row 4u + g (a, i, f, o) of the weights."""
    z = x.reshape(len(x), -1) @ p['upward/W'].T + p['upward/b']
    if h is not None:
        fused = (h @ p['Wh/W'].T) * (a.reshape(len(a), -1) @ p['Wa/W'].T)
        z = z + fused @ p['lateral/W'].T
    units = z.shape[1] // 4
    z = z.reshape(len(z), units, 4)
    if c is None:
        c = np.zeros((len(z), units))
    c = np.tanh(z[:, :, 0]) * _sigmoid(z[:, :, 1]) + _sigmoid(z[:, :, 2]) * c
    return c, _sigmoid(z[:, :, 3]) * np.tanh(c)


def _params(link):
    return {name.lstrip('/'): p.array for name, p in link.namedparams()}


def _link(in_size=3, out_size=4, action_size=2, seed=0, **kwargs):
    with chainer.using_config('dtype', np.float64):
        link = ActionConditionedLSTM(in_size, out_size, **kwargs)
        link(np.zeros((1, in_size)), np.zeros((1, action_size)))  # sizes Wa
    link.reset_state()
    rng = np.random.RandomState(seed)
    for param in link.params():
        param.array[...] = rng.uniform(-1, 1, param.shape)
    return link


def _sequence(steps=3, batch=3, in_size=3, action_size=2, seed=1):
    rng = np.random.RandomState(seed)
    return [(rng.uniform(-1, 1, (batch, in_size)), rng.uniform(-1, 1, (batch, action_size)))
            for _ in range(steps)]


def test_parameters_are_chainer_lstms_plus_the_fusion_weights():
    link = ActionConditionedLSTM(3, 4)
    link(np.zeros((2, 3), np.float32), np.zeros((2, 5), np.float32))
    assert {n: p.shape for n, p in link.namedparams()} == {
        '/upward/W': (16, 3), '/upward/b': (16,), '/lateral/W': (16, 4),
        '/Wh/W': (4, 4), '/Wa/W': (4, 5)}
    assert isinstance(link, L.LSTM)


@pytest.mark.parametrize('call', ['pair', 'two_arguments'])
def test_steps_equal_numpy_reference(call):
    link = _link()
    p = _params(link)
    c = h = None
    for x, a in _sequence():
        c, h = _numpy_step(p, x, a, c, h)
        y = link((x, a)) if call == 'pair' else link(x, a)
        np.testing.assert_allclose(y.array, h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(link.c.array, c, rtol=1e-12, atol=1e-12)


def test_action_of_one_row_is_used_for_the_whole_batch():
    link = _link()
    p = _params(link)
    c = h = None
    for x, a in _sequence():
        c, h = _numpy_step(p, x, np.repeat(a[:1], len(x), axis=0), c, h)
        y = link(x, a[:1])
    np.testing.assert_allclose(y.array, h, rtol=1e-12, atol=1e-12)


def test_the_action_acts_through_the_previous_output_only():
    link = _link()
    x, a = _sequence(steps=1)[0]
    first = link(x, a).array
    link.reset_state()
    np.testing.assert_array_equal(link(x, -a).array, first)  # no previous output yet
    changed = link(x, a).array
    link.reset_state()
    link(x, a)
    assert not np.allclose(link(x, -a).array, changed)


def test_gradients_of_two_steps():
    link = _link()
    (x1, a1), (x2, a2) = _sequence(steps=2)

    def two_steps(x1, a1, x2, a2):
        link.reset_state()
        link(x1, a1)
        return link(x2, a2), link.c

    rng = np.random.RandomState(2)
    gy = [rng.uniform(-1, 1, (3, 4)) for _ in range(2)]
    gradient_check.check_backward(two_steps, (x1, a1, x2, a2), gy, tuple(link.params()),
                                  eps=1e-6, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize('bounds', [{}, {'clip_min': -0.2, 'clip_max': 0.2}])
def test_double_backward(bounds):
    link = _link(**bounds)
    (x1, a1), (x2, a2) = _sequence(steps=2)
    rng = np.random.RandomState(3)

    def two_steps(x2, a2):
        link.reset_state()
        link(x1, a1)
        return link(x2, a2)

    params = (link.Wh.W, link.Wa.W, link.lateral.W)
    gradient_check.check_double_backward(
        two_steps, (x2, a2), rng.uniform(-1, 1, (3, 4)),
        (rng.uniform(-1, 1, x2.shape), rng.uniform(-1, 1, a2.shape)), params=params,
        params_grad_grad=tuple(rng.uniform(-1, 1, q.shape) for q in params),
        eps=1e-6, atol=1e-5, rtol=1e-4)


def test_gate_gradients_are_clipped_at_every_step():
    ours = _link(clip_min=-0.05, clip_max=0.05)
    sequence = _sequence(steps=3)
    grads = []
    for clipped in (True, False):
        ours.cleargrads()
        ours.reset_state()
        loss = 0
        c = h = None
        for x, a in sequence:
            if clipped:
                y = ours(x, a)
            else:  # the reference: the same step from F.lstm, its gate gradient clipped
                gates = ours.upward(x)
                if h is not None:
                    gates = gates + ours.lateral(ours.Wh(h) * ours.Wa(a))
                c = np.zeros((3, 4)) if c is None else c
                c, h = F.lstm(c, clip_gradient(gates, -0.05, 0.05))
                y = h
            loss = loss + F.sum(y * y)
        loss.backward()
        grads.append({n: q.grad.copy() for n, q in ours.namedparams()})
    for name in grads[0]:
        np.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)


def test_clipping_changes_the_gradients():
    clipped, plain = _link(clip_min=-0.05, clip_max=0.05), _link()
    grads = []
    for link in (clipped, plain):
        link.cleargrads()
        for x, a in _sequence():
            y = link(x, a)
        F.sum(y * y).backward()
        grads.append(link.upward.W.grad)
    assert np.abs(grads[0] - grads[1]).max() > 1e-3


def test_shrinking_batch_updates_only_the_first_rows():
    link = _link()
    (x1, a1), (x2, a2) = _sequence(steps=2)
    link(x1, a1)
    c_before, h_before = link.c.array.copy(), link.h.array.copy()
    y = link(x2[:2], a2[:2])
    c_expected, h_expected = _numpy_step(_params(link), x2[:2], a2[:2], c_before[:2],
                                         h_before[:2])
    np.testing.assert_allclose(y.array, h_expected, rtol=1e-12)
    np.testing.assert_allclose(link.c.array[:2], c_expected, rtol=1e-12)
    np.testing.assert_array_equal(link.h.array[2:], h_before[2:])


def test_growing_batch_is_refused():
    link = _link()
    link(*_sequence(steps=1, batch=2)[0])
    with pytest.raises(TypeError, match='batch size'):
        link(*_sequence(steps=1, batch=3)[0])


def test_action_batch_other_than_x_or_one_is_refused():
    link = _link()
    x, a = _sequence(steps=1, batch=3)[0]
    with pytest.raises(ValueError, match='a'):
        link(x, a[:2])


_FLOAT32_X = np.zeros((2, 4), np.float32)


@pytest.mark.parametrize('action, error, message', [
    (np.zeros((2, 3), np.float32), ValueError, r'action a must have 5 values.*\(2, 3\)'),
    (np.eye(2, 5), TypeError, 'action a must have the dtype of the link, float32, got float64'),
    (np.eye(2, 5, dtype=np.int64), TypeError, 'action a .*got int64'),
    ([[0.0] * 5] * 2, TypeError, 'action a must be an array .*got list'),
    (np.zeros((), np.float32), ValueError, 'action a must have a batch axis'),
])
@pytest.mark.parametrize('step', ['first', 'second'])
def test_a_wrong_action_is_refused_at_every_step_naming_a(action, error, message, step):
    link = ActionConditionedLSTM(4, 6, action_size=5)
    if step == 'second':
        link(_FLOAT32_X, np.zeros((2, 5), np.float32))
    h_before = link.h
    with pytest.raises(error, match=message):
        link(_FLOAT32_X, action)
    assert link.h is h_before  # nothing was computed


def test_a_lazily_sized_action_keeps_its_first_size():
    link = ActionConditionedLSTM(4, 6)
    link(_FLOAT32_X, np.zeros((2, 5), np.float32))
    link.reset_state()
    with pytest.raises(ValueError, match=r'action a must have 5 values.*\(2, 3\)'):
        link(_FLOAT32_X, np.zeros((2, 3), np.float32))


def test_an_action_of_the_links_dtype_is_taken_float64_included():
    with chainer.using_config('dtype', np.float64):
        link = ActionConditionedLSTM(4, 6)
        for _ in range(2):
            y = link(np.zeros((2, 4)), np.eye(2, 5))
    assert y.dtype == np.float64


def test_an_action_variable_is_taken():
    link = ActionConditionedLSTM(4, 6)
    for _ in range(2):
        y = link(_FLOAT32_X, chainer.Variable(np.eye(2, 5, dtype=np.float32)))
    assert y.shape == (2, 6)


def test_x_as_a_list_is_refused_naming_x():
    with pytest.raises(TypeError, match='input x must be an array .*got list'):
        ActionConditionedLSTM(4, 6)([[0.0] * 4] * 2, np.zeros((2, 5), np.float32))


def test_action_without_x_pair_is_refused():
    with pytest.raises(TypeError, match='action'):
        _link()(np.zeros((3, 3)))


def test_sizes_are_inferred_on_the_first_call():
    link = ActionConditionedLSTM(4)
    assert link.upward.W.array is None and link.Wa.W.array is None
    link(np.zeros((2, 3), np.float32), np.zeros((2, 2, 3), np.float32))
    assert link.upward.W.shape == (16, 3) and link.Wa.W.shape == (4, 6)


def test_action_size_can_be_given():
    link = ActionConditionedLSTM(3, 4, action_size=5)
    assert link.Wa.W.shape == (4, 5)


def test_fusion_initializers_are_used():
    link = ActionConditionedLSTM(3, 4, h_fusion_init=0.5, a_fusion_init=2.0, action_size=2)
    assert np.all(link.Wh.W.array == 0.5) and np.all(link.Wa.W.array == 2.0)


def test_reset_state_clears_c_and_h():
    link = _link()
    link(*_sequence(steps=1)[0])
    link.reset_state()
    assert link.c is None and link.h is None


def test_serialization_round_trips_into_a_fresh_link(tmp_path):
    link = _link()
    path = str(tmp_path / 'ac_lstm.npz')
    chainer.serializers.save_npz(path, link)
    with chainer.using_config('dtype', np.float64):
        fresh = ActionConditionedLSTM(3, 4)
        chainer.serializers.load_npz(path, fresh)
    for x, a in _sequence():
        np.testing.assert_array_equal(fresh(x, a).array, link(x, a).array)


@pytest.mark.parametrize('kwargs, error, name', [
    ({'clip_min': 1.0, 'clip_max': 0.0}, ValueError, 'clip_min'),
    ({'clip_max': 'x'}, TypeError, 'clip_max'),
    ({'action_size': 0}, ValueError, 'action_size'),
    ({'action_size': 1.5}, TypeError, 'action_size'),
])
def test_bad_arguments_are_refused_with_their_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        ActionConditionedLSTM(3, 4, **kwargs)


def test_module_stays_a_module():
    assert action_conditioned_lstm.ActionConditionedLSTM is ActionConditionedLSTM


@pytest.mark.gpu
def test_gpu_gradients_match_cpu():
    link = _link(clip_min=-0.01, clip_max=0.01)
    gpu = link.copy(mode='copy')
    gpu.to_device('@cupy:0')
    for model, to in ((link, np.asarray), (gpu, chainer.backends.cuda.to_gpu)):
        model.cleargrads()
        model.reset_state()
        loss = 0
        for x, a in _sequence():
            loss = loss + F.sum(model(to(x), to(a)) ** 2)
        loss.backward()
    for (name, p), (_, q) in zip(sorted(link.namedparams()), sorted(gpu.namedparams())):
        np.testing.assert_allclose(p.grad, chainer.backends.cuda.to_cpu(q.grad), rtol=1e-6,
                                   atol=1e-8, err_msg=name)


@pytest.mark.parametrize('args, kwargs, error, message', [
    ((0, 4), {'action_size': 2}, ValueError, '^in_size must be'),
    ((2, 0), {'action_size': 2}, ValueError, '^out_size must be'),
    ((2, 4), {'action_size': 2, 'h_fusion_init': 'abc'}, TypeError,
     '^h_fusion_init must be an initializer'),
    ((2, 4), {'action_size': 2, 'a_fusion_init': 'abc'}, TypeError,
     '^a_fusion_init must be an initializer'),
])
def test_bad_sizes_and_initializers_are_refused_naming_them(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        ActionConditionedLSTM(*args, **kwargs)
