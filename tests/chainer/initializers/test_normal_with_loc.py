"""NormalWithLoc: a Chainer initializer drawing from N(loc, scale**2)."""
import chainer
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.initializers import NormalWithLoc


def _draw(initializer, shape=(400, 500), dtype=np.float32):
    array = np.empty(shape, dtype)
    initializer(array)
    return array


@pytest.mark.parametrize('loc, scale', [(0.0, 0.05), (3.0, 0.5), (-2.0, 2.0)])
def test_mean_and_std_match_loc_and_scale(loc, scale):
    np.random.seed(0)
    array = _draw(NormalWithLoc(loc, scale)).astype(np.float64)
    # 200000 draws: the sample mean is within 5 standard errors of loc.
    assert abs(array.mean() - loc) < 5 * scale / np.sqrt(array.size)
    assert abs(array.std() - scale) < 0.01 * scale


def test_values_are_gaussian_not_just_right_in_mean_and_std():
    np.random.seed(1)
    array = _draw(NormalWithLoc(1.0, 2.0)).astype(np.float64).ravel()
    z = (array - 1.0) / 2.0
    # Fractions within 1 and 2 standard deviations of a normal distribution.
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.005
    assert abs(np.mean(np.abs(z) < 2) - 0.9545) < 0.003


def test_defaults_are_loc_zero_scale_005():
    initializer = NormalWithLoc()
    assert (initializer.loc, initializer.scale, initializer.dtype) == (0.0, 0.05, None)


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_fills_arrays_of_each_float_dtype_in_place(dtype):
    array = np.zeros((50, 40), dtype)
    NormalWithLoc(10.0, 1.0)(array)
    assert array.dtype == dtype
    assert abs(float(array.astype(np.float64).mean()) - 10.0) < 0.5


def test_dtype_is_checked_against_the_array():
    with pytest.raises(AssertionError):
        NormalWithLoc(dtype=np.float64)(np.zeros(3, np.float32))


def test_generate_array_gives_the_initializers_dtype():
    array = chainer.initializers.generate_array(NormalWithLoc(1.0, dtype=np.float16), (3, 4),
                                                np, dtype=np.float16)
    assert array.dtype == np.float16 and array.shape == (3, 4)


def test_works_as_a_link_initializer():
    link = L.Linear(30, 40, initialW=NormalWithLoc(5.0, 0.1),
                    initial_bias=NormalWithLoc(-5.0, 0.1))
    assert abs(link.W.array.mean() - 5.0) < 0.05
    assert abs(link.b.array.mean() + 5.0) < 0.1


def test_same_seed_gives_same_values():
    np.random.seed(3)
    first = _draw(NormalWithLoc(1.0, 1.0), (10,))
    np.random.seed(3)
    assert np.array_equal(first, _draw(NormalWithLoc(1.0, 1.0), (10,)))


def test_zero_scale_fills_with_loc():
    assert np.all(_draw(NormalWithLoc(2.5, 0.0), (5,)) == 2.5)


@pytest.mark.parametrize('kwargs, error, name', [
    ({'scale': -1.0}, ValueError, 'scale'),
    ({'scale': float('nan')}, ValueError, 'scale'),
    ({'scale': float('inf')}, ValueError, 'scale'),
    ({'scale': '1'}, TypeError, 'scale'),
    ({'loc': float('nan')}, ValueError, 'loc'),
    ({'loc': None}, TypeError, 'loc'),
    ({'loc': True}, TypeError, 'loc'),
    ({'dtype': 'notadtype'}, TypeError, "^dtype must be a floating point dtype, .*'notadtype'"),
    ({'dtype': np.int32}, TypeError, '^dtype must be a floating point dtype'),
    ({'dtype': 'int64'}, TypeError, '^dtype must be a floating point dtype'),
    ({'dtype': True}, TypeError, '^dtype must be a floating point dtype'),
])
def test_bad_arguments_are_refused_with_their_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        NormalWithLoc(**kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_fills_cupy_arrays(dtype):
    import cupy
    cupy.random.seed(0)
    array = cupy.empty((400, 500), dtype)
    NormalWithLoc(3.0, 0.5, dtype=dtype)(array)
    values = cupy.asnumpy(array).astype(np.float64)
    assert array.dtype == dtype
    assert abs(values.mean() - 3.0) < 0.01
    assert abs(values.std() - 0.5) < 0.01


@pytest.mark.parametrize('dtype', [None, np.float16, 'float32', np.dtype(np.float64)])
def test_float_dtypes_are_taken(dtype):
    assert NormalWithLoc(dtype=dtype).dtype is dtype
