"""researchutils._checks: one rule per kind of argument, messages naming argument and value."""
import math

import numpy as np
import pytest

from researchutils import _checks

INF, NAN = float('inf'), float('nan')


@pytest.mark.parametrize('check', [_checks.check_positive_int, _checks.check_non_negative_int])
@pytest.mark.parametrize('value', [True, False, np.bool_(True), 1.0, '1', [1]])
def test_an_integer_argument_refuses_bools_floats_and_strings(check, value):
    with pytest.raises(TypeError, match='patience') as info:
        check(value, 'patience')
    assert repr(value) in str(info.value)


def test_an_integer_argument_takes_numpy_integers_and_returns_int():
    value = _checks.check_positive_int(np.int64(3), 'batch_size')
    assert value == 3 and type(value) is int


@pytest.mark.parametrize('value', [0, -1])
def test_a_positive_integer_refuses_zero_and_negatives(value):
    with pytest.raises(ValueError, match='batch_size must be a positive integer, got {}'.format(
            value)):
        _checks.check_positive_int(value, 'batch_size')


def test_a_module_may_keep_value_error_for_the_wrong_kind():
    with pytest.raises(ValueError, match='k_step'):
        _checks.check_positive_int(1.5, 'k_step', type_error=ValueError)


def test_none_passes_only_where_allowed():
    assert _checks.check_positive_int(None, 'shared_mem', allow_none=True) is None
    with pytest.raises(TypeError, match='shared_mem'):
        _checks.check_positive_int(None, 'shared_mem')


def test_integer_range_is_inclusive():
    assert _checks.check_int(5, 'n', minimum=2, maximum=5) == 5
    with pytest.raises(ValueError, match=r'n must be an integer in \[2, 5\], got 6'):
        _checks.check_int(6, 'n', minimum=2, maximum=5)


@pytest.mark.parametrize('check', [_checks.check_positive_float,
                                   _checks.check_non_negative_float, _checks.check_timeout])
@pytest.mark.parametrize('value', [NAN, INF, -INF])
def test_a_finite_number_refuses_nan_and_infinity(check, value):
    with pytest.raises(ValueError, match='flush_timeout') as info:
        check(value, 'flush_timeout')
    assert repr(value) in str(info.value)


@pytest.mark.parametrize('check', [_checks.check_positive_float,
                                   _checks.check_non_negative_float, _checks.check_timeout])
@pytest.mark.parametrize('value', [True, '1', None, 1j])
def test_a_number_argument_refuses_bools_strings_and_complex(check, value):
    with pytest.raises(TypeError, match='retry_backoff'):
        check(value, 'retry_backoff')


def test_positive_and_non_negative_differ_at_zero():
    assert _checks.check_non_negative_float(0, 'delay') == 0.0
    with pytest.raises(ValueError, match='delay'):
        _checks.check_positive_float(0, 'delay')
    with pytest.raises(ValueError, match='timeout'):
        _checks.check_timeout(0.0, 'timeout')


def test_a_float_argument_takes_numpy_floats_and_returns_float():
    value = _checks.check_positive_float(np.float32(0.5), 'retry_backoff')
    assert value == 0.5 and type(value) is float


def test_an_unbounded_number_takes_infinity_but_never_nan():
    assert _checks.check_float(-INF, 'clip_min', finite=False) == -INF
    with pytest.raises(ValueError, match='clip_min'):
        _checks.check_float(NAN, 'clip_min', finite=False)


@pytest.mark.parametrize('value', [0.0, 1.0, -0.1, 1.5, NAN])
def test_an_open_fraction_refuses_its_ends(value):
    with pytest.raises(ValueError, match='val_split'):
        _checks.check_probability(value, 'val_split', allow_zero=False, allow_one=False)


def test_a_probability_takes_both_ends_by_default():
    assert [_checks.check_probability(v, 'p') for v in (0, 1)] == [0.0, 1.0]


@pytest.mark.parametrize('value, expected', [(True, True), (0, False), (np.bool_(False), False)])
def test_a_flag_takes_bools_and_zero_or_one(value, expected):
    assert _checks.check_bool(value, 'repeat') is expected


@pytest.mark.parametrize('value', [2, 'yes', None, 1.0])
def test_a_flag_refuses_other_values(value):
    with pytest.raises(TypeError, match='repeat'):
        _checks.check_bool(value, 'repeat')


@pytest.mark.parametrize('seed', [-1, 2 ** 32])
def test_a_seed_outside_numpys_range_is_a_value_error(seed):
    with pytest.raises(ValueError, match='random_seed'):
        _checks.check_seed(seed, 'random_seed')


@pytest.mark.parametrize('seed', [True, 1.5, 'abc'])
def test_a_seed_of_the_wrong_kind_is_a_type_error(seed):
    with pytest.raises(TypeError, match='seed'):
        _checks.check_seed(seed)


@pytest.mark.parametrize('devices, expected', [
    (None, []), ([], []), (0, [0]), (1, [1]), (np.int64(2), [2]), ('@numpy', ['@numpy']),
    ((0, '@numpy'), [0, '@numpy']),
])
def test_a_device_list_takes_one_device_or_several(devices, expected):
    assert _checks.check_devices(devices, 'gpu_ids') == expected


@pytest.mark.parametrize('devices', [True, 1.0, [True], [0.5], [[0]], math.pi])
def test_a_device_list_refuses_bools_and_floats(devices):
    with pytest.raises(TypeError, match='gpu_ids'):
        _checks.check_devices(devices, 'gpu_ids')


def test_a_negative_gpu_number_is_refused():
    with pytest.raises(ValueError, match='gpu_ids.*-1'):
        _checks.check_devices([-1], 'gpu_ids')
