import random
import threading

import chainer
import numpy

from researchutils._numpy_random import (
    empty_global_random_states,
    get_global_random_states,
    seeded_numpy_random,
    set_global_random_states,
)


def test_draws_in_block_follow_randomstate_of_key():
    with seeded_numpy_random([1, 2, 3]):
        got = (numpy.random.rand(3), numpy.random.randint(0, 100, 4), numpy.random.sample(2))
    reference = numpy.random.RandomState([1, 2, 3])
    expected = (reference.rand(3), reference.randint(0, 100, 4), reference.random_sample(2))
    for a, b in zip(got, expected):
        numpy.testing.assert_array_equal(a, b)


def test_draws_outside_block_follow_global_state():
    with seeded_numpy_random([0]):
        pass
    numpy.random.seed(5)
    numpy.testing.assert_array_equal(numpy.random.rand(4), numpy.random.RandomState(5).rand(4))


def test_seed_in_block_does_not_touch_global_state():
    numpy.random.seed(5)
    with seeded_numpy_random([0]):
        numpy.random.seed(123)
    numpy.testing.assert_array_equal(numpy.random.rand(4), numpy.random.RandomState(5).rand(4))


def test_outer_block_draws_stay_reproducible_after_a_nested_block_ends():
    with seeded_numpy_random([0]):  # a finished block leaves a spare state to reuse
        numpy.random.rand(2)
    with seeded_numpy_random([7, 1]):
        before = numpy.random.rand(3)
        with seeded_numpy_random([9, 2]):
            inner = numpy.random.rand(3)
        after = numpy.random.rand(3)
        with seeded_numpy_random([9, 2]):  # a second inner block, reusing the spare
            second_inner = numpy.random.rand(3)
        last = numpy.random.randint(0, 1000, 4)
    outer_reference = numpy.random.RandomState([7, 1])
    numpy.testing.assert_array_equal(before, outer_reference.rand(3))
    numpy.testing.assert_array_equal(after, outer_reference.rand(3))
    numpy.testing.assert_array_equal(last, outer_reference.randint(0, 1000, 4))
    inner_reference = numpy.random.RandomState([9, 2]).rand(3)
    numpy.testing.assert_array_equal(inner, inner_reference)
    numpy.testing.assert_array_equal(second_inner, inner_reference)


def test_threads_draw_independently_of_each_other_and_of_the_main_thread():
    barrier = threading.Barrier(3)
    results = {}

    def worker(key):
        with seeded_numpy_random([key]):
            barrier.wait(5)
            results[key] = [numpy.random.rand() for _ in range(200)]

    threads = [threading.Thread(target=worker, args=(key,)) for key in (1, 2)]
    for thread in threads:
        thread.start()
    numpy.random.seed(9)
    barrier.wait(5)
    main = [numpy.random.rand() for _ in range(200)]
    for thread in threads:
        thread.join(5)
    assert main == numpy.random.RandomState(9).rand(200).tolist()
    for key in (1, 2):
        assert results[key] == numpy.random.RandomState([key]).rand(200).tolist()


def test_chainer_shuffle_order_sampler_still_finds_the_global_state():
    with seeded_numpy_random([0]):
        pass
    sampler = chainer.iterators.ShuffleOrderSampler()
    numpy.random.seed(3)
    assert sampler(numpy.arange(6), 0).tolist() == numpy.random.RandomState(3).permutation(
        6).tolist()


def test_numpy_random_functions_still_pickle_and_copy_after_the_dispatch_is_installed():
    import copy
    import pickle
    with seeded_numpy_random([0]):
        pass
    for function in (numpy.random.rand, numpy.random.uniform, numpy.random.seed):
        assert pickle.loads(pickle.dumps(function)) is function
        assert copy.deepcopy(function) is function
    holder = pickle.loads(pickle.dumps({'noise': numpy.random.normal}))
    numpy.random.seed(2)
    numpy.testing.assert_array_equal(holder['noise'](size=3),
                                     numpy.random.RandomState(2).normal(size=3))


def test_global_random_states_come_back_whole_cached_gaussians_included():
    numpy.random.seed(3)
    random.seed(3)
    numpy.random.standard_normal()
    random.gauss(0., 1.)
    assert numpy.random.get_state()[3] == 1 and random.getstate()[2] is not None
    states = {key: value.copy() for key, value in get_global_random_states().items()}
    expected = (numpy.random.standard_normal(3).tolist(),
                [random.gauss(0., 1.) for _ in range(3)], numpy.random.rand(2).tolist(),
                random.random())
    numpy.random.seed(9)
    random.seed(9)
    set_global_random_states(states)
    got = (numpy.random.standard_normal(3).tolist(), [random.gauss(0., 1.) for _ in range(3)],
           numpy.random.rand(2).tolist(), random.random())
    assert got == expected


def test_empty_global_random_states_have_the_shapes_and_dtypes_saved():
    saved = get_global_random_states()
    empty = empty_global_random_states()
    assert sorted(empty) == sorted(saved)
    assert all((empty[key].shape, empty[key].dtype) == (saved[key].shape, saved[key].dtype)
               for key in saved)
