"""The contract the three decorable iterators share, checked on each of them.

References are Chainer's own SerialIterator (for epoch arithmetic) and plain
NumPy (for decorations, orders and seeded draws).
"""
import copy
import doctest
import pickle

import chainer
import numpy
import pytest
from chainer import serializers
from chainer.iterators import MultithreadIterator, SerialIterator

from researchutils.chainer import iterators
from researchutils.chainer.iterators import (
    decorable_multiprocess_iterator,
    decorable_multithread_iterator,
    decorable_serial_iterator,
    unmodifiable_decorable_list,
)
from tests.support.iterators import (
    KINDS,
    LazyRange,
    fail_at_five,
    index_and_item,
    make_iterator,
    plus_uniform,
    square,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


def take(it, n):
    return [it.next() for _ in range(n)]


def progress(it):
    return (it.epoch, it.current_position, it.is_new_epoch, it.epoch_detail,
            it.previous_epoch_detail)


# --- epoch arithmetic, as Chainer's SerialIterator ------------------------------------

@pytest.mark.parametrize('size,batch_size', [(6, 2), (6, 4), (5, 2), (3, 7), (1, 1)])
def test_batches_and_progress_match_chainer_serial_iterator(kind, size, batch_size):
    dataset = list(range(size))
    expected = SerialIterator(dataset, batch_size, shuffle=False)
    with make_iterator(kind, dataset, batch_size, shuffle=False) as it:
        assert progress(it) == progress(expected)
        for _ in range(9):
            assert it.next() == expected.next()
            assert progress(it) == pytest.approx(progress(expected))


@pytest.mark.parametrize('repeat', [True, False])
def test_shuffled_progress_matches_chainer_serial_iterator(kind, repeat):
    dataset = list(range(7))
    expected = SerialIterator(dataset, 3, repeat=repeat)
    with make_iterator(kind, dataset, 3, repeat=repeat) as it:
        for _ in range(3 if not repeat else 8):
            assert len(it.next()) == len(expected.next())
            assert progress(it) == pytest.approx(progress(expected))


@pytest.mark.parametrize('size,batch_size', [(6, 2), (5, 2), (3, 7)])
def test_repeat_false_matches_chainer_serial_iterator(kind, size, batch_size):
    dataset = list(range(size))
    expected = list(SerialIterator(dataset, batch_size, repeat=False, shuffle=False))
    with make_iterator(kind, dataset, batch_size, repeat=False, shuffle=False) as it:
        assert list(it) == expected


def test_repeat_false_gives_short_last_batch_then_stop_iteration(kind):
    with make_iterator(kind, list(range(5)), 2, repeat=False, shuffle=False) as it:
        assert take(it, 3) == [[0, 1], [2, 3], [4]]
        assert it.epoch == 1 and it.is_new_epoch
        for _ in range(2):
            with pytest.raises(StopIteration):
                it.next()


def test_epoch_detail_counts_in_end_index_examples(kind):
    with make_iterator(kind, list(range(10)), 3, shuffle=False, end_index=4) as it:
        assert take(it, 3) == [[0, 1, 2], [3, 0, 1], [2, 3, 0]]
        assert it.epoch == 2
        assert it.epoch_detail == pytest.approx(2 + 1 / 4)
        assert it.previous_epoch_detail == pytest.approx(1 + 2 / 4)


def test_end_index_with_repeat_false_stops_after_end_index_examples(kind):
    with make_iterator(kind, list(range(10)), 3, repeat=False, shuffle=False,
                       end_index=7) as it:
        assert list(it) == [[0, 1, 2], [3, 4, 5], [6]]


def test_end_index_equal_to_the_dataset_length_iterates_the_whole_dataset(kind):
    with make_iterator(kind, list(range(10)), 4, repeat=False, shuffle=False,
                       end_index=10) as it:
        assert list(it) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_shuffle_permutes_only_the_first_end_index_examples(kind):
    with make_iterator(kind, list(range(100)), 7, end_index=7) as it:
        epochs = take(it, 6)
    assert all(sorted(batch) == list(range(7)) for batch in epochs)
    assert len({tuple(batch) for batch in epochs}) > 1


def test_shuffled_epochs_visit_every_example_once(kind):
    with make_iterator(kind, list(range(10)), 4, repeat=False, end_index=9) as it:
        seen = [x for batch in it for x in batch]
    assert sorted(seen) == list(range(9))


def test_shuffled_repeating_epochs_each_visit_every_example_once(kind):
    with make_iterator(kind, list(range(10)), 3) as it:
        seen = [x for batch in take(it, 10) for x in batch]
    for epoch in range(3):
        assert sorted(seen[10 * epoch:10 * (epoch + 1)]) == list(range(10))


def test_examples_of_any_type_pass_through(kind):
    dataset = [(i, {'label': str(i)}, numpy.full(2, i)) for i in range(4)]
    with make_iterator(kind, dataset, 2, shuffle=False) as it:
        batch = it.next()
    assert [(a, b) for a, b, _ in batch] == [(0, {'label': '0'}), (1, {'label': '1'})]
    numpy.testing.assert_array_equal(batch[1][2], [1, 1])


# --- decor_fun ------------------------------------------------------------------------

def test_decor_fun_receives_dataset_and_raw_int_index(kind):
    dataset = numpy.arange(10) * 7
    with make_iterator(kind, dataset, 4, shuffle=False, decor_fun=index_and_item) as it:
        batch = it.next()
    assert batch == [(i, 'int', 7 * i) for i in range(4)]


def test_batch_is_decor_fun_applied_to_shuffled_indices(kind):
    dataset = numpy.arange(12) + 1
    with make_iterator(kind, dataset, 5, decor_fun=square, end_index=10) as it:
        batches = take(it, 4)
    values = [int(x) for batch in batches for x in batch]
    squares = {int(x) ** 2 for x in dataset[:10]}
    assert set(values[:10]) == squares
    assert set(values[10:]) == squares


def test_dataset_attribute_is_the_decorated_list(kind):
    dataset = list(range(10))
    with make_iterator(kind, dataset, 2, decor_fun=square, end_index=4) as it:
        assert isinstance(it.dataset, iterators.UnmodifiableDecorableList)
        assert it.dataset.items is dataset
        assert list(it.dataset) == [0, 1, 4, 9]


# --- order samplers and reset -----------------------------------------------------------

class ReversingSampler(object):
    def __init__(self):
        self.calls = []

    def __call__(self, current_order, current_position):
        self.calls.append((list(current_order), current_position))
        return numpy.asarray(current_order)[::-1].copy()


def test_order_sampler_gives_each_epoch_order(kind):
    sampler = ReversingSampler()
    with make_iterator(kind, list(range(10)), 2, order_sampler=sampler, end_index=4) as it:
        assert take(it, 4) == [[3, 2], [1, 0], [0, 1], [2, 3]]
    assert sampler.calls[:2] == [([0, 1, 2, 3], 0), ([3, 2, 1, 0], 2)]


def each_index_twice(current_order, current_position):
    return numpy.repeat(numpy.arange(3), 2)


def even_indices(current_order, current_position):
    return numpy.array([0, 2, 4])


@pytest.mark.parametrize('sampler,epoch_order', [
    (each_index_twice, [0, 0, 1, 1, 2, 2]), (even_indices, [0, 2, 4])],
    ids=['each_index_twice', 'subset'])
def test_epoch_has_as_many_examples_as_the_sampled_order(kind, sampler, epoch_order):
    dataset = list(range(6))[:max(epoch_order) + 1]
    # Progress counts in len(order) examples: epoch e, position p is e + p / len(order).
    with make_iterator(kind, dataset, 4, order_sampler=sampler) as it:
        position = 0
        for _ in range(5):
            previous = position / len(epoch_order)
            batch = it.next()
            expected = [epoch_order[(position + k) % len(epoch_order)] for k in range(4)]
            assert batch == expected
            epoch, in_epoch = divmod(position + 4, len(epoch_order))
            assert it.epoch == epoch and it.current_position == in_epoch
            assert it.is_new_epoch == (position // len(epoch_order) < epoch)
            assert it.epoch_detail == pytest.approx((position + 4) / len(epoch_order))
            assert it.previous_epoch_detail == pytest.approx(previous)
            position += 4


def test_snapshot_of_a_longer_sampled_epoch_resumes(kind):
    with make_iterator(kind, list(range(3)), 4, order_sampler=each_index_twice) as it:
        it.next()
        saved = snapshot(it)
        expected = take(it, 3)
        expected_progress = progress(it)
    with make_iterator(kind, list(range(3)), 4, order_sampler=each_index_twice) as it:
        load(it, saved)
        assert take(it, 3) == expected
        assert progress(it) == pytest.approx(expected_progress)


def test_sampled_index_beyond_end_index_is_value_error_naming_it(kind):
    with pytest.raises(ValueError, match='order_sampler.* 5 .*end_index'):
        make_iterator(kind, list(range(10)), 2, end_index=4,
                      order_sampler=lambda order, position: numpy.array([0, 1, 2, 5]))


def test_sampled_negative_index_is_value_error(kind):
    with pytest.raises(ValueError, match='order_sampler.* -1 '):
        make_iterator(kind, list(range(10)), 2,
                      order_sampler=lambda order, position: numpy.array([0, -1]))


def test_empty_sampled_order_is_value_error(kind):
    with pytest.raises(ValueError, match='order_sampler .*no examples'):
        make_iterator(kind, list(range(10)), 2, order_sampler=lambda order, position: [])


def test_sampled_order_of_floats_is_type_error(kind):
    with pytest.raises(TypeError, match='order_sampler .*integer'):
        make_iterator(kind, list(range(10)), 2,
                      order_sampler=lambda order, position: numpy.arange(4.))


class ShrinkingSampler(object):
    def __init__(self):
        self.calls = 0

    def __call__(self, current_order, current_position):
        self.calls += 1
        return numpy.arange(6 - self.calls // 2)


def test_order_changing_length_between_epochs_is_value_error(kind):
    with make_iterator(kind, list(range(10)), 4, order_sampler=ShrinkingSampler()) as it:
        with pytest.raises(ValueError, match='order_sampler .*5 .*6'):
            take(it, 4)


def test_later_sampled_index_beyond_end_index_is_value_error(kind):
    def sampler(current_order, current_position):
        return numpy.array([0, 1, 2, 3]) + (current_position > 0) * 2

    with make_iterator(kind, list(range(10)), 3, end_index=5, order_sampler=sampler) as it:
        with pytest.raises(ValueError, match='order_sampler.* 5 .*end_index'):
            take(it, 4)


def test_shuffle_with_order_sampler_is_value_error(kind):
    with pytest.raises(ValueError, match='shuffle'):
        make_iterator(kind, list(range(10)), 2, shuffle=True, order_sampler=ReversingSampler())


def test_reset_restarts_the_first_epoch(kind):
    with make_iterator(kind, list(range(5)), 2, shuffle=False) as it:
        first = take(it, 4)
        it.reset()
        assert progress(it) == (0, 0, False, 0.0, None)
        assert take(it, 4) == first


def test_reset_after_stop_iteration_allows_another_pass(kind):
    with make_iterator(kind, list(range(5)), 2, repeat=False, shuffle=False) as it:
        first = list(it)
        it.reset()
        assert list(it) == first


@pytest.mark.parametrize('clone', [copy.copy, copy.deepcopy,
                                   lambda it: pickle.loads(pickle.dumps(it))],
                         ids=['copy', 'deepcopy', 'pickle'])
def test_clone_made_after_next_continues_from_the_same_position(kind, clone):
    with make_iterator(kind, list(range(10)), 3, decor_fun=square, seed=5) as it:
        take(it, 2)
        at_clone = progress(it)
        twin = clone(it)
        expected = take(it, 5)
    with twin:
        assert progress(twin) == at_clone
        assert take(twin, 5) == expected


def test_finalize_is_idempotent(kind):
    it = make_iterator(kind, list(range(5)), 2, shuffle=False)
    it.next()
    it.finalize()
    it.finalize()


def test_context_manager_finalizes(kind):
    with make_iterator(kind, list(range(5)), 2, shuffle=False) as it:
        assert it.next() == [0, 1]
    it.finalize()


# --- snapshots ----------------------------------------------------------------------------

def snapshot(it):
    target = {}
    it.serialize(serializers.DictionarySerializer(target))
    return target


def load(it, target):
    it.serialize(serializers.NpzDeserializer(target))


def test_snapshot_has_chainer_serial_iterator_keys(kind):
    with make_iterator(kind, list(range(10)), 3) as it:
        it.next()
        keys = set(snapshot(it))
    expected = snapshot(SerialIterator(list(range(10)), 3))
    assert keys == set(expected)


@pytest.mark.parametrize('source', KINDS)
@pytest.mark.parametrize('destination', KINDS)
def test_resume_mid_epoch_continues_with_same_batches(source, destination):
    dataset = list(range(20))
    with make_iterator(source, dataset, 3, decor_fun=square, end_index=12) as it:
        take(it, 2)
        saved = snapshot(it)
        progress_at_snapshot = progress(it)
        expected = take(it, 2)  # the rest of the first epoch
    with make_iterator(destination, dataset, 3, decor_fun=square, end_index=12) as it:
        take(it, 1)  # a fresh iterator that has already prefetched
        load(it, saved)
        assert progress(it) == progress_at_snapshot
        assert take(it, 2) == expected


def test_resume_from_npz_file_continues_with_same_batches(kind, tmp_path):
    dataset = list(range(12))
    with make_iterator(kind, dataset, 3) as it:
        it.next()
        serializers.save_npz(str(tmp_path / 'iterator.npz'), it)
        expected = take(it, 3)
    with make_iterator(kind, dataset, 3) as it:
        serializers.load_npz(str(tmp_path / 'iterator.npz'), it)
        assert take(it, 3) == expected


def test_snapshot_is_readable_by_chainer_serial_iterator(kind):
    dataset = list(range(12))
    with make_iterator(kind, dataset, 3) as it:
        it.next()
        saved = snapshot(it)
        expected = take(it, 3)
    chainer_it = SerialIterator(dataset, 3)
    load(chainer_it, saved)
    assert take(chainer_it, 3) == expected


@pytest.mark.parametrize('chainer_class', [SerialIterator, MultithreadIterator])
def test_chainer_iterator_snapshot_is_readable(kind, chainer_class):
    # Chainer's MultithreadIterator writes ``_order`` where the others write ``order``.
    dataset = list(range(12))
    chainer_it = chainer_class(dataset, 3)
    chainer_it.next()
    saved = snapshot(chainer_it)
    expected = take(chainer_it, 3)
    chainer_it.finalize()
    with make_iterator(kind, dataset, 3) as it:
        load(it, saved)
        assert take(it, 3) == expected


def test_saving_a_snapshot_does_not_change_the_batches(kind):
    dataset = list(range(12))
    with make_iterator(kind, dataset, 3, seed=1) as it:
        it.next()
        snapshot(it)
        with_snapshot = take(it, 5)
    with make_iterator(kind, dataset, 3, seed=1) as it:
        it.next()
        assert take(it, 5) == with_snapshot


def test_snapshot_with_other_epoch_size_is_value_error(kind):
    with make_iterator(kind, list(range(12)), 3) as it:
        saved = snapshot(it)
    with make_iterator(kind, list(range(12)), 3, end_index=10) as it:
        with pytest.raises(ValueError, match='order'):
            load(it, saved)


# --- seeds ----------------------------------------------------------------------------------

def seeded_batches(kind, seed, n_batches=6, **kwargs):
    with make_iterator(kind, numpy.arange(10.), 4, decor_fun=plus_uniform, seed=seed,
                       **kwargs) as it:
        return [numpy.array(batch) for batch in take(it, n_batches)]


def test_seeded_order_of_epoch_is_permutation_of_seed_and_epoch(kind):
    with make_iterator(kind, list(range(10)), 5, seed=42, end_index=5) as it:
        orders = take(it, 3)
    assert orders == [numpy.random.RandomState([42, e]).permutation(5).tolist()
                      for e in range(3)]


def test_seeded_draws_are_randomstate_of_seed_epoch_index(kind):
    with make_iterator(kind, numpy.arange(10.), 4, shuffle=False, decor_fun=plus_uniform,
                       seed=7) as it:
        batches = take(it, 3)
    got = [x for batch in batches for x in batch]
    positions = range(12)
    expected = [(p % 10) + numpy.random.RandomState([7, p // 10, p % 10]).uniform()
                for p in positions]
    assert got == pytest.approx(expected)


@pytest.mark.parametrize('workers', [1, 3])
def test_same_seed_gives_serial_batches_whatever_the_workers(kind, workers):
    expected = seeded_batches('serial', 5)
    option = {'serial': {}, 'multithread': {'n_threads': workers},
              'multiprocess': {'n_processes': workers}}[kind]
    got = seeded_batches(kind, 5, **option)
    for a, b in zip(got, expected):
        numpy.testing.assert_array_equal(a, b)


def test_different_seeds_give_different_batches(kind):
    assert not numpy.array_equal(seeded_batches(kind, 1)[0], seeded_batches(kind, 2)[0])


def test_seeded_resume_continues_across_epochs(kind):
    with make_iterator(kind, numpy.arange(10.), 4, decor_fun=plus_uniform, seed=3) as it:
        it.next()
        saved = snapshot(it)
        expected = take(it, 6)
    with make_iterator(kind, numpy.arange(10.), 4, decor_fun=plus_uniform, seed=3) as it:
        load(it, saved)
        assert take(it, 6) == expected


def test_seeded_iterator_leaves_the_global_numpy_state_alone(kind):
    numpy.random.seed(11)
    expected = numpy.random.rand(3)
    numpy.random.seed(11)
    seeded_batches(kind, 5)
    numpy.testing.assert_array_equal(numpy.random.rand(3), expected)


# --- failures ------------------------------------------------------------------------------

def test_decor_fun_error_keeps_type_and_message_and_names_index(kind):
    with make_iterator(kind, list(range(10)), 4, shuffle=False, decor_fun=fail_at_five) as it:
        it.next()
        with pytest.raises(ValueError, match='cannot decorate example 5') as info:
            it.next()
    assert any('dataset index 5' in note for note in info.value.__notes__)


def test_failed_batch_is_retried_by_the_next_call(kind):
    with make_iterator(kind, list(range(10)), 4, shuffle=False, decor_fun=fail_at_five) as it:
        it.next()
        before = progress(it)
        for _ in range(2):
            with pytest.raises(ValueError):
                it.next()
            assert progress(it) == before


def test_dataset_error_names_index(kind):
    class Broken(object):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            raise KeyError('record {} is missing'.format(index))

    with make_iterator(kind, Broken(), 2, shuffle=False) as it:
        with pytest.raises(KeyError, match='record 0 is missing') as info:
            it.next()
    assert any('dataset[0]' in note for note in info.value.__notes__)


# --- arguments -------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ({'batch_size': 0}, ValueError, 'batch_size'),
    ({'batch_size': -2}, ValueError, 'batch_size'),
    ({'batch_size': 2.5}, TypeError, 'batch_size'),
    ({'batch_size': True}, TypeError, 'batch_size'),
    ({'repeat': 'yes'}, TypeError, 'repeat'),
    ({'repeat': 2}, TypeError, 'repeat'),
    ({'shuffle': 'no'}, TypeError, 'shuffle'),
    ({'end_index': 0}, ValueError, 'end_index'),
    ({'end_index': -1}, ValueError, 'end_index'),
    ({'end_index': 11}, ValueError, 'end_index'),
    ({'end_index': 2.0}, ValueError, 'end_index'),
    ({'end_index': '3'}, ValueError, 'end_index'),
    ({'end_index': True}, ValueError, 'end_index'),
    ({'decor_fun': 3}, TypeError, 'decor_fun'),
    ({'order_sampler': 3}, TypeError, 'order_sampler'),
    ({'seed': -1}, ValueError, 'seed'),
    ({'seed': 2 ** 32}, ValueError, 'seed'),
    ({'seed': 1.5}, TypeError, 'seed'),
    ({'seed': '1'}, TypeError, 'seed'),
    ({'dataset': 5}, TypeError, 'items'),
    ({'dataset': []}, ValueError, 'empty'),
]


@pytest.mark.parametrize('arguments,error,name', BAD_ARGUMENTS,
                         ids=[repr(a[0]) for a in BAD_ARGUMENTS])
def test_bad_argument_is_rejected_naming_it(kind, arguments, error, name):
    kwargs = {'dataset': list(range(10)), 'batch_size': 2}
    kwargs.update(arguments)
    with pytest.raises(error, match=name) as info:
        make_iterator(kind, kwargs.pop('dataset'), kwargs.pop('batch_size'), **kwargs)
    value = list(arguments.values())[0]
    if name not in ('items', 'empty'):
        assert repr(value) in str(info.value)


def test_chainer_options_are_keyword_only(kind):
    positional = {'serial': 6, 'multithread': 7, 'multiprocess': 9}[kind]
    args = [list(range(10)), 2, True, None] + [None] * (positional - 4)
    with pytest.raises(TypeError):
        make_iterator(kind, *(args + [ReversingSampler()]))


def test_positional_arguments_keep_the_original_order(kind):
    dataset = list(range(10))
    if kind == 'serial':
        it = iterators.DecorableSerialIterator(dataset, 3, True, False, square, 4)
    elif kind == 'multithread':
        it = iterators.DecorableMultithreadIterator(dataset, 3, True, False, 2, square, 4)
    else:
        it = iterators.DecorableMultiprocessIterator(
            dataset, 3, True, False, 2, 1, None, square, 4)
    with it:
        assert take(it, 2) == [[0, 1, 4], [9, 0, 1]]


def test_construction_over_huge_lazy_dataset_reads_nothing(kind):
    dataset = LazyRange(10 ** 8)
    with make_iterator(kind, dataset, 2, shuffle=False) as it:
        assert dataset.reads == 0
        assert it.next() == [0, 3]


# --- documentation ---------------------------------------------------------------------------

@pytest.mark.parametrize('module', [
    unmodifiable_decorable_list, decorable_serial_iterator, decorable_multithread_iterator,
    decorable_multiprocess_iterator], ids=lambda m: m.__name__.rsplit('.', 1)[-1])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, extraglobs=vars(iterators), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_public_names_are_chainer_iterators():
    for name in ('DecorableSerialIterator', 'DecorableMultithreadIterator',
                 'DecorableMultiprocessIterator'):
        assert issubclass(getattr(iterators, name), chainer.dataset.Iterator)


@pytest.mark.parametrize('flag', [0, 1])
def test_repeat_and_shuffle_take_0_and_1_as_chainer_does(kind, flag):
    dataset = list(range(5))
    reference = SerialIterator(dataset, 2, repeat=bool(flag), shuffle=False)
    expected = [reference.next() for _ in range(3)]
    with make_iterator(kind, dataset, 2, repeat=flag, shuffle=0) as it:
        assert it.repeat is bool(flag)
        got = [it.next() for _ in range(3)]
    assert got == expected


def test_snapshot_without_previous_epoch_detail_is_loaded_with_an_estimate(kind):
    dataset = list(range(10))
    reference = SerialIterator(dataset, 3, shuffle=False)
    for _ in range(4):
        reference.next()
    state = {}
    reference.serialize(serializers.DictionarySerializer(state))
    del state['previous_epoch_detail']   # as written by Chainer before v4
    with make_iterator(kind, dataset, 3, shuffle=False) as it:
        it.serialize(serializers.NpzDeserializer(state))
        assert it.epoch_detail == reference.epoch_detail
        assert it.previous_epoch_detail == pytest.approx(reference.previous_epoch_detail)
        assert it.next() == reference.next()
