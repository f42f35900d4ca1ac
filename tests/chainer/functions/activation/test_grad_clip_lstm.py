"""grad_clip_lstm: forward equals F.lstm, the gate gradient is clipped, c_prev's is not."""
import chainer
import chainer.functions as F
import numpy as np
import pytest
from chainer import gradient_check
from chainer.utils.type_check import InvalidType

from researchutils.chainer.functions import GradClipLSTM, grad_clip_lstm

TOLERANCE = {
    np.float16: dict(atol=5e-3, rtol=5e-3),
    np.float32: dict(atol=1e-5, rtol=1e-5),
    np.float64: dict(atol=1e-12, rtol=1e-12),
}

# (batch of x, batch of c_prev, units, trailing dimensions)
SHAPES = [
    (3, 3, 4, ()),
    (2, 4, 3, ()),      # c_prev larger than x: extra rows pass through
    (0, 2, 3, ()),      # batch 0
    (3, 3, 2, (3,)),    # trailing dimensions
    (2, 3, 2, (2, 3)),
]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _reference_forward(c_prev, x):
    """Plain NumPy LSTM in float64; gates interleaved: channel 4u+g is unit u, gate g."""
    c_prev = c_prev.astype(np.float64)
    x = x.astype(np.float64)
    batch = len(x)
    a = np.tanh(x[:, 0::4])
    i = _sigmoid(x[:, 1::4])
    f = _sigmoid(x[:, 2::4])
    o = _sigmoid(x[:, 3::4])
    c = c_prev.copy()
    c[:batch] = a * i + f * c_prev[:batch]
    h = o * np.tanh(c[:batch])
    return c, h


def _reference_backward(c_prev, x, gc, gh):
    """Unclipped gradients of the plain LSTM with respect to (c_prev, x), in float64."""
    c_prev, x, gc, gh = (v.astype(np.float64) for v in (c_prev, x, gc, gh))
    batch = len(x)
    a = np.tanh(x[:, 0::4])
    i = _sigmoid(x[:, 1::4])
    f = _sigmoid(x[:, 2::4])
    o = _sigmoid(x[:, 3::4])
    c = a * i + f * c_prev[:batch]
    tanh_c = np.tanh(c)
    dc = gc[:batch] + gh * o * (1 - tanh_c ** 2)
    gx = np.empty_like(x)
    gx[:, 0::4] = dc * i * (1 - a ** 2)
    gx[:, 1::4] = dc * a * i * (1 - i)
    gx[:, 2::4] = dc * c_prev[:batch] * f * (1 - f)
    gx[:, 3::4] = gh * tanh_c * o * (1 - o)
    gc_prev = gc.copy()
    gc_prev[:batch] = dc * f
    return gc_prev, gx


def _inputs(shape, dtype, seed=0):
    batch, c_batch, units, trailing = shape
    rng = np.random.RandomState(seed)
    c_prev = rng.uniform(-1, 1, (c_batch, units) + trailing).astype(dtype)
    x = rng.uniform(-1, 1, (batch, 4 * units) + trailing).astype(dtype)
    gc = rng.uniform(-1, 1, c_prev.shape).astype(dtype)
    gh = rng.uniform(-1, 1, (batch, units) + trailing).astype(dtype)
    return c_prev, x, gc, gh


def _gradients(function, c_prev, x, gc, gh):
    c_var, x_var = chainer.Variable(c_prev), chainer.Variable(x)
    c, h = function(c_var, x_var)
    loss = F.sum(c * gc)
    if h.size:
        loss = loss + F.sum(h * gh)
    loss.backward()
    return c_var.grad, x_var.grad


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
def test_forward_matches_numpy_reference_and_f_lstm(shape, dtype):
    c_prev, x, _, _ = _inputs(shape, dtype)
    c, h = grad_clip_lstm(c_prev, x, clip_min=-0.1, clip_max=0.1)
    c_ref, h_ref = _reference_forward(c_prev, x)
    assert c.dtype == dtype and h.dtype == dtype
    assert c.shape == c_prev.shape and h.shape == (shape[0], shape[2]) + shape[3]
    np.testing.assert_allclose(c.array, c_ref, **TOLERANCE[dtype])
    np.testing.assert_allclose(h.array, h_ref, **TOLERANCE[dtype])
    c_chainer, h_chainer = F.lstm(c_prev, x)
    np.testing.assert_allclose(c.array, c_chainer.array, **TOLERANCE[dtype])
    np.testing.assert_allclose(h.array, h_chainer.array, **TOLERANCE[dtype])


def test_rows_beyond_the_batch_pass_through_unchanged():
    c_prev, x, _, _ = _inputs((2, 5, 3, ()), np.float32)
    c, _ = grad_clip_lstm(c_prev, x)
    np.testing.assert_array_equal(c.array[2:], c_prev[2:])


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
def test_unbounded_gradients_equal_reference_and_f_lstm(shape, dtype):
    c_prev, x, gc, gh = _inputs(shape, dtype)
    gc_prev, gx = _gradients(grad_clip_lstm, c_prev, x, gc, gh)
    gc_ref, gx_ref = _reference_backward(c_prev, x, gc, gh)
    np.testing.assert_allclose(gc_prev, gc_ref, **TOLERANCE[dtype])
    np.testing.assert_allclose(gx, gx_ref, **TOLERANCE[dtype])
    gc_chainer, gx_chainer = _gradients(F.lstm, c_prev, x, gc, gh)
    np.testing.assert_allclose(gc_prev, gc_chainer, **TOLERANCE[dtype])
    np.testing.assert_allclose(gx, gx_chainer, **TOLERANCE[dtype])


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('bounds', [(-0.05, 0.05), (None, 0.02), (-0.02, None), (0.0, 0.0)])
def test_x_gradient_is_reference_clipped_and_c_prev_gradient_is_not(shape, dtype, bounds):
    clip_min, clip_max = bounds
    c_prev, x, gc, gh = _inputs(shape, dtype, seed=1)
    gc_prev, gx = _gradients(
        lambda c, x: grad_clip_lstm(c, x, clip_min, clip_max), c_prev, x, gc, gh)
    gc_ref, gx_ref = _reference_backward(c_prev, x, gc, gh)
    np.testing.assert_allclose(gx, np.clip(gx_ref, clip_min, clip_max), **TOLERANCE[dtype])
    np.testing.assert_allclose(gc_prev, gc_ref, **TOLERANCE[dtype])
    if gx.size and clip_min is not None and clip_max is not None:
        assert gx.min() >= dtype(clip_min) and gx.max() <= dtype(clip_max)


def test_clipping_is_active_in_the_bounded_cases():
    # Guards the test above against bounds that never bite.
    c_prev, x, gc, gh = _inputs((3, 3, 4, ()), np.float64, seed=1)
    _, gx_ref = _reference_backward(c_prev, x, gc, gh)
    assert (gx_ref > 0.05).any() and (gx_ref < -0.05).any()


@pytest.mark.parametrize('c_missing', [True, False])
def test_a_missing_output_gradient_counts_as_zero(c_missing):
    c_prev, x, gc, gh = _inputs((3, 3, 4, ()), np.float64)
    c_var, x_var = chainer.Variable(c_prev), chainer.Variable(x)
    c, h = grad_clip_lstm(c_var, x_var, -0.05, 0.05)
    if c_missing:
        F.sum(h * gh).backward()
        gc = np.zeros_like(gc)
    else:
        F.sum(c * gc).backward()
        gh = np.zeros_like(gh)
    gc_ref, gx_ref = _reference_backward(c_prev, x, gc, gh)
    np.testing.assert_allclose(c_var.grad, gc_ref, atol=1e-12)
    np.testing.assert_allclose(x_var.grad, np.clip(gx_ref, -0.05, 0.05), atol=1e-12)


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('bounds', [(None, None), (-0.05, 0.05), (None, 0.03)])
def test_double_backward_matches_numerical_gradient(shape, bounds):
    clip_min, clip_max = bounds
    c_prev, x, gc, gh = _inputs(shape, np.float64, seed=2)
    rng = np.random.RandomState(3)
    ggc = rng.uniform(-1, 1, c_prev.shape)
    ggx = rng.uniform(-1, 1, x.shape)
    gradient_check.check_double_backward(
        lambda c, x: grad_clip_lstm(c, x, clip_min, clip_max),
        (c_prev, x), (gc, gh), (ggc, ggx), dtype=np.float64, atol=1e-6, rtol=1e-5)


def test_double_backward_gradient_is_zero_where_clipped():
    c_prev, x, gc, gh = _inputs((3, 3, 4, ()), np.float64, seed=4)
    _, gx_ref = _reference_backward(c_prev, x, gc, gh)
    clipped = np.abs(gx_ref) > 0.05
    assert clipped.any() and (~clipped).any()
    x_var = chainer.Variable(x)
    c, h = grad_clip_lstm(c_prev, x_var, -0.05, 0.05)
    gx, = chainer.grad([c, h], [x_var], [chainer.Variable(gc), chainer.Variable(gh)],
                       enable_double_backprop=True)
    # The sum of the clipped entries of gx is constant in x: differentiating it gives 0.
    gx_clipped_only = F.sum(gx * clipped.astype(np.float64))
    ggx_clipped, = chainer.grad([gx_clipped_only], [x_var])
    np.testing.assert_allclose(ggx_clipped.array, 0, atol=1e-14)


@pytest.mark.parametrize('dtype', [np.float16, np.float32])
def test_double_backward_in_low_precision_agrees_with_float64(dtype):
    c_prev, x, gc, gh = _inputs((2, 3, 2, ()), np.float64, seed=5)

    def second_order(dt):
        x_var = chainer.Variable(x.astype(dt))
        c_var = chainer.Variable(c_prev.astype(dt))
        c, h = grad_clip_lstm(c_var, x_var, -0.05, 0.05)
        gx, = chainer.grad([c, h], [x_var], [chainer.Variable(gc.astype(dt)),
                                            chainer.Variable(gh.astype(dt))],
                           enable_double_backprop=True)
        return chainer.grad([F.sum(gx * gx)], [x_var, c_var])

    expected = second_order(np.float64)
    for got, want in zip(second_order(dtype), expected):
        assert got.dtype == dtype
        np.testing.assert_allclose(got.array, want.array, atol=2e-2 if dtype == np.float16
                                   else 1e-5, rtol=2e-2)


def test_clip_min_above_clip_max_is_refused_at_call_time():
    c_prev, x, _, _ = _inputs((2, 2, 3, ()), np.float32)
    with pytest.raises(ValueError, match='clip_min.*clip_max'):
        grad_clip_lstm(c_prev, x, clip_min=1.0, clip_max=-1.0)


@pytest.mark.parametrize('bad', ['1', True, [1.0], 1j])
def test_non_numeric_bound_is_a_type_error(bad):
    c_prev, x, _, _ = _inputs((2, 2, 3, ()), np.float32)
    with pytest.raises(TypeError, match='clip_min'):
        grad_clip_lstm(c_prev, x, clip_min=bad)
    with pytest.raises(TypeError, match='clip_max'):
        GradClipLSTM(clip_max=bad)


def test_nan_bound_is_a_value_error():
    with pytest.raises(ValueError, match='clip_max'):
        GradClipLSTM(clip_max=float('nan'))


@pytest.mark.parametrize('make_inputs', [
    lambda: (np.zeros((2, 3), np.float32), np.zeros((2, 11), np.float32)),   # not 4*U
    lambda: (np.zeros((2, 3), np.float32), np.zeros((3, 12), np.float32)),   # x batch > c
    lambda: (np.zeros((2, 3), np.float32), np.zeros((2, 12), np.float64)),   # dtypes differ
    lambda: (np.zeros((2, 3), np.int32), np.zeros((2, 12), np.int32)),       # not float
    lambda: (np.zeros((2, 3, 2), np.float32), np.zeros((2, 12), np.float32)),  # ndim differs
    lambda: (np.zeros((2, 3, 2), np.float32), np.zeros((2, 12, 3), np.float32)),  # trailing
    lambda: (np.zeros((3,), np.float32), np.zeros((12,), np.float32)),       # ndim < 2
])
def test_bad_shapes_and_dtypes_fail_the_type_check(make_inputs):
    c_prev, x = make_inputs()
    with pytest.raises(InvalidType):
        grad_clip_lstm(c_prev, x)


@pytest.mark.gpu
@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('bounds', [(None, None), (-0.05, 0.05), (None, 0.02)])
def test_gpu_matches_cpu(shape, dtype, bounds):
    from chainer.backends import cuda
    c_prev, x, gc, gh = _inputs(shape, dtype, seed=6)

    def run(to):
        c_var, x_var = chainer.Variable(to(c_prev)), chainer.Variable(to(x))
        c, h = grad_clip_lstm(c_var, x_var, *bounds)
        loss = F.sum(c * to(gc))
        if h.size:
            loss = loss + F.sum(h * to(gh))
        loss.backward()
        return [cuda.to_cpu(a) for a in (c.array, h.array, c_var.grad, x_var.grad)]

    for got, want in zip(run(cuda.to_gpu), run(lambda a: a)):
        np.testing.assert_allclose(got, want, **TOLERANCE[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize('bounds', [(None, None), (-0.05, 0.05)])
def test_gpu_double_backward_matches_numerical_gradient(bounds):
    from chainer.backends import cuda
    c_prev, x, gc, gh = _inputs((3, 4, 3, (2,)), np.float64, seed=7)
    rng = np.random.RandomState(8)
    arrays = [cuda.to_gpu(a) for a in (c_prev, x, gc, gh, rng.uniform(-1, 1, c_prev.shape),
                                       rng.uniform(-1, 1, x.shape))]
    gradient_check.check_double_backward(
        lambda c, x: grad_clip_lstm(c, x, *bounds), tuple(arrays[:2]), tuple(arrays[2:4]),
        tuple(arrays[4:]), dtype=np.float64, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('layout', ['contiguous', 'transposed'])
@pytest.mark.parametrize('bounds', [(-0.01, 0.01), (None, 0.01), (-0.01, None)])
def test_wide_rows_are_clipped_whatever_the_memory_layout(dtype, layout, bounds):
    # Rows of 4 * 16 * 8 = 512 elements take the vectorized clip; a transposed x must too.
    rng = np.random.RandomState(9)
    c_prev = rng.uniform(-1, 1, (2, 16, 8)).astype(dtype)
    x = rng.uniform(-3, 3, (2, 64, 8)).astype(dtype)
    if layout == 'transposed':
        x = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
        assert not x.flags.c_contiguous
    gc = rng.uniform(-1, 1, c_prev.shape).astype(dtype) * 50
    gh = rng.uniform(-1, 1, (2, 16, 8)).astype(dtype) * 50
    gc_prev, gx = _gradients(lambda c, x: grad_clip_lstm(c, x, *bounds), c_prev, x, gc, gh)
    gc_ref, gx_ref = _reference_backward(c_prev, x, gc, gh)
    assert (np.abs(gx_ref) > 0.01).mean() > 0.5
    # Gradients are scaled up 50 times: scale the absolute tolerance with them.
    tolerance = dict(rtol=TOLERANCE[dtype]['rtol'], atol=TOLERANCE[dtype]['atol'] * 50)
    np.testing.assert_allclose(gx, np.clip(gx_ref, *bounds), **tolerance)
    np.testing.assert_allclose(gc_prev, gc_ref, **tolerance)
    if bounds[0] is not None:
        assert gx.min() >= dtype(bounds[0])
    if bounds[1] is not None:
        assert gx.max() <= dtype(bounds[1])


@pytest.mark.parametrize('name', ['c_prev', 'x'])
@pytest.mark.parametrize('value', [None, [[1.0, 2.0]]])
def test_an_input_that_is_not_an_array_is_refused_naming_it(name, value):
    inputs = {'c_prev': np.zeros((1, 2), np.float32), 'x': np.zeros((1, 8), np.float32)}
    inputs[name] = value
    with pytest.raises(TypeError, match='^{} must be an array or a chainer.Variable'.format(name)):
        grad_clip_lstm(**inputs)
