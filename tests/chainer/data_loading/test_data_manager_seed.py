"""DataManager's seed: the numpy.random draws of batch b of epoch e come from
``numpy.random.RandomState([seed, e, b])``, in that order, as its docs say. The reference is
that formula in plain NumPy; the batches come from a real DataManager."""
import numpy as np
import pytest

from researchutils.chainer.data_loading import DataManager, RandomSampler
from tests.chainer.data_loading.test_data_manager import Numbers, add_noise


def _documented_noise(seed, epoch, batch, size):
    """What add_noise draws for batch ``batch`` of epoch ``epoch``, by the docs' formula."""
    return np.random.RandomState([seed, epoch, batch]).uniform(size=size)


@pytest.mark.parametrize('sampler', [{}, {'sampler_cls': RandomSampler,
                                          'sampler_kwargs': {'seed': 0}}])
def test_each_batchs_draws_come_from_seed_epoch_and_batch_index_in_that_order(sampler):
    # 3 epochs of 4 batches (the last one of 2 examples): (epoch, batch) and (batch, epoch)
    # differ for every batch but the ones where they are equal.
    manager = DataManager(Numbers(14), 4, transforms=add_noise, seed=11, **sampler)
    iterator = manager.get_iterator()
    for epoch in range(3):
        for batch_index, size in enumerate([4, 4, 4, 2]):
            batch = iterator.next()
            assert (iterator.epoch, iterator.is_new_epoch) == (epoch + (batch_index == 3),
                                                               batch_index == 3)
            np.testing.assert_array_equal(batch['noise'],
                                          _documented_noise(11, epoch, batch_index, size))
    iterator.finalize()
