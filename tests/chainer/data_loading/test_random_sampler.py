import chainer
import numpy as np
import pytest

from researchutils.chainer.data_loading import RandomSampler


def test_each_epoch_is_a_permutation_of_the_indices():
    sampler = RandomSampler.from_dataset(range(50), seed=3)
    for epoch in range(3):
        assert sorted(sampler.epoch_order(epoch)) == list(range(50))


def test_epochs_have_different_orders():
    sampler = RandomSampler.from_dataset(range(50), seed=3)
    assert not np.array_equal(sampler.epoch_order(0), sampler.epoch_order(1))


def test_from_dataset_passes_the_seed_on():
    np.testing.assert_array_equal(RandomSampler.from_dataset(range(50), seed=3).epoch_order(0),
                                  RandomSampler(range(50), seed=3).epoch_order(0))
    np.random.seed(11)  # the global state an unseeded sampler would draw from instead
    np.testing.assert_array_equal(RandomSampler.from_dataset(range(50), seed=5).epoch_order(2),
                                  RandomSampler(range(50), seed=5).epoch_order(2))


def test_order_depends_only_on_seed_and_epoch():
    first = RandomSampler(range(50), seed=7)
    second = RandomSampler(range(50), seed=7)
    second.epoch_order(0)
    np.testing.assert_array_equal(first.epoch_order(4), second.epoch_order(4))


def test_global_numpy_seed_makes_unseeded_samplers_repeatable():
    np.random.seed(11)
    first = RandomSampler(range(20)).epoch_order(0)
    np.random.seed(11)
    np.testing.assert_array_equal(RandomSampler(range(20)).epoch_order(0), first)


def test_seed_survives_serialization():
    sampler = RandomSampler(range(30), seed=5)
    target = {}
    sampler.serialize(chainer.serializers.DictionarySerializer(target))
    restored = RandomSampler(range(30), seed=99)
    restored.serialize(chainer.serializers.NpzDeserializer(target))
    np.testing.assert_array_equal(restored.epoch_order(2), sampler.epoch_order(2))


def test_negative_seed_is_refused():
    with pytest.raises(ValueError, match='seed'):
        RandomSampler(range(3), seed=-1)


def test_bool_seed_is_refused_with_type_error():
    with pytest.raises(TypeError, match='seed'):
        RandomSampler(range(3), seed=True)


def test_non_integer_seed_is_refused_with_type_error():
    with pytest.raises(TypeError, match='seed'):
        RandomSampler(range(3), seed=1.5)


def test_seed_of_2_to_the_32_is_refused_like_data_manager():
    with pytest.raises(ValueError, match='seed'):
        RandomSampler(range(3), seed=2 ** 32)


def test_order_of_epoch_is_the_decorable_iterators_seeded_shuffle():
    # One rule for a seeded epoch order: RandomState([seed, epoch]).permutation(n),
    # as the decorable iterators document and test it.
    from researchutils.chainer.iterators import DecorableSerialIterator
    iterator = DecorableSerialIterator(list(range(12)), 12, seed=9)
    for epoch in range(3):
        expected = np.random.RandomState([9, epoch]).permutation(12)
        np.testing.assert_array_equal(RandomSampler(range(12), seed=9).epoch_order(epoch),
                                      expected)
        assert iterator.next() == expected.tolist()


def test_order_of_epoch_permutes_the_given_indices_by_the_seeded_rule():
    indices = np.array([40, 10, 30, 20])
    expected = indices[np.random.RandomState([3, 1]).permutation(4)]
    np.testing.assert_array_equal(RandomSampler(indices, seed=3).epoch_order(1), expected)


@pytest.mark.parametrize('indices', [[0.5, 1.0], [True, False], ['a'], None, 5])
def test_indices_that_are_not_integers_are_refused_not_rounded(indices):
    with pytest.raises(TypeError, match='^indices must be a flat sequence of integers >= 0'):
        RandomSampler(indices, seed=0)


def test_negative_indices_are_refused():
    with pytest.raises(ValueError, match='^indices must be a flat sequence of integers >= 0'):
        RandomSampler([3, -1], seed=0)


def test_the_seed_is_stored_under_the_key_seed_of_chainers_snapshots():
    # Snapshots written by earlier runs name it 'seed'; a resume reads it back from there.
    target = {}
    RandomSampler(range(30), seed=5).serialize(chainer.serializers.DictionarySerializer(target))
    assert list(target) == ['seed'] and int(target['seed']) == 5
    restored = RandomSampler(range(30), seed=99)
    restored.serialize(chainer.serializers.NpzDeserializer({'seed': np.asarray(6)}))
    assert restored.seed == 6


def test_the_length_is_the_number_of_indices():
    assert len(RandomSampler([5, 2, 9], seed=0)) == 3


def test_unseeded_samplers_draw_seeds_from_a_range_too_wide_to_repeat():
    # Two unseeded runs share an order only when they draw the same seed.
    np.random.seed(0)
    seeds = [RandomSampler(range(3)).seed for _ in range(200)]
    assert len(set(seeds)) == 200
    assert all(0 <= seed < 2 ** 32 for seed in seeds)
