"""researchutils.arrays: one_hot and unzip, checked against plain NumPy and zip."""
import numpy as np
import pytest

from researchutils import arrays


def _reference_one_hot(indices, rows, on_value, off_value, dtype):
    expected = np.empty((rows, len(indices)), dtype=dtype)
    for row in range(rows):
        for column, index in enumerate(indices):
            expected[row, column] = on_value if row == index else off_value
    return expected


# one_hot ------------------------------------------------------------------------------

def test_one_hot_sets_on_value_in_each_column_at_its_index():
    indices = [2, 0, 1, 2]
    result = arrays.one_hot(indices, (3, 4))
    np.testing.assert_array_equal(result, _reference_one_hot(indices, 3, 1, 0, np.int8))


def test_one_hot_single_column_vector():
    result = arrays.one_hot([1], (3, 1), dtype=np.float32)
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, [[0], [1], [0]])


def test_one_hot_custom_values_and_dtype():
    result = arrays.one_hot(np.array([1, 1, 0]), (2, 3), on_value=5, off_value=-2,
                            dtype=np.int32)
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, _reference_one_hot([1, 1, 0], 2, 5, -2, np.int32))


def test_one_hot_integer_values_default_to_int8():
    assert arrays.one_hot([0, 1], (2, 2)).dtype == np.int8
    assert arrays.one_hot([0, 1], (2, 2), on_value=np.int64(1)).dtype == np.int8


def test_one_hot_integer_values_beyond_int8_get_a_wider_integer_type():
    result = arrays.one_hot([0, 1], (2, 2), on_value=1000)
    assert result.dtype == np.int16
    np.testing.assert_array_equal(result, [[1000, 0], [0, 1000]])


@pytest.mark.parametrize('values', [{'on_value': 1.0}, {'off_value': 0.0},
                                    {'on_value': 0.5, 'off_value': -0.5}])
def test_one_hot_float_values_default_to_float32(values):
    result = arrays.one_hot([0, 1, 2], (3, 3), **values)
    assert result.dtype == np.float32
    expected = _reference_one_hot([0, 1, 2], 3, values.get('on_value', 1),
                                  values.get('off_value', 0), np.float32)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize('values, dtype, name', [
    ({'on_value': 300}, np.int8, 'on_value'),        # would wrap to 44
    ({'on_value': -129}, np.int8, 'on_value'),
    ({'off_value': -1}, np.uint8, 'off_value'),       # would wrap to 255
    ({'on_value': 2 ** 31}, np.int32, 'on_value'),
    ({'on_value': 0.5}, np.int16, 'on_value'),        # would truncate to 0
    ({'on_value': float('nan')}, np.int8, 'on_value'),
    ({'on_value': 2}, np.bool_, 'on_value'),
    ({'on_value': 1e39}, np.float32, 'on_value'),     # would become inf
    ({'off_value': -70000.0}, np.float16, 'off_value'),
    ({'on_value': 2 ** 63}, None, 'on_value'),        # beyond every default integer type
])
def test_one_hot_value_that_does_not_fit_the_dtype_is_refused_naming_it(values, dtype, name):
    with pytest.raises(ValueError, match=name):
        arrays.one_hot([0, 1], (2, 2), dtype=dtype, **values)


@pytest.mark.parametrize('on_value, off_value, dtype', [
    (127, -128, np.int8), (255, 0, np.uint8), (3.0, -2.0, np.int32), (True, False, np.bool_),
    (65504.0, -65504.0, np.float16), (float(np.finfo(np.float32).max), -np.inf, np.float32),
    (np.nan, 0.0, np.float64)])
def test_one_hot_values_at_the_edges_of_the_dtype_are_kept_exactly(on_value, off_value, dtype):
    result = arrays.one_hot([1, 0], (2, 2), on_value=on_value, off_value=off_value,
                            dtype=dtype)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, _reference_one_hot([1, 0], 2, on_value, off_value,
                                                             dtype))


def test_one_hot_value_that_is_not_a_number_is_refused_for_a_numeric_dtype():
    with pytest.raises(TypeError, match='on_value'):
        arrays.one_hot([0], (1, 1), on_value='1', dtype=np.int8)


def test_one_hot_shape_with_three_dimensions_is_refused():
    with pytest.raises(ValueError, match='shape'):
        arrays.one_hot(range(9), (3, 3, 3))


@pytest.mark.parametrize('bad_index', [3, -1])
def test_one_hot_index_outside_the_rows_is_refused_with_its_position(bad_index):
    with pytest.raises(ValueError, match=r'indices\[1\] = {}'.format(bad_index)):
        arrays.one_hot([0, bad_index, 2], (3, 3))


def test_one_hot_float_index_is_refused():
    with pytest.raises(TypeError, match='indices'):
        arrays.one_hot([0.0, 1.0], (2, 2))


def test_one_hot_needs_one_index_per_column():
    with pytest.raises(ValueError, match='3 indices for 2 columns'):
        arrays.one_hot([0, 1, 1], (2, 2))


def test_one_hot_with_no_columns_is_an_empty_matrix():
    result = arrays.one_hot([], (4, 0))
    assert result.shape == (4, 0)


# unzip --------------------------------------------------------------------------------

def test_unzip_reverses_zip():
    names = ['one', 'two', 'three', 'four']
    numbers = [1, 2, 3, 4]
    unzipped_names, unzipped_numbers = arrays.unzip(zip(names, numbers))
    assert list(unzipped_names) == names
    assert list(unzipped_numbers) == numbers


def test_unzip_returns_a_reusable_tuple_of_tuples():
    result = arrays.unzip([(1, 'a'), (2, 'b')])
    assert result == ((1, 2), ('a', 'b'))
    assert list(result) == list(result)


def test_unzip_of_empty_input_is_an_empty_tuple():
    assert arrays.unzip([]) == ()
    assert arrays.unzip(iter([])) == ()


def test_unzip_of_tuples_of_different_lengths_is_refused_naming_the_first_odd_one():
    with pytest.raises(ValueError, match=r'zipped_array\[2\] has 1 items, zipped_array\[0\] 2'):
        arrays.unzip([(1, 'a'), (2, 'b'), (3,)])


def test_unzip_of_non_sequences_is_refused():
    with pytest.raises(TypeError, match=r'zipped_array\[0\]'):
        arrays.unzip([1, 2])


def test_unzip_of_numpy_rows():
    matrix = np.arange(6).reshape(3, 2)
    first, second = arrays.unzip(matrix)
    assert list(first) == list(matrix[:, 0])
    assert list(second) == list(matrix[:, 1])


@pytest.mark.parametrize('shape, name', [
    ((True, 2), r'shape\[0\]'), ((2, 2.0), r'shape\[1\]'), (('2', 2), r'shape\[0\]'),
    (5, 'shape'), (None, 'shape'),
])
def test_one_hot_shape_must_be_two_integers(shape, name):
    with pytest.raises(TypeError, match='^' + name + ' must be'):
        arrays.one_hot([0, 1], shape)


def test_one_hot_negative_shape_is_refused_naming_it():
    with pytest.raises(ValueError, match=r'^shape\[1\] must be an integer >= 0, got -2'):
        arrays.one_hot([], (2, -2))


@pytest.mark.parametrize('indices', [5, None, ['a', 'b'], 'ab'])
def test_one_hot_indices_that_are_not_integers_are_refused_naming_them(indices):
    with pytest.raises(TypeError, match='^indices must be a flat sequence of integers'):
        arrays.one_hot(indices, (2, 2))


def test_one_hot_unknown_dtype_is_refused_naming_it():
    with pytest.raises(TypeError, match="^dtype must be a NumPy dtype, got 'notadtype'"):
        arrays.one_hot([0], (1, 1), dtype='notadtype')


@pytest.mark.parametrize('zipped', [5, None])
def test_unzip_of_what_is_not_iterable_is_refused_naming_it(zipped):
    with pytest.raises(TypeError, match='^zipped_array must be an iterable'):
        arrays.unzip(zipped)
