"""researchutils.pytorch.functions: each function equals its Chainer twin, Chainer's own result
being the reference, in the output, every gradient, and the gradients of the gradients."""
import chainer
import numpy as np
import pytest

torch = pytest.importorskip('torch')

import researchutils.chainer.functions as chainer_functions  # noqa: E402
from researchutils.pytorch.functions import (  # noqa: E402
    average_k_step_squared_error,
    grad_clip_lstm,
)
from tests.support.torch_twins import assert_equal_to_chainer, to_torch  # noqa: E402

# (batch of x, batch of c_prev, units, trailing dimensions)
SHAPES = [
    (3, 3, 4, ()),
    (2, 4, 3, ()),      # c_prev larger than x: its extra rows pass through
    (3, 3, 2, (3,)),    # trailing dimensions, as ConvLSTM's feature maps
    (2, 3, 2, (2, 3)),
]
CLIP = 0.05


def _case(shape, seed, dtype=np.float32):
    batch, state_batch, units, rest = shape
    rng = np.random.RandomState(seed)
    c_prev = rng.randn(state_batch, units, *rest).astype(dtype)
    x = (2 * rng.randn(batch, 4 * units, *rest)).astype(dtype)
    gc = rng.randn(state_batch, units, *rest).astype(dtype)
    gh = rng.randn(batch, units, *rest).astype(dtype)
    return c_prev, x, gc, gh


def _chainer_gradients(c_prev, x, gc, gh, clip_min, clip_max):
    c_var, x_var = chainer.Variable(c_prev), chainer.Variable(x)
    c, h = chainer_functions.grad_clip_lstm(c_var, x_var, clip_min, clip_max)
    c.grad, h.grad = gc, gh
    chainer.backward([c, h])  # both outputs at once, as torch's backward below
    return c_var.grad, x_var.grad


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_forward_equals_chainers(shape, dtype):
    c_prev, x, _, _ = _case(shape, 0, dtype)
    expected_c, expected_h = chainer_functions.grad_clip_lstm(c_prev, x, -CLIP, CLIP)
    c, h = grad_clip_lstm(to_torch(c_prev), to_torch(x), -CLIP, CLIP)
    assert_equal_to_chainer(c, expected_c.array, 1e-6, 'c')
    assert_equal_to_chainer(h, expected_h.array, 1e-6, 'h')


def test_the_gate_layout_is_chainers_interleaved_one():
    # Only gate f of unit 1 (channel 4 * 1 + 2) is open: c keeps c_prev in unit 1 alone.
    x = torch.full((1, 8), -30.0)
    x[0, 6] = 30.0
    c, _ = grad_clip_lstm(torch.tensor([[5.0, 7.0]]), x)
    np.testing.assert_allclose(c.numpy(), [[0.0, 7.0]], atol=1e-6)


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('bounds', [(-CLIP, CLIP), (None, CLIP), (-CLIP, None)])
def test_gradients_equal_chainers_with_the_clip_active(shape, bounds):
    c_prev, x, gc, gh = _case(shape, 1)
    raw = _chainer_gradients(c_prev, x, gc, gh, None, None)[1]
    low = -np.inf if bounds[0] is None else bounds[0]
    high = np.inf if bounds[1] is None else bounds[1]
    outside = (raw < low) | (raw > high)
    assert outside.any() and not outside.all()  # the clip acts, on some gates only
    expected_gc_prev, expected_gx = _chainer_gradients(c_prev, x, gc, gh, *bounds)

    c_var, x_var = to_torch(c_prev, True), to_torch(x, True)
    c, h = grad_clip_lstm(c_var, x_var, *bounds)
    torch.autograd.backward([c, h], [to_torch(gc), to_torch(gh)])
    assert_equal_to_chainer(x_var.grad, expected_gx, 1e-5, 'gradient of x')
    assert_equal_to_chainer(c_var.grad, expected_gc_prev, 1e-5, 'gradient of c_prev')


def test_an_output_left_unused_contributes_no_gradient_as_in_chainer():
    c_prev, x, gc, _ = _case(SHAPES[1], 2)
    c_var, x_var = chainer.Variable(c_prev), chainer.Variable(x)
    c, _ = chainer_functions.grad_clip_lstm(c_var, x_var, -CLIP, CLIP)
    c.grad = gc
    c.backward()
    c_torch, x_torch = to_torch(c_prev, True), to_torch(x, True)
    c, _ = grad_clip_lstm(c_torch, x_torch, -CLIP, CLIP)
    c.backward(to_torch(gc))
    assert_equal_to_chainer(x_torch.grad, x_var.grad, 1e-5, 'gradient of x')
    assert_equal_to_chainer(c_torch.grad, c_var.grad, 1e-5, 'gradient of c_prev')


@pytest.mark.parametrize('shape', [SHAPES[0], SHAPES[1], SHAPES[3]])
def test_double_backward_equals_chainers_with_the_clip_active(shape):
    c_prev, x, gc, gh = _case(shape, 3)
    rng = np.random.RandomState(4)
    ggc_prev = rng.randn(*c_prev.shape).astype(np.float32)
    ggx = rng.randn(*x.shape).astype(np.float32)
    raw = _chainer_gradients(c_prev, x, gc, gh, None, None)[1]
    assert (np.abs(raw) > CLIP).any() and (np.abs(raw) < CLIP).any()

    variables = [chainer.Variable(array) for array in (c_prev, x, gc, gh)]
    c, h = chainer_functions.grad_clip_lstm(variables[0], variables[1], -CLIP, CLIP)
    first = chainer.grad([c, h], variables[:2], grad_outputs=variables[2:],
                         enable_double_backprop=True)
    second_loss = (chainer.functions.sum(first[0] * ggc_prev)
                   + chainer.functions.sum(first[1] * ggx))
    expected = chainer.grad([second_loss], variables)

    tensors = [to_torch(array, True) for array in (c_prev, x, gc, gh)]
    c, h = grad_clip_lstm(tensors[0], tensors[1], -CLIP, CLIP)
    first = torch.autograd.grad([c, h], tensors[:2], grad_outputs=tensors[2:],
                                create_graph=True)
    second_loss = (first[0] * to_torch(ggc_prev)).sum() + (first[1] * to_torch(ggx)).sum()
    actual = torch.autograd.grad(second_loss, tensors)
    for name, value, reference in zip(('c_prev', 'x', 'gc', 'gh'), actual, expected):
        assert_equal_to_chainer(value, reference.array, 1e-5, 'second gradient of ' + name)


@pytest.mark.parametrize('arguments, error, words', [
    (lambda: (np.zeros((1, 2), np.float32), torch.zeros(1, 8)), TypeError, 'c_prev'),
    (lambda: (torch.zeros(1, 2), torch.zeros(1, 8, dtype=torch.int64)), TypeError,
     'x must be a floating point torch.Tensor, got dtype torch.int64'),
    (lambda: (torch.zeros(1, 2), torch.zeros(1, 8, dtype=torch.float64)), TypeError,
     'x must have the dtype of c_prev, torch.float32, got torch.float64'),
    (lambda: (torch.zeros(1, 2), torch.zeros(1, 6)), ValueError, r'x of shape \(1, 6\)'),
    (lambda: (torch.zeros(1, 2), torch.zeros(2, 8)), ValueError, r'c_prev of shape \(1, 2\)'),
    (lambda: (torch.zeros(2), torch.zeros(8)), ValueError, 'at least 2 dimensions'),
    (lambda: (torch.zeros(1, 2, 3), torch.zeros(1, 8, 4)), ValueError, 'x of shape'),
])
def test_bad_tensors_are_refused_naming_them(arguments, error, words):
    with pytest.raises(error, match=words):
        grad_clip_lstm(*arguments())


@pytest.mark.parametrize('bounds, error, words', [
    ((1.0, -1.0), ValueError, 'clip_min must not exceed clip_max'),
    ((True, None), TypeError, 'clip_min must be a number'),
    ((None, float('nan')), ValueError, 'clip_max must be a number'),
])
def test_bad_bounds_are_refused_as_chainer_refuses_them(bounds, error, words):
    with pytest.raises(error, match=words) as ours:
        grad_clip_lstm(torch.zeros(1, 2), torch.zeros(1, 8), *bounds)
    with pytest.raises(error) as chainers:
        chainer_functions.grad_clip_lstm(np.zeros((1, 2), np.float32),
                                         np.zeros((1, 8), np.float32), *bounds)
    assert str(ours.value) == str(chainers.value)


def _loss_case(seed, shape=(3, 4, 5), dtype=np.float32):
    rng = np.random.RandomState(seed)
    return rng.randn(*shape).astype(dtype), rng.randn(*shape).astype(dtype)


@pytest.mark.parametrize('dtype, rtol', [(np.float32, 1e-6), (np.float64, 1e-12),
                                         (np.float16, 1e-3)])
def test_loss_and_its_gradients_equal_chainers(dtype, rtol):
    x1, x2 = _loss_case(5, dtype=dtype)
    variables = [chainer.Variable(x1), chainer.Variable(x2)]
    expected = chainer_functions.average_k_step_squared_error(*variables, k_step=3)
    expected.backward()
    tensors = [to_torch(x1, True), to_torch(x2, True)]
    loss = average_k_step_squared_error(*tensors, k_step=3)
    loss.backward()
    assert_equal_to_chainer(loss, expected.array, rtol, 'loss')
    for name, tensor, variable in zip(('x1', 'x2'), tensors, variables):
        assert_equal_to_chainer(tensor.grad, variable.grad, 10 * rtol, 'gradient of ' + name)


def test_the_loss_differentiates_twice_as_chainers():
    x1, x2 = _loss_case(6)
    weight = np.random.RandomState(7).randn(*x1.shape).astype(np.float32)
    variables = [chainer.Variable(x1), chainer.Variable(x2)]
    loss = chainer_functions.average_k_step_squared_error(*variables, k_step=2)
    gx1, = chainer.grad([loss], variables[:1], enable_double_backprop=True)
    expected = chainer.grad([chainer.functions.sum(gx1 * gx1 * weight)], variables)
    tensors = [to_torch(x1, True), to_torch(x2, True)]
    loss = average_k_step_squared_error(*tensors, k_step=2)
    gx1, = torch.autograd.grad(loss, tensors[:1], create_graph=True)
    actual = torch.autograd.grad((gx1 * gx1 * to_torch(weight)).sum(), tensors)
    for name, value, reference in zip(('x1', 'x2'), actual, expected):
        assert_equal_to_chainer(value, reference.array, 1e-5, 'second gradient of ' + name)


@pytest.mark.parametrize('arguments, error, words', [
    (lambda: (torch.zeros(2), torch.zeros(2), 0), ValueError,
     'k_step must be a positive integer, got 0'),
    (lambda: (torch.zeros(2), torch.zeros(2), 1.5), ValueError, 'k_step'),
    (lambda: (torch.zeros(2), torch.zeros(3), 1), ValueError,
     r'x2 must have the shape of x1, \(2,\), got \(3,\)'),
    (lambda: (torch.zeros(2), torch.zeros(2, dtype=torch.float64), 1), TypeError,
     'x2 must have the dtype of x1'),
    (lambda: ([0.0, 1.0], torch.zeros(2), 1), TypeError, 'x1 must be a floating point'),
])
def test_bad_loss_arguments_are_refused_naming_them(arguments, error, words):
    with pytest.raises(error, match=words):
        average_k_step_squared_error(*arguments())
