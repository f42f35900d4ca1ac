"""researchutils.math.normalization: min-max scaling and standardization against NumPy."""
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
