import numpy as np
import pytest

from researchutils.chainer.data_loading import SequentialSampler


def test_every_epoch_visits_the_indices_in_order():
    sampler = SequentialSampler.from_dataset(range(6))
    for epoch in range(3):
        np.testing.assert_array_equal(sampler.epoch_order(epoch), np.arange(6))


def test_given_indices_keep_their_order():
    np.testing.assert_array_equal(SequentialSampler([4, 0, 2]).epoch_order(0), [4, 0, 2])


def test_length_is_the_number_of_indices():
    assert len(SequentialSampler.from_dataset(range(7))) == 7


@pytest.mark.parametrize('indices', [[0.5, 1.0], [True, False], ['a'], None, 5, [[0, 1]]])
def test_indices_that_are_not_integers_are_refused_not_rounded(indices):
    with pytest.raises((TypeError, ValueError), match='^indices must be a flat sequence of '
                                                      'integers >= 0'):
        SequentialSampler(indices)


@pytest.mark.parametrize('indices', [[-1, 0], np.array([2, -3]), range(-2, 2)])
def test_negative_indices_are_refused(indices):
    with pytest.raises(ValueError, match='^indices must be a flat sequence of integers >= 0'):
        SequentialSampler(indices)


@pytest.mark.parametrize('indices', [[], np.array([], np.int32), range(0)])
def test_no_indices_is_an_empty_epoch(indices):
    assert list(SequentialSampler(indices).epoch_order(0)) == []


def test_changing_a_returned_order_leaves_the_next_epochs_order_alone():
    sampler = SequentialSampler(np.array([4, 0, 2]))
    order = sampler.epoch_order(0)
    order[0] = 7
    np.testing.assert_array_equal(sampler.epoch_order(1), [4, 0, 2])


def test_a_range_of_indices_stays_a_range():
    assert SequentialSampler(range(2, 9)).epoch_order(3) == range(2, 9)
