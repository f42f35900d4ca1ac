import numpy
import pytest

from researchutils.chainer.iterators import UnmodifiableDecorableList
from tests.support.iterators import LazyRange


def pair_with_next(dataset, index):
    return (dataset[index], dataset[(index + 1) % len(dataset)])


def reference(items, decor_fun, end_index):
    return [decor_fun(items, i) for i in range(end_index)]


ITEMS = list(range(100, 110))


@pytest.fixture
def lst():
    return UnmodifiableDecorableList(ITEMS, pair_with_next, end_index=6)


def test_len_is_end_index(lst):
    assert len(lst) == 6


def test_len_without_end_index_is_len_of_items():
    assert len(UnmodifiableDecorableList(ITEMS)) == 10


def test_end_index_equal_to_the_length_of_items_sees_every_item():
    view = UnmodifiableDecorableList(ITEMS, pair_with_next, end_index=len(ITEMS))
    assert list(view) == reference(ITEMS, pair_with_next, len(ITEMS))


def test_item_is_decor_fun_of_items_and_index(lst):
    assert [lst[i] for i in range(6)] == reference(ITEMS, pair_with_next, 6)


def test_item_without_decor_fun_is_item_of_items():
    assert UnmodifiableDecorableList(ITEMS, end_index=3)[2] == 102


@pytest.mark.parametrize('index', [-1, -3, -6])
def test_negative_index_counts_from_end_index(lst, index):
    assert lst[index] == reference(ITEMS, pair_with_next, 6)[index]


@pytest.mark.parametrize('index', [6, 9, 10, -7, -10])
def test_index_beyond_end_index_is_index_error(lst, index):
    with pytest.raises(IndexError, match=str(index)):
        lst[index]


def test_numpy_integer_index_works(lst):
    assert lst[numpy.int64(2)] == (102, 103)


@pytest.mark.parametrize('key', [1.0, '1', None, (1, 2)])
def test_non_integer_index_is_type_error(lst, key):
    with pytest.raises(TypeError, match='integers or slices'):
        lst[key]


SLICES = [slice(start, stop, step)
          for start in (None, 0, 2, 5, 6, 9, -1, -4, -20)
          for stop in (None, 0, 3, 6, 8, 20, -1, -5, -20)
          for step in (None, 1, 2, 3, -1, -2)]


@pytest.mark.parametrize('key', SLICES, ids=str)
def test_slice_matches_list_slice(lst, key):
    assert lst[key] == reference(ITEMS, pair_with_next, 6)[key]


def test_zero_slice_step_is_value_error(lst):
    with pytest.raises(ValueError):
        lst[::0]


def test_iteration_yields_decorated_items(lst):
    assert list(lst) == reference(ITEMS, pair_with_next, 6)


def test_reversed_yields_decorated_items_backwards(lst):
    assert list(reversed(lst)) == reference(ITEMS, pair_with_next, 6)[::-1]


def test_in_sees_decorated_items_up_to_end_index(lst):
    assert (105, 106) in lst
    assert (106, 107) not in lst
    assert 100 not in lst


def test_index_finds_decorated_item(lst):
    assert lst.index((103, 104)) == 3


def test_index_of_item_beyond_end_index_is_value_error(lst):
    with pytest.raises(ValueError):
        lst.index((107, 108))


def test_count_counts_decorated_items():
    lst = UnmodifiableDecorableList([1, 2, 1, 2, 1], lambda d, i: d[i] * 10, end_index=4)
    assert lst.count(10) == 2
    assert lst.count(1) == 0


MUTATORS = ['insert', 'remove', 'append', 'extend', 'sort', 'pop', 'reverse', 'clear']
ARGUMENTS = [((), {}), ((0,), {}), ((0, 1), {}), ((), {'key': None, 'reverse': True})]


@pytest.mark.parametrize('name', MUTATORS)
@pytest.mark.parametrize('args,kwargs', ARGUMENTS)
def test_mutating_method_is_not_implemented_whatever_arguments(lst, name, args, kwargs):
    with pytest.raises(NotImplementedError, match=name):
        getattr(lst, name)(*args, **kwargs)
    assert list(lst) == reference(ITEMS, pair_with_next, 6)


def test_item_assignment_is_type_error(lst):
    with pytest.raises(TypeError):
        lst[0] = 1


def test_item_deletion_is_type_error(lst):
    with pytest.raises(TypeError):
        del lst[0]


def test_construction_does_not_read_a_lazy_dataset():
    items = LazyRange(10 ** 8)
    lst = UnmodifiableDecorableList(items, end_index=10 ** 8 - 1)
    assert items.reads == 0
    assert len(lst) == 10 ** 8 - 1
    assert lst[-1] == 3 * (10 ** 8 - 2)
    assert items.reads == 1


def test_repr_does_not_read_the_dataset():
    items = LazyRange(10 ** 8)
    assert '100000000' in repr(UnmodifiableDecorableList(items))
    assert items.reads == 0


@pytest.mark.parametrize('end_index', [0, -1, 11, 2.5, '3', True, numpy.float64(2)])
def test_bad_end_index_is_value_error_naming_it(end_index):
    with pytest.raises(ValueError, match='end_index') as info:
        UnmodifiableDecorableList(ITEMS, end_index=end_index)
    assert repr(end_index) in str(info.value)


def test_numpy_integer_end_index_is_accepted():
    assert len(UnmodifiableDecorableList(ITEMS, end_index=numpy.int32(4))) == 4


def test_non_callable_decor_fun_is_type_error():
    with pytest.raises(TypeError, match='decor_fun'):
        UnmodifiableDecorableList(ITEMS, decor_fun=3)


def test_items_without_length_is_type_error():
    with pytest.raises(TypeError, match='items'):
        UnmodifiableDecorableList(iter(ITEMS))


def test_end_index_defaults_to_the_length_and_is_read_only():
    lst = UnmodifiableDecorableList(ITEMS)
    assert lst.end_index == len(ITEMS)
    assert UnmodifiableDecorableList(ITEMS, end_index=3).end_index == 3
    with pytest.raises(AttributeError):
        lst.end_index = 2
    assert len(lst) == len(ITEMS)
