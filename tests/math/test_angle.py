"""researchutils.math.angle: angles wrapped into a range, checked against NumPy."""
import math

import numpy as np
import pytest

from researchutils.math.angle import fit_angle_in_deg_range, fit_angle_in_rad_range

TWO_PI = 2 * math.pi


def _same_direction_rad(a, b):
    np.testing.assert_allclose(np.cos(a), np.cos(b), atol=1e-9)
    np.testing.assert_allclose(np.sin(a), np.sin(b), atol=1e-9)


def test_rad_angles_land_in_zero_to_two_pi_pointing_the_same_way():
    angles = np.random.RandomState(0).uniform(-50, 50, size=(3, 10))
    result = fit_angle_in_rad_range(angles)
    assert result.shape == angles.shape
    assert np.all((result >= 0) & (result < TWO_PI))
    _same_direction_rad(result, angles)


def test_rad_result_matches_numpy_mod():
    angles = np.array([-7.0, -0.5, 0.0, 1.0, 6.5, 100.0])
    np.testing.assert_allclose(fit_angle_in_rad_range(angles), np.mod(angles, TWO_PI))


def test_rad_in_minus_pi_to_pi():
    angles = np.random.RandomState(1).uniform(-20, 20, size=50)
    result = fit_angle_in_rad_range(angles, min_angle=-math.pi, max_angle=math.pi)
    assert np.all((result >= -math.pi) & (result <= math.pi))
    np.testing.assert_allclose(result, np.mod(angles + math.pi, TWO_PI) - math.pi)


def test_rad_angles_exactly_at_the_bounds():
    # The range is half-open, [min_angle, min_angle + 2 pi): max itself wraps to min.
    result = fit_angle_in_rad_range([0.0, TWO_PI, -TWO_PI, 2 * TWO_PI])
    np.testing.assert_array_equal(result, [0.0, 0.0, 0.0, 0.0])
    result = fit_angle_in_rad_range([-math.pi, math.pi], min_angle=-math.pi, max_angle=math.pi)
    np.testing.assert_array_equal(result, [-math.pi, -math.pi])


def test_rad_tiny_negative_angle_stays_below_the_upper_bound():
    # -1e-17 % 2pi rounds to exactly 2pi in floating point.
    assert np.mod(-1e-17, TWO_PI) == TWO_PI
    result = fit_angle_in_rad_range(-1e-17)
    assert 0.0 <= result < TWO_PI


def test_rad_scalar_gives_a_zero_dimensional_array():
    result = fit_angle_in_rad_range(-math.pi / 2)
    assert result.shape == ()
    assert float(result) == pytest.approx(1.5 * math.pi)


def test_rad_float32_input_keeps_float32():
    result = fit_angle_in_rad_range(np.array([7.0, -1.0], np.float32))
    assert result.dtype == np.float32


def test_rad_range_narrower_than_a_turn_is_refused():
    with pytest.raises(ValueError, match='max_angle - min_angle'):
        fit_angle_in_rad_range([0.1], min_angle=0.0, max_angle=math.pi)


def test_rad_min_above_max_is_refused():
    with pytest.raises(ValueError, match='min_angle'):
        fit_angle_in_rad_range([0.1], min_angle=math.pi, max_angle=-math.pi)


def test_rad_non_numeric_bound_is_refused():
    with pytest.raises(TypeError, match='max_angle'):
        fit_angle_in_rad_range([0.1], max_angle='6.28')


@pytest.mark.parametrize('fit', [fit_angle_in_rad_range, fit_angle_in_deg_range])
@pytest.mark.parametrize('bounds, name', [
    ({'min_angle': math.nan}, 'min_angle'), ({'max_angle': math.nan}, 'max_angle'),
    ({'min_angle': -math.inf, 'max_angle': math.inf}, 'min_angle'),
    ({'max_angle': math.inf}, 'max_angle'), ({'min_angle': np.float32('nan')}, 'min_angle')])
def test_non_finite_bound_is_refused_naming_it(fit, bounds, name):
    with pytest.raises(ValueError, match='{} must be a finite number'.format(name)):
        fit([0.1, 7.0], **bounds)


def test_numpy_scalar_bounds_keep_float32_angles_float32():
    angles = np.array([7.0, -1.0], dtype=np.float32)
    result = fit_angle_in_rad_range(angles, min_angle=np.float64(-math.pi),
                                    max_angle=np.float64(math.pi))
    assert result.dtype == np.float32
    expected = [math.remainder(7.0, 2 * math.pi), -1.0]
    np.testing.assert_allclose(result, expected, rtol=1e-6)


def test_deg_integer_angles_work():
    # The original subtracted a float in place from an integer array and failed.
    np.testing.assert_array_equal(fit_angle_in_deg_range([-90, 450, 360]), [270.0, 90.0, 0.0])


def test_deg_angles_land_in_zero_to_360_pointing_the_same_way():
    angles = np.random.RandomState(2).uniform(-1000, 1000, size=(4, 5))
    result = fit_angle_in_deg_range(angles)
    assert np.all((result >= 0) & (result < 360))
    np.testing.assert_allclose(result, np.mod(angles, 360.0))
    _same_direction_rad(np.radians(result), np.radians(angles))


def test_deg_in_minus_180_to_180_with_bounds():
    result = fit_angle_in_deg_range([-180.0, 180.0, 190.0, -190.0, -540.0],
                                    min_angle=-180.0, max_angle=180.0)
    np.testing.assert_array_equal(result, [-180.0, -180.0, -170.0, 170.0, -180.0])


def test_deg_wider_range_keeps_one_turn_from_min():
    result = fit_angle_in_deg_range([725.0, -10.0], min_angle=0.0, max_angle=720.0)
    np.testing.assert_array_equal(result, [5.0, 350.0])


def test_deg_range_narrower_than_a_turn_is_refused():
    with pytest.raises(ValueError, match='360'):
        fit_angle_in_deg_range([1.0], min_angle=0.0, max_angle=180.0)


def test_deg_min_above_max_is_refused():
    with pytest.raises(ValueError, match='min_angle'):
        fit_angle_in_deg_range([1.0], min_angle=180.0, max_angle=-180.0)


@pytest.mark.parametrize('fit', [fit_angle_in_rad_range, fit_angle_in_deg_range])
@pytest.mark.parametrize('angles', [None, 'abc', ['a', 'b'], [[1.0], [1.0, 2.0]]])
def test_angles_that_are_not_numbers_are_refused_naming_them(fit, angles):
    with pytest.raises(TypeError, match='^angles must be numbers'):
        fit(angles)


@pytest.mark.parametrize('fit', [fit_angle_in_rad_range, fit_angle_in_deg_range])
@pytest.mark.parametrize('angle', [math.inf, -math.inf])
def test_an_infinite_angle_is_refused_naming_it(fit, angle, recwarn):
    with pytest.raises(ValueError, match='^angles must not be infinite'):
        fit([1.0, angle])
    assert len(recwarn) == 0


def test_a_nan_angle_stays_nan_without_a_warning(recwarn):
    result = fit_angle_in_rad_range([math.nan, 7.0])
    assert math.isnan(result[0]) and result[1] == pytest.approx(7.0 - 2 * math.pi)
    assert len(recwarn) == 0
