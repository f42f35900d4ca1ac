import re

import numpy as np
import pytest

from researchutils.chainer.data_loading import AbstractDataset


class Numbers(AbstractDataset):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def __getitem__(self, index):
        if not 0 <= index < self.size:
            raise IndexError(index)
        return {'data': np.array([index], np.float32), 'label': np.int32(index % 3)}

    def __len__(self):
        return self.size


def test_abstract_dataset_needs_getitem_and_len():
    class Incomplete(AbstractDataset):
        def __len__(self):
            return 1

    with pytest.raises(TypeError):
        Incomplete()


def test_get_sample_from_index_is_the_item():
    dataset = Numbers(5)
    sample = dataset.get_sample_from_index(3)
    assert sample.keys() == {'data', 'label'}
    np.testing.assert_array_equal(sample['data'], dataset[3]['data'])


def test_delira_style_constructor_arguments_are_kept():
    class FromDisk(Numbers):
        def __init__(self):
            AbstractDataset.__init__(self, '/data', np.load)
            self.size = 1

    assert (FromDisk().data_path, FromDisk().load_fn) == ('/data', np.load)


def test_get_subset_is_a_view_in_the_given_order():
    subset = Numbers(10).get_subset([7, 2, 5])
    assert isinstance(subset, AbstractDataset)
    assert len(subset) == 3
    assert [int(subset[i]['data'][0]) for i in range(3)] == [7, 2, 5]


def test_subset_of_subset_maps_through_both():
    subset = Numbers(10).get_subset([9, 8, 7, 6]).get_subset([3, 0])
    assert [int(subset[i]['data'][0]) for i in range(2)] == [6, 9]


def test_get_subset_does_not_load_examples():
    class Counting(Numbers):
        loads = 0

        def __getitem__(self, index):
            Counting.loads += 1
            return super().__getitem__(index)

    Counting(1000).get_subset(range(500))
    assert Counting.loads == 0


def test_get_subset_out_of_range_names_the_index():
    with pytest.raises(IndexError, match='index 12 is out of range'):
        Numbers(10).get_subset([1, 12])


def test_get_subset_rejects_non_integer_indices_naming_them():
    with pytest.raises(TypeError, match=r'integers.*0\.5'):
        Numbers(10).get_subset([0.5])


@pytest.mark.parametrize('index', [-1, 10])
def test_get_subset_refuses_the_indices_just_outside_the_dataset(index):
    with pytest.raises(IndexError, match='index {} is out of range'.format(index)):
        Numbers(10).get_subset([0, index])


def test_get_subset_takes_the_first_and_last_examples():
    subset = Numbers(10).get_subset(np.array([9, 0], np.int32))
    assert [int(subset[i]['data'][0]) for i in range(2)] == [9, 0]


def test_get_subset_names_the_first_index_out_of_range():
    with pytest.raises(IndexError, match='index 11 is out of range for a dataset of 10'):
        Numbers(10).get_subset([11, 12])


@pytest.mark.parametrize('indices', [[], range(0), np.array([], np.float64)])
def test_get_subset_of_no_indices_is_an_empty_dataset(indices):
    assert len(Numbers(10).get_subset(indices)) == 0


@pytest.mark.parametrize('indices', [[[0, 1]], 3, [True, False]])
def test_get_subset_refuses_indices_that_are_not_a_flat_sequence_of_integers(indices):
    with pytest.raises(TypeError, match='indices'):
        Numbers(10).get_subset(indices)


def test_a_subset_keeps_the_data_path_and_load_fn():
    class FromDisk(Numbers):
        def __init__(self):
            AbstractDataset.__init__(self, '/data', np.load)
            self.size = 4

    subset = FromDisk().get_subset([1]).get_subset([0])
    assert (subset.data_path, subset.load_fn) == ('/data', np.load)


def test_a_subset_of_a_plain_list_has_no_data_path():
    subset = AbstractDataset.get_subset([{'x': 1}, {'x': 2}], [1])
    assert (subset.data_path, subset.load_fn, subset[0]) == (None, None, {'x': 2})


@pytest.mark.parametrize('index', [1.5, '0'])
def test_a_subset_refuses_an_index_that_is_not_an_integer_naming_it(index):
    with pytest.raises(TypeError, match=r'index.*{}'.format(re.escape(repr(index)))):
        Numbers(10).get_subset([3, 4])[index]


def test_a_subset_takes_numpy_integer_indices():
    assert int(Numbers(10).get_subset([3, 4])[np.int64(1)]['data'][0]) == 4
