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


@pytest.mark.parametrize('value', [5, b'x', None, ['a']])
def test_a_str_argument_refuses_other_kinds(value):
    with pytest.raises(TypeError, match='^title must be a str, got'):
        _checks.check_str(value, 'title')


def test_a_non_empty_str_refuses_the_empty_one():
    with pytest.raises(ValueError, match="^monitor must be a non-empty str, got ''"):
        _checks.check_str('', 'monitor', allow_empty=False)


def test_a_path_is_a_str_or_pathlike_returned_as_str(tmp_path):
    assert _checks.check_path(tmp_path, 'path') == str(tmp_path)
    assert _checks.check_path('a.txt', 'path') == 'a.txt'


@pytest.mark.parametrize('value', [0, 1, True, b'a.txt', None, 1.5])
def test_a_path_refuses_descriptors_and_bytes(value):
    with pytest.raises(TypeError, match='^file_path must be a path'):
        _checks.check_path(value, 'file_path')


@pytest.mark.parametrize('value', ['a\0b', ''])
def test_a_path_refuses_a_nul_byte_and_the_empty_path(value):
    with pytest.raises(ValueError, match='^file_path must'):
        _checks.check_path(value, 'file_path')


@pytest.mark.parametrize('value', ['', '.', '..', 'a/b', '/a', 'a\0b'])
def test_a_file_name_is_one_name(value):
    with pytest.raises(ValueError, match='^name must be one file or folder name'):
        _checks.check_file_name(value, 'name')


def test_a_choice_names_the_choices():
    with pytest.raises(ValueError, match="^mode must be one of 'min', 'max', got 'best'"):
        _checks.check_choice('best', 'mode', ('min', 'max'))
    with pytest.raises(TypeError, match='^mode must be one of'):
        _checks.check_choice(None, 'mode', ('min', 'max'))


@pytest.mark.parametrize('value', [5, 'epoch', {'a': 'b'}, ['epoch', 5]])
def test_a_str_list_refuses_a_str_and_other_items(value):
    with pytest.raises(TypeError, match='^entries must be a list of str'):
        _checks.check_str_list(value, 'entries')


def test_a_mapping_refuses_pairs_and_may_refuse_empty():
    with pytest.raises(TypeError, match='^losses must be a mapping'):
        _checks.check_mapping([('a', 1)], 'losses')
    with pytest.raises(ValueError, match='^losses must not be empty'):
        _checks.check_mapping({}, 'losses', allow_empty=False)


@pytest.mark.parametrize('value', ['notadtype', 'int32', np.int64, True, None])
def test_a_float_dtype_refuses_names_numpy_does_not_know_and_integer_dtypes(value):
    with pytest.raises(TypeError, match='^dtype must be a floating point dtype'):
        _checks.check_float_dtype(value, 'dtype')


@pytest.mark.parametrize('value', [None, 'abc', ['a'], [[1], [1, 2]], [object()]])
def test_a_number_array_refuses_what_is_not_numbers(value):
    with pytest.raises(TypeError, match='^data must be numbers'):
        _checks.check_number_array(value, 'data')


@pytest.mark.parametrize('value, error', [([0.5], TypeError), ([True], TypeError),
                                          ([-1], ValueError), ([[0]], ValueError),
                                          (range(-1, 2), ValueError), (None, TypeError)])
def test_indices_are_flat_integers_at_least_zero(value, error):
    with pytest.raises(error, match='^indices must be a flat sequence of integers >= 0'):
        _checks.check_indices(value, 'indices')


def test_indices_keep_a_range_and_give_int64_arrays():
    assert _checks.check_indices(range(3), 'indices') == range(3)
    assert _checks.check_indices(np.array([2, 1], np.int32), 'indices').dtype == np.int64


@pytest.mark.parametrize('value', [object(), 5])
def test_a_communicator_has_int_rank_and_size(value):
    with pytest.raises(TypeError, match='^comm must be a ChainerMN communicator'):
        _checks.check_comm(value)


def test_check_path_takes_the_empty_path_only_when_allowed():
    assert _checks.check_path('', 'path', allow_empty=True) == ''
    with pytest.raises(ValueError, match="path must be a path, got an empty str"):
        _checks.check_path('', 'path')
