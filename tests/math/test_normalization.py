"""researchutils.math.normalization: min-max scaling and standardization against NumPy.

Where NumPy's own formulas overflow, the reference is the standard library's
decimal arithmetic (60 digits, an exponent range far beyond any float's), rounded
once at the end.
"""
import decimal

import numpy as np
import pytest

from researchutils.math.normalization import normalize_by_min_max, standardize


def test_normalize_maps_min_to_zero_and_max_to_one():
    data = np.random.RandomState(0).randn(2, 100)
    result = normalize_by_min_max(data)
    assert result.shape == data.shape
    np.testing.assert_allclose(result, (data - data.min()) / (data.max() - data.min()))
    assert result.min() == 0.0 and result.max() == 1.0


def test_normalize_into_another_range():
    data = np.random.RandomState(1).randn(50)
    result = normalize_by_min_max(data, min_value=-1.0, max_value=5.0)
    expected = (data - data.min()) / (data.max() - data.min()) * 6.0 - 1.0
    np.testing.assert_allclose(result, expected)


def test_normalize_integers_without_overflow():
    data = np.array([-128, 0, 127], np.int8)
    np.testing.assert_allclose(normalize_by_min_max(data), [0.0, 128 / 255, 1.0])


def test_normalize_list_input():
    np.testing.assert_allclose(normalize_by_min_max([1, 2, 3]), [0.0, 0.5, 1.0])


def test_normalize_constant_data_maps_to_min_value():
    result = normalize_by_min_max(np.full((2, 3), 7.0), min_value=-1.0, max_value=1.0)
    np.testing.assert_array_equal(result, np.full((2, 3), -1.0))


@pytest.mark.parametrize('bounds', [(1.0, 0.0), (1.0, 1.0)])
def test_normalize_min_value_not_below_max_value_is_refused(bounds):
    with pytest.raises(ValueError, match='min_value'):
        normalize_by_min_max([1.0, 2.0], min_value=bounds[0], max_value=bounds[1])


def test_normalize_empty_data_is_refused():
    with pytest.raises(ValueError, match='empty'):
        normalize_by_min_max([])


def test_normalize_nan_is_refused():
    with pytest.raises(ValueError, match='not finite'):
        normalize_by_min_max([1.0, np.nan])


def _decimals(data):
    return [decimal.Decimal(float(x)) for x in np.ravel(data)]  # each float exactly


def _exact_min_max(data, min_value, max_value):
    with decimal.localcontext(decimal.Context(prec=60)):
        values = _decimals(data)
        low, high = min(values), max(values)
        low_out, high_out = decimal.Decimal(min_value), decimal.Decimal(max_value)
        return np.array([float(low_out + (x - low) / (high - low) * (high_out - low_out))
                         for x in values]).reshape(np.shape(data))


def _exact_standardized(data):
    with decimal.localcontext(decimal.Context(prec=60)):
        values = _decimals(data)
        mean = sum(values) / len(values)
        deviation = (sum((x - mean) ** 2 for x in values) / len(values)).sqrt()
        return np.array([float((x - mean) / deviation)
                         for x in values]).reshape(np.shape(data))


_HUGE = {np.float64: 1e308, np.float32: 3e38}


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_normalize_data_whose_range_overflows_gives_the_exact_result(dtype):
    data = (np.array([-1.0, 0.0, 1.0, 0.25, -0.6]) * _HUGE[dtype]).astype(dtype)
    result = normalize_by_min_max(data)
    assert result.dtype == dtype
    np.testing.assert_allclose(result, _exact_min_max(data, 0.0, 1.0),
                               rtol=1e-6 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_normalize_into_bounds_whose_span_overflows_gives_the_exact_result(dtype):
    data = np.array([2.0, 3.0, 5.0, 10.0], dtype)
    low, high = -_HUGE[dtype], _HUGE[dtype]
    result = normalize_by_min_max(data, min_value=low, max_value=high)
    assert np.isfinite(result).all()
    np.testing.assert_allclose(result, _exact_min_max(data, low, high),
                               rtol=1e-6 if dtype == np.float32 else 1e-14)
    assert result[0] == np.asarray(low, dtype) and result[-1] == np.asarray(high, dtype)


@pytest.mark.parametrize('bounds, name', [
    ({'max_value': np.inf}, 'max_value'), ({'min_value': -np.inf}, 'min_value'),
    ({'min_value': np.nan}, 'min_value'), ({'max_value': np.float32('nan')}, 'max_value')])
def test_normalize_non_finite_bound_is_refused_naming_it(bounds, name):
    with pytest.raises(ValueError, match='{} must be a finite number'.format(name)):
        normalize_by_min_max([-1.0, 0.0, 1.0], **bounds)


def test_normalize_bound_beyond_a_float32_result_is_refused_naming_it():
    with pytest.raises(ValueError, match='max_value=1e[+]?39'):
        normalize_by_min_max(np.array([1.0, 2.0], np.float32), max_value=1e39)


def test_standardize_gives_zero_mean_and_unit_deviation():
    data = np.random.RandomState(2).normal(30.0, 4.0, size=(2, 100))
    result = standardize(data)
    assert result.shape == data.shape
    np.testing.assert_allclose(result, (data - data.mean()) / data.std())
    assert result.mean() == pytest.approx(0.0, abs=1e-12)
    assert result.std() == pytest.approx(1.0)


def test_standardize_constant_data_gives_zeros():
    # np.std of [0.1, 0.1, 0.1] is not exactly zero: dividing by it would give -1s.
    data = np.array([0.1, 0.1, 0.1])
    assert np.std(data) != 0.0
    np.testing.assert_array_equal(standardize(data), np.zeros(3))


def test_standardize_float32_keeps_float32():
    assert standardize(np.array([1.0, 2.0], np.float32)).dtype == np.float32


def test_standardize_empty_data_is_refused():
    with pytest.raises(ValueError, match='empty'):
        standardize(np.zeros((0, 3)))


def test_standardize_infinite_value_is_refused():
    with pytest.raises(ValueError, match='not finite'):
        standardize([1.0, np.inf])


@pytest.mark.parametrize('data, dtype', [
    ([-1e200, 1e200], np.float64),
    ([1e308, 1e308, -1e308, 5e307], np.float64),    # the sum overflows too
    ([-1e20, 1e20], np.float32),
    ([3e38, 3e38, -3e38], np.float32),
    ([-1e-30, 1e-30, 5e-31], np.float32),           # the squares underflow to zero
    ([-6e4, 6e4, 1.0], np.float16),
])
def test_standardize_finite_data_beyond_the_squares_range_gives_the_exact_result(data, dtype):
    data = np.array(data, dtype)
    result = standardize(data)
    assert result.dtype == (np.float32 if dtype == np.float32 else np.float64)
    np.testing.assert_allclose(result, _exact_standardized(data),
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_standardize_ordinary_data_matches_numpy_in_each_dtype(dtype):
    data = np.random.RandomState(3).normal(-5.0, 3.0, size=(4, 25)).astype(dtype)
    expected = (data - data.mean()) / data.std() if dtype != np.float16 else (
        (data.astype(np.float64) - data.astype(np.float64).mean())
        / data.astype(np.float64).std())
    np.testing.assert_allclose(standardize(data), expected, rtol=1e-6)
