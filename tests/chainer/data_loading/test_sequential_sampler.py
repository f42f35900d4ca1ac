import numpy as np

from researchutils.chainer.data_loading import SequentialSampler


def test_every_epoch_visits_the_indices_in_order():
    sampler = SequentialSampler.from_dataset(range(6))
    for epoch in range(3):
        np.testing.assert_array_equal(sampler.epoch_order(epoch), np.arange(6))


def test_given_indices_keep_their_order():
    np.testing.assert_array_equal(SequentialSampler([4, 0, 2]).epoch_order(0), [4, 0, 2])


def test_length_is_the_number_of_indices():
    assert len(SequentialSampler.from_dataset(range(7))) == 7
