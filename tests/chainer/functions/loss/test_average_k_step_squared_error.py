"""average_k_step_squared_error: sum of squared differences over 2 * k_step."""
import chainer
import numpy as np
import pytest
from chainer import gradient_check
from chainer.utils.type_check import InvalidType

from researchutils.chainer.functions import average_k_step_squared_error

SHAPES = [(4,), (2, 3), (2, 5, 3, 4), (0, 3)]


def _reference(x1, x2, k_step):
    diff = x1.astype(np.float64) - x2.astype(np.float64)
    return (diff ** 2).sum() / (2 * k_step)


def _inputs(shape, dtype, seed=0):
    rng = np.random.RandomState(seed)
    return (rng.uniform(-1, 1, shape).astype(dtype), rng.uniform(-1, 1, shape).astype(dtype))


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('k_step', [1, 3, 5])
def test_value_is_sum_of_squares_over_two_k(shape, dtype, k_step):
    x1, x2 = _inputs(shape, dtype)
    loss = average_k_step_squared_error(x1, x2, k_step)
    assert loss.shape == () and loss.dtype == dtype
    rtol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(float(loss.array), _reference(x1, x2, k_step), rtol=rtol)


def test_float16_sum_does_not_overflow_when_the_result_fits():
    # 200000 squared differences of 1: the float16 running sum would pass 65504.
    x1 = np.ones(200000, np.float16)
    x2 = np.zeros(200000, np.float16)
    loss = average_k_step_squared_error(x1, x2, 5)
    assert float(loss.array) == 20000.0


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
def test_gradient_is_difference_over_k(shape, dtype):
    x1, x2 = _inputs(shape, dtype, seed=1)
    v1, v2 = chainer.Variable(x1), chainer.Variable(x2)
    loss = average_k_step_squared_error(v1, v2, 4)
    loss.grad = np.array(2.0, dtype)
    loss.backward()
    expected = 2.0 * (x1.astype(np.float64) - x2) / 4
    atol = 1e-3 if dtype == np.float16 else 1e-7
    np.testing.assert_allclose(v1.grad, expected, atol=atol)
    np.testing.assert_allclose(v2.grad, -expected, atol=atol)


@pytest.mark.parametrize('shape', [(3,), (2, 3, 4)])
def test_backward_and_double_backward_match_numerical_gradients(shape):
    x1, x2 = _inputs(shape, np.float64, seed=2)
    rng = np.random.RandomState(3)
    gy = np.array(rng.uniform(-1, 1))
    ggx = (rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape))

    def function(a, b):
        return average_k_step_squared_error(a, b, 3)

    gradient_check.check_backward(function, (x1, x2), gy, dtype=np.float64)
    gradient_check.check_double_backward(function, (x1, x2), gy, ggx, dtype=np.float64)


@pytest.mark.parametrize('k_step', [0, -1, 1.5, 2.0, True, '2', None, np.float32(2)])
def test_k_step_must_be_a_positive_integer(k_step):
    x1, x2 = _inputs((2, 3), np.float32)
    with pytest.raises(ValueError, match='k_step'):
        average_k_step_squared_error(x1, x2, k_step)


def test_numpy_integer_k_step_is_accepted():
    x1, x2 = _inputs((2, 3), np.float32)
    loss = average_k_step_squared_error(x1, x2, np.int64(2))
    np.testing.assert_allclose(float(loss.array), _reference(x1, x2, 2), rtol=1e-6)


@pytest.mark.parametrize('make_inputs', [
    lambda: (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)),
    lambda: (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float64)),
    lambda: (np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)),
    lambda: (np.zeros((2, 3), np.float32), np.zeros((6,), np.float32)),
])
def test_shape_and_dtype_mismatches_fail_the_type_check(make_inputs):
    x1, x2 = make_inputs()
    with pytest.raises(InvalidType):
        average_k_step_squared_error(x1, x2, 1)


@pytest.mark.gpu
@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_gpu_matches_cpu(dtype):
    from chainer.backends import cuda
    x1, x2 = _inputs((3, 4, 5), dtype, seed=4)
    v1, v2 = chainer.Variable(cuda.to_gpu(x1)), chainer.Variable(cuda.to_gpu(x2))
    loss = average_k_step_squared_error(v1, v2, 3)
    loss.backward()
    rtol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(float(loss.array), _reference(x1, x2, 3), rtol=rtol)
    np.testing.assert_allclose(cuda.to_cpu(v1.grad), (x1.astype(np.float64) - x2) / 3,
                               atol=1e-3 if dtype == np.float16 else 1e-7)


@pytest.mark.parametrize('name', ['x1', 'x2'])
@pytest.mark.parametrize('value', [None, [[1.0, 2.0]]])
def test_an_input_that_is_not_an_array_is_refused_naming_it(name, value):
    inputs = {'x1': np.ones((2, 2), np.float32), 'x2': np.ones((2, 2), np.float32)}
    inputs[name] = value
    with pytest.raises(TypeError, match='^{} must be an array or a chainer.Variable'.format(name)):
        average_k_step_squared_error(k_step=1, **inputs)
