"""GradClipLSTM link: a drop-in for chainer.links.LSTM whose gate gradients are clipped."""
import chainer
import chainer.functions as F
import chainer.link_hooks
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.links import GradClipLSTM
from tests.support.clip_gradient import clip_gradient


def _reference_step(link, x, c, h, low, high):
    """One step of a plain LSTM layer built from F.lstm with the gate gradient clipped."""
    gates = link.upward(x)
    if h is not None:
        gates = gates + link.lateral(h)
    if c is None:
        c = np.zeros((len(x), link.state_size), np.float64)
    return F.lstm(c, clip_gradient(gates, low, high))


def _pair(in_size=3, out_size=4, **bounds):
    ours = GradClipLSTM(in_size, out_size, **bounds)
    plain = L.LSTM(in_size, out_size)
    plain.copyparams(ours)
    for link in (ours, plain):
        link.to_device('@numpy')
    return ours, plain


def _sequence(steps=4, batch=3, in_size=3, seed=0, dtype=np.float32):
    rng = np.random.RandomState(seed)
    return [rng.uniform(-1, 1, (batch, in_size)).astype(dtype) for _ in range(steps)]


def test_parameters_and_their_names_equal_chainer_lstm():
    ours, plain = GradClipLSTM(3, 4), L.LSTM(3, 4)
    assert {n: p.shape for n, p in ours.namedparams()} == \
        {n: p.shape for n, p in plain.namedparams()}


def test_initialization_equals_chainer_lstm_for_the_same_random_state():
    np.random.seed(11)
    ours = GradClipLSTM(3, 4, forget_bias_init=1.5)
    np.random.seed(11)
    plain = L.LSTM(3, 4, forget_bias_init=1.5)
    for (name, p), (_, q) in zip(sorted(ours.namedparams()), sorted(plain.namedparams())):
        np.testing.assert_array_equal(p.array, q.array, err_msg=name)
    # Chainer's gate layout: the forget-gate bias is every fourth entry from index 2.
    np.testing.assert_array_equal(ours.upward.b.array[2::4], 1.5)


@pytest.mark.parametrize('args', [(None, 4), (4,)])
def test_in_size_is_inferred_on_the_first_call(args):
    lstm = GradClipLSTM(*args)
    assert lstm.upward.W.array is None
    y = lstm(np.zeros((2, 7), np.float32))
    assert y.shape == (2, 4)
    assert lstm.upward.W.shape == (16, 7)


def test_without_bounds_outputs_and_gradients_equal_chainer_lstm_with_shrinking_batch():
    ours, plain = _pair()
    xs = _sequence(steps=5, batch=4)
    batches = [4, 4, 3, 1, 0]
    losses = []
    for link in (ours, plain):
        link.cleargrads()
        loss = 0
        for x, batch in zip(xs, batches):
            y = link(x[:batch])
            if batch:
                loss = loss + F.sum(y * y)
        loss = loss + F.sum(link.c * link.c)
        loss.backward()
        losses.append(loss.array)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    for (name, p), (_, q) in zip(sorted(ours.namedparams()), sorted(plain.namedparams())):
        np.testing.assert_allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6, err_msg=name)


def test_growing_batch_is_refused():
    lstm = GradClipLSTM(3, 4)
    lstm(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match='batch size'):
        lstm(np.zeros((3, 3), np.float32))


@pytest.mark.parametrize('bounds', [dict(clip_min=-0.01, clip_max=0.01), dict(clip_max=0.005),
                                    dict(clip_min=-0.005)])
def test_gate_gradient_is_clipped_at_every_step(bounds):
    ours = GradClipLSTM(3, 4, **bounds)
    ours.to_device('@numpy')
    reference = ours.copy(mode='copy')
    xs = [x.astype(np.float64) for x in _sequence(steps=4, batch=3, seed=1)]
    for link in (ours, reference):
        for p in link.params():
            p.array = p.array.astype(np.float64)
        link.cleargrads()
    ours.reset_state()
    loss = 0
    for x in xs:
        loss = loss + F.sum(ours(x) ** 2)
    loss.backward()
    c = h = None
    ref_loss = 0
    for x in xs:
        c, h = _reference_step(reference, x, c, h, bounds.get('clip_min'), bounds.get('clip_max'))
        ref_loss = ref_loss + F.sum(h ** 2)
    ref_loss.backward()
    # Unclipped training would give different gradients: the bounds really bite.
    unclipped = reference.copy(mode='copy')
    unclipped.cleargrads()
    c = h = None
    unclipped_loss = 0
    for x in xs:
        c, h = _reference_step(unclipped, x, c, h, None, None)
        unclipped_loss = unclipped_loss + F.sum(h ** 2)
    unclipped_loss.backward()
    assert not np.allclose(unclipped.upward.W.grad, reference.upward.W.grad)
    for (name, p), (_, q) in zip(sorted(ours.namedparams()), sorted(reference.namedparams())):
        np.testing.assert_allclose(p.grad, q.grad, rtol=1e-10, atol=1e-12, err_msg=name)


def test_reset_state_clears_c_and_h():
    lstm = GradClipLSTM(3, 4)
    lstm(np.ones((2, 3), np.float32))
    assert lstm.c is not None and lstm.h is not None
    lstm.reset_state()
    assert lstm.c is None and lstm.h is None


def test_set_state_is_used_by_the_next_step():
    ours, plain = _pair()
    rng = np.random.RandomState(2)
    c = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
    h = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    outputs = []
    for link in (ours, plain):
        link.set_state(chainer.Variable(c), chainer.Variable(h))
        outputs.append(link(x).array)
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-6)


def test_serialization_round_trips_and_reads_chainer_lstm_files(tmp_path):
    ours, plain = GradClipLSTM(3, 4), L.LSTM(3, 4)
    path = str(tmp_path / 'plain.npz')
    chainer.serializers.save_npz(path, plain)
    chainer.serializers.load_npz(path, ours)
    for (name, p), (_, q) in zip(sorted(ours.namedparams()), sorted(plain.namedparams())):
        np.testing.assert_array_equal(p.array, q.array, err_msg=name)
    path = str(tmp_path / 'ours.npz')
    chainer.serializers.save_npz(path, ours)
    fresh = GradClipLSTM(3, 4)
    chainer.serializers.load_npz(path, fresh)
    np.testing.assert_array_equal(fresh.lateral.W.array, plain.lateral.W.array)


def test_link_hooks_see_forward():
    lstm = GradClipLSTM(3, 4)
    with chainer.link_hooks.TimerHook() as hook:
        lstm(np.zeros((2, 3), np.float32))
    assert [name for name, _ in hook.call_history] == \
        ['Linear', 'GradClipLSTM']


def test_clip_min_above_clip_max_is_refused_at_construction():
    with pytest.raises(ValueError, match='clip_min'):
        GradClipLSTM(3, 4, clip_min=1.0, clip_max=0.5)


def test_state_follows_the_link_to_another_device():
    lstm = GradClipLSTM(3, 4)
    lstm(np.zeros((2, 3), np.float32))
    lstm.to_device('@numpy')
    assert isinstance(lstm.c.array, np.ndarray)


@pytest.mark.gpu
def test_gpu_gradients_match_cpu():
    ours = GradClipLSTM(3, 4, clip_min=-0.01, clip_max=0.01)
    gpu = ours.copy(mode='copy')
    gpu.to_device('@cupy:0')
    xs = _sequence(steps=3, batch=3, seed=3)
    for link, to in ((ours, np.asarray), (gpu, chainer.backends.cuda.to_gpu)):
        link.cleargrads()
        loss = 0
        for x in xs:
            loss = loss + F.sum(link(to(x)) ** 2)
        loss.backward()
    for (name, p), (_, q) in zip(sorted(ours.namedparams()), sorted(gpu.namedparams())):
        np.testing.assert_allclose(p.grad, chainer.backends.cuda.to_cpu(q.grad), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_x_as_a_list_is_refused_naming_x():
    with pytest.raises(TypeError, match='input x must be an array .*got list'):
        GradClipLSTM(3, 4)([[0.0] * 3] * 2)


@pytest.mark.parametrize('args, kwargs, error, message', [
    ((0, 4), {}, ValueError, '^in_size must be a positive integer or None, got 0'),
    ((4, 0), {}, ValueError, '^out_size must be a positive integer, got 0'),
    ((0,), {}, ValueError, '^in_size must be a positive integer, got 0'),
    ((None,), {}, TypeError, '^in_size must be a positive integer, got None'),
    ((True, 4), {}, TypeError, '^in_size must be'),
    ((2, 4.0), {}, TypeError, '^out_size must be'),
    ((2, '4'), {}, TypeError, '^out_size must be'),
    ((2, 4), {'lateral_init': 'abc'}, TypeError, '^lateral_init must be an initializer'),
    ((2, 4), {'upward_init': 'abc'}, TypeError, '^upward_init must be an initializer'),
    ((2, 4), {'bias_init': 'abc'}, TypeError, '^bias_init must be an initializer'),
    ((2, 4), {'forget_bias_init': True}, TypeError, '^forget_bias_init must be'),
])
def test_bad_sizes_and_initializers_are_refused_naming_them(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        GradClipLSTM(*args, **kwargs)


@pytest.mark.parametrize('kwargs', [{}, {'lateral_init': 0.5},
                                    {'upward_init': chainer.initializers.Normal()},
                                    {'bias_init': np.float32(0.5)}])
def test_sizes_and_initializers_chainer_takes_are_taken(kwargs):
    assert GradClipLSTM(2, 4, **kwargs).state_size == 4
    assert GradClipLSTM(4).state_size == 4 and GradClipLSTM(None, 4).state_size == 4
