"""ConvLSTM: convolutional LSTM with peepholes (Shi et al. 2015), state kept like L.LSTM."""
import chainer
import chainer.functions as F
import numpy as np
import pytest
from chainer import gradient_check

from researchutils.chainer.links import ConvLSTM
from researchutils.chainer.links.connection import conv_lstm
from tests.support.clip_gradient import clip_gradient

GATES = ('i', 'f', 'o', 'c')


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numpy_conv(x, W, b, stride):
    """'Same' correlation with zero padding ksize // 2 and the given stride."""
    out_channels, _, kh, kw = W.shape
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    out_h = (padded.shape[2] - kh) // stride + 1
    out_w = (padded.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], out_channels, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            patch = padded[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum('bckl,ockl->bo', patch, W)
    if b is not None:
        out += b[None, :, None, None]
    return out


def _numpy_step(params, x, c, h, stride):
    """One step of Shi et al. (2015), equations (3), in plain NumPy."""
    def pre(gate):
        z = _numpy_conv(x, params['Wx' + gate + '/W'], params['Wx' + gate + '/b'], stride)
        if h is not None:
            z = z + _numpy_conv(h, params['Wh' + gate + '/W'], None, 1)
        return z
    if c is None:
        c = np.zeros_like(pre('c'))
    i = _sigmoid(pre('i') + params['Wci'] * c)
    f = _sigmoid(pre('f') + params['Wcf'] * c)
    c_new = f * c + i * np.tanh(pre('c'))
    o = _sigmoid(pre('o') + params['Wco'] * c_new)
    return c_new, o * np.tanh(c_new)


def _params(link):
    return {name.lstrip('/'): p.array for name, p in link.namedparams()}


def _link(in_channels=2, out_channels=3, ksize=3, stride=1, dtype=np.float64, spatial=(5, 4),
          batch=2, seed=0, **kwargs):
    """A link with every parameter (peepholes and biases included) random and non-zero."""
    with chainer.using_config('dtype', dtype):
        link = ConvLSTM(in_channels, out_channels, ksize, stride,
                        initial_bias=chainer.initializers.Uniform(0.5), **kwargs)
        link(np.zeros((batch, in_channels or 2) + spatial, dtype))  # sizes the peepholes
    link.reset_state()
    rng = np.random.RandomState(seed)
    for param in link.params():
        param.array[...] = rng.uniform(-0.8, 0.8, param.shape)
    return link


def _inputs(steps=3, batch=2, channels=2, spatial=(5, 4), seed=1, dtype=np.float64):
    rng = np.random.RandomState(seed)
    return [rng.uniform(-1, 1, (batch, channels) + spatial).astype(dtype) for _ in range(steps)]


def test_parameter_names_and_shapes_are_the_originals():
    link = ConvLSTM(2, 3, 5)
    link(np.zeros((1, 2, 6, 7), np.float32))
    shapes = {name: p.shape for name, p in link.namedparams()}
    expected = {}
    for gate in GATES:
        expected['/Wx{}/W'.format(gate)] = (3, 2, 5, 5)
        expected['/Wx{}/b'.format(gate)] = (3,)
        expected['/Wh{}/W'.format(gate)] = (3, 3, 5, 5)
    for gate in 'ifo':
        expected['/Wc{}'.format(gate)] = (1, 3, 6, 7)
    assert shapes == expected


@pytest.mark.parametrize('stride, ksize', [(1, 3), (2, 3), (1, 1), (3, 5)])
def test_steps_equal_numpy_reference(stride, ksize):
    link = _link(ksize=ksize, stride=stride)
    params = _params(link)
    c = h = None
    for x in _inputs():
        c, h = _numpy_step(params, x, c, h, stride)
        y = link(x)
        np.testing.assert_allclose(y.array, h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(link.c.array, c, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(link.h.array, h, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('spatial, stride, expected', [
    ((6, 7), 1, (6, 7)), ((6, 7), 2, (3, 4)), ((7, 5), 3, (3, 2)), ((7, 5), (2, 1), (4, 5))])
def test_state_keeps_the_input_size_divided_by_stride_rounded_up(spatial, stride, expected):
    link = ConvLSTM(2, 3, 3, stride)
    y = link(np.zeros((2, 2) + spatial, np.float32))
    y = link(np.zeros((2, 2) + spatial, np.float32))
    assert y.shape == link.c.shape == (2, 3) + expected
    assert link.Wci.shape == (1, 3) + expected


def test_gradients_of_two_steps():
    link = _link(ksize=3)
    x1, x2 = _inputs(steps=2)

    def two_steps(x1, x2):
        link.reset_state()
        link(x1)
        return link(x2), link.c

    rng = np.random.RandomState(2)
    gy = [rng.uniform(-1, 1, (2, 3, 5, 4)) for _ in range(2)]
    gradient_check.check_backward(two_steps, (x1, x2), gy, tuple(link.params()),
                                  eps=1e-6, atol=1e-6, rtol=1e-5)


def test_gradients_with_clipping_are_those_of_the_clipped_reference():
    # Away from the clip bounds the clipped function is smooth: numerical gradients of the
    # unclipped cell do not apply, so compare with F-composed reference instead.
    ours = _link(ksize=3, clip_min=-0.05, clip_max=0.05)
    plain = _link(ksize=3)
    plain.copyparams(ours)
    x1, x2 = _inputs(steps=2)
    grads = {}
    for name, link in (('ours', ours), ('reference', plain)):
        link.cleargrads()
        link.reset_state()
        if name == 'ours':
            link(x1)
            y = link(x2)
        else:
            y = _reference_two_steps(link, x1, x2, -0.05, 0.05)
        F.sum(y * y).backward()
        grads[name] = {n: p.grad.copy() for n, p in link.namedparams()}
    for name in grads['ours']:
        np.testing.assert_allclose(grads['ours'][name], grads['reference'][name],
                                   rtol=1e-10, atol=1e-12, err_msg=name)


def test_clipping_changes_the_gradients():
    clipped = _link(ksize=3, clip_min=-0.05, clip_max=0.05)
    plain = _link(ksize=3)
    x1, x2 = _inputs(steps=2)
    grads = []
    for link in (clipped, plain):
        link.cleargrads()
        link(x1)
        F.sum(link(x2) ** 2).backward()
        grads.append(link.Wxi.W.grad.copy())
    assert np.abs(grads[0] - grads[1]).max() > 1e-3


def _reference_two_steps(link, x1, x2, low, high):
    return _reference_steps(link, (x1, x2), low, high)[-1]


def _reference_steps(link, xs, low, high, output_gate_bounds=None):
    """The cell composed from Chainer functions, the gate pre-activation gradients clipped.

    ``None`` for a bound leaves that side unclipped. ``output_gate_bounds``, a pair, clips the
    output gate otherwise than the others. Returns the output of every step.
    """
    def clip(z, bounds=(low, high)):
        return clip_gradient(z, *bounds)

    kh, kw = link.Wxi.W.shape[2:]
    pad = (kh // 2, kw // 2)

    def pre(gate, x, h):
        conv = getattr(link, 'Wx' + gate)
        z = F.convolution_2d(x, conv.W, conv.b, pad=pad)
        if h is not None:
            z = z + F.convolution_2d(h, getattr(link, 'Wh' + gate).W, pad=pad)
        return z

    c = h = None
    outputs = []
    for x in xs:
        if c is None:
            c = np.zeros(pre('c', x, h).shape)
        i = F.sigmoid(clip(pre('i', x, h) + F.broadcast_to(link.Wci, c.shape) * c))
        f = F.sigmoid(clip(pre('f', x, h) + F.broadcast_to(link.Wcf, c.shape) * c))
        c = f * c + i * F.tanh(clip(pre('c', x, h)))
        o = F.sigmoid(clip(pre('o', x, h) + F.broadcast_to(link.Wco, c.shape) * c,
                           output_gate_bounds or (low, high)))
        h = o * F.tanh(c)
        outputs.append(h)
    return outputs


def _gradients(link, outputs_of_link):
    """Parameter gradients of a loss over every step's output, with weights of both signs
    (so that gate gradients of both signs occur, as one-sided clipping needs)."""
    link.cleargrads()
    link.reset_state()
    rng = np.random.RandomState(6)
    loss = 0
    for y in outputs_of_link():
        loss = loss + F.sum(y * rng.uniform(-1, 1, y.shape))
    loss.backward()
    return {name: param.grad.copy() for name, param in link.namedparams()}


def _outputs(link, xs):
    return [link(x) for x in xs]


@pytest.mark.parametrize('low, high', [(None, 0.05), (-0.05, None)])
def test_one_bound_clips_every_gate_on_that_side_only(low, high):
    # grad_clip_lstm's contract: a None bound leaves that side unbounded. The output gate,
    # applied apart from the fused cell, must follow it like the other three.
    ours = _link(ksize=3, clip_min=low, clip_max=high)
    plain = _link(ksize=3)
    xs = _inputs(steps=3)
    got = _gradients(ours, lambda: _outputs(ours, xs))
    want = _gradients(plain, lambda: _reference_steps(plain, xs, low, high))
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    # The test has teeth: the output gate's gradient crosses the bound left open, so
    # clipping that gate on both sides, or not at all, gives other gradients.
    bound = high if low is None else -low
    for output_gate_bounds in ((-bound, bound), (None, None)):
        other = _gradients(plain, lambda bounds=output_gate_bounds: _reference_steps(
            plain, xs, low, high, bounds))
        assert np.abs(other['/Wxo/W'] - want['/Wxo/W']).max() > 1e-3


@pytest.mark.parametrize('ksize, stride', [((3, 5), 1), ((5, 3), 2)])
def test_a_non_square_kernel_over_several_steps(ksize, stride):
    link = _link(ksize=ksize, stride=stride, spatial=(6, 7))
    kh, kw = ksize
    assert link.Wxf.W.shape == (3, 2, kh, kw) and link.Whf.W.shape == (3, 3, kh, kw)
    params = _params(link)
    c = h = None
    for x in _inputs(steps=4, spatial=(6, 7)):
        c, h = _numpy_step(params, x, c, h, stride)
        y = link(x)
        assert y.shape == (2, 3, -(-6 // stride), -(-7 // stride))
        np.testing.assert_allclose(y.array, h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(link.c.array, c, rtol=1e-12, atol=1e-12)


def test_gradients_with_a_non_square_kernel_and_clipping_are_the_references():
    ours = _link(ksize=(3, 5), clip_min=-0.05, clip_max=0.05)
    plain = _link(ksize=(3, 5))
    xs = _inputs(steps=3)
    got = _gradients(ours, lambda: _outputs(ours, xs))
    want = _gradients(plain, lambda: _reference_steps(plain, xs, -0.05, 0.05))
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize('bounds', [{}, {'clip_min': -0.3, 'clip_max': 0.3}])
def test_double_backward(bounds):
    link = _link(ksize=3, spatial=(3, 3), **bounds)
    x1, x2 = _inputs(steps=2, spatial=(3, 3))
    rng = np.random.RandomState(4)

    def two_steps(x1, x2):
        link.reset_state()
        link(x1)
        return link(x2)

    gy = rng.uniform(-1, 1, (2, 3, 3, 3))
    params = (link.Wxi.W, link.Whf.W, link.Wco, link.Wci)
    gradient_check.check_double_backward(
        two_steps, (x1, x2), gy, tuple(rng.uniform(-1, 1, x1.shape) for _ in range(2)),
        params=params, params_grad_grad=tuple(rng.uniform(-1, 1, p.shape) for p in params),
        eps=1e-6, atol=1e-5, rtol=1e-4)


def test_in_channels_is_inferred_on_the_first_call():
    link = ConvLSTM(None, 3, 3)
    assert link.Wxi.W.array is None
    y = link(np.zeros((2, 5, 4, 4), np.float32))
    assert y.shape == (2, 3, 4, 4)
    assert link.Wxi.W.shape == (3, 5, 3, 3) and link.Whi.W.shape == (3, 3, 3, 3)


def test_reset_state_clears_c_and_h():
    link = ConvLSTM(2, 3, 3)
    link(np.zeros((2, 2, 4, 4), np.float32))
    link.reset_state()
    assert link.c is None and link.h is None


@pytest.mark.parametrize('how', ['set_state', 'reset_state'])
def test_given_state_is_used_by_the_next_step(how):
    link = _link(ksize=3)
    rng = np.random.RandomState(5)
    c, h = (rng.uniform(-1, 1, (2, 3, 5, 4)) for _ in range(2))
    getattr(link, how)(chainer.Variable(c), chainer.Variable(h))
    x, = _inputs(steps=1)
    c_expected, h_expected = _numpy_step(_params(link), x, c, h, 1)
    np.testing.assert_allclose(link(x).array, h_expected, rtol=1e-12)
    np.testing.assert_allclose(link.c.array, c_expected, rtol=1e-12)


def test_shrinking_batch_updates_only_the_first_rows():
    link = _link(ksize=3, batch=3)
    first, second = _inputs(steps=2, batch=3)
    link(first)
    c_before, h_before = link.c.array.copy(), link.h.array.copy()
    y = link(second[:2])
    c_expected, h_expected = _numpy_step(_params(link), second[:2], c_before[:2],
                                         h_before[:2], 1)
    np.testing.assert_allclose(y.array, h_expected, rtol=1e-12)
    np.testing.assert_allclose(link.c.array[:2], c_expected, rtol=1e-12)
    np.testing.assert_array_equal(link.c.array[2:], c_before[2:])
    np.testing.assert_array_equal(link.h.array[2:], h_before[2:])


def test_growing_batch_is_refused():
    link = ConvLSTM(2, 3, 3)
    link(np.zeros((2, 2, 4, 4), np.float32))
    with pytest.raises(TypeError, match='batch size'):
        link(np.zeros((3, 2, 4, 4), np.float32))


def test_other_spatial_size_than_the_peepholes_is_refused():
    link = ConvLSTM(2, 3, 3)
    link(np.zeros((2, 2, 4, 4), np.float32))
    link.reset_state()
    with pytest.raises(ValueError, match='Wci'):
        link(np.zeros((2, 2, 5, 4), np.float32))


def test_float32_state_follows_the_input():
    link = ConvLSTM(2, 3, 3)
    y = link(np.zeros((2, 2, 4, 4), np.float32))
    assert y.dtype == link.c.dtype == np.float32


def test_serialization_round_trips_into_a_fresh_link(tmp_path):
    link = _link(ksize=3)
    path = str(tmp_path / 'conv_lstm.npz')
    chainer.serializers.save_npz(path, link)
    with chainer.using_config('dtype', np.float64):
        fresh = ConvLSTM(2, 3, 3)
        chainer.serializers.load_npz(path, fresh)
    x, = _inputs(steps=1)
    np.testing.assert_array_equal(fresh(x).array, link(x).array)


def test_state_follows_the_link_to_another_device():
    link = ConvLSTM(2, 3, 3)
    link(np.zeros((2, 2, 4, 4), np.float32))
    link.to_device('@numpy')
    assert isinstance(link.c.array, np.ndarray) and isinstance(link.h.array, np.ndarray)


@pytest.mark.parametrize('kwargs, error, name', [
    ({'ksize': 4}, ValueError, 'ksize'),
    ({'ksize': (3, 2)}, ValueError, 'ksize'),
    ({'ksize': 0}, ValueError, 'ksize'),
    ({'ksize': 3.0}, TypeError, 'ksize'),
    ({'stride': 0}, ValueError, 'stride'),
    ({'out_channels': 0}, ValueError, 'out_channels'),
    ({'in_channels': 0}, ValueError, 'in_channels'),
    ({'clip_min': 1.0, 'clip_max': 0.5}, ValueError, 'clip_min'),
    ({'clip_min': 'a'}, TypeError, 'clip_min'),
])
def test_bad_arguments_are_refused_with_their_name(kwargs, error, name):
    arguments = dict(in_channels=2, out_channels=3, ksize=3)
    arguments.update(kwargs)
    with pytest.raises(error, match=name):
        ConvLSTM(**arguments)


def test_module_stays_a_module():
    assert conv_lstm.ConvLSTM is ConvLSTM


@pytest.mark.gpu
@pytest.mark.parametrize('bounds', [{}, {'clip_min': -0.01, 'clip_max': 0.01}])
def test_gpu_values_and_gradients_match_cpu(bounds):
    link = _link(ksize=3, dtype=np.float32, **bounds)
    gpu = link.copy(mode='copy')
    gpu.to_device('@cupy:0')
    xs = _inputs(steps=3, dtype=np.float32)
    outputs = []
    for model, to in ((link, np.asarray), (gpu, chainer.backends.cuda.to_gpu)):
        model.cleargrads()
        model.reset_state()
        loss = 0
        for x in xs:
            y = model(to(x))
            loss = loss + F.sum(y * y)
        loss.backward()
        outputs.append(chainer.backends.cuda.to_cpu(y.array))
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)
    for (name, p), (_, q) in zip(sorted(link.namedparams()), sorted(gpu.namedparams())):
        np.testing.assert_allclose(p.grad, chainer.backends.cuda.to_cpu(q.grad), rtol=1e-3,
                                   atol=1e-4, err_msg=name)
