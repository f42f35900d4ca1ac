import os
import signal
import time

import chainer
import numpy as np
import pytest

from researchutils.chainer.data_loading import (
    AbstractDataset,
    DataManager,
    RandomSampler,
    SequentialSampler,
)
from tests.support.processes import wait_until_taken
from tests.support.start_methods import (
    PICKLING_START_METHODS,
    START_METHODS,
    using_start_method,
)


class Numbers(AbstractDataset):
    """Example i: data = [i, 2i] (float64), label = i % 3 (int32)."""

    def __init__(self, size):
        super().__init__()
        self.size = size

    def __getitem__(self, index):
        return {'data': np.array([index, 2 * index], np.float64), 'label': np.int32(index % 3)}

    def __len__(self):
        return self.size


class FailsAt(Numbers):
    def __getitem__(self, index):
        if index == 5:
            raise ArithmeticError('broken example')
        return super().__getitem__(index)


def add_one(batch):
    return dict(batch, data=batch['data'] + 1)


def add_pid(batch):
    # Long enough that one worker cannot build every batch before the other starts.
    time.sleep(0.02)
    return dict(batch, pid=np.full(len(batch['data']), os.getpid()))


def batch_mean_centering(batch):
    # A transform that needs the whole batch, not one example.
    return dict(batch, data=batch['data'] - batch['data'].mean(axis=0))


def failing_transform(batch):
    raise ZeroDivisionError('transform failed')


def kill_worker(batch):
    if batch['data'][0, 0] == 4:
        os._exit(1)
    return batch


def add_noise(batch):
    # Uses the legacy global numpy.random functions, as most augmentation code does.
    return dict(batch, noise=np.random.uniform(size=len(batch['data'])))


def firsts(batches):
    return [list(batch['data'][:, 0].astype(int)) for batch in batches]


def test_batches_stack_examples_along_a_new_first_axis():
    batch = next(iter(DataManager(Numbers(10), 4)))
    np.testing.assert_array_equal(batch['data'], np.stack([[i, 2 * i] for i in range(4)]))
    np.testing.assert_array_equal(batch['label'], np.array([0, 1, 2, 0], np.int32))


def test_one_epoch_has_a_short_last_batch():
    assert firsts(DataManager(Numbers(5), 2)) == [[0, 1], [2, 3], [4]]
    assert len(DataManager(Numbers(5), 2)) == 3


def test_drop_last_drops_the_short_batch():
    manager = DataManager(Numbers(5), 2, drop_last=True)
    assert firsts(manager) == [[0, 1], [2, 3]]
    assert len(manager) == 2


@pytest.mark.parametrize('n_processes', [0, 2])
def test_drop_last_keeps_a_full_last_batch(n_processes):
    manager = DataManager(Numbers(32), 8, n_processes, drop_last=True)
    assert firsts(manager) == [list(range(i, i + 8)) for i in range(0, 32, 8)]
    assert len(manager) == 4
    iterator = manager.get_iterator(repeat=True)
    try:
        epoch = [next(iterator) for _ in range(4)]
        assert iterator.is_new_epoch and iterator.epoch == 1
        assert firsts(epoch) == firsts(manager)
    finally:
        iterator.finalize()


def test_random_sampler_visits_every_example_once_per_epoch():
    manager = DataManager(Numbers(23), 5, sampler_cls=RandomSampler, sampler_kwargs={'seed': 1})
    seen = [i for batch in firsts(manager) for i in batch]
    assert sorted(seen) == list(range(23))
    assert seen != list(range(23))


def test_transforms_get_the_whole_batch_dict():
    batch = next(iter(DataManager(Numbers(4), 4, transforms=batch_mean_centering)))
    data = np.array([[i, 2 * i] for i in range(4)], np.float64)
    np.testing.assert_allclose(batch['data'], data - data.mean(axis=0))


@pytest.mark.timeout(60)
def test_worker_processes_give_the_in_process_batches():
    in_process = list(DataManager(Numbers(30), 4, transforms=batch_mean_centering))
    workers = list(DataManager(Numbers(30), 4, transforms=batch_mean_centering,
                               n_process_augmentation=2))
    assert len(workers) == len(in_process)
    for ours, reference in zip(workers, in_process):
        np.testing.assert_array_equal(ours['data'], reference['data'])


@pytest.mark.timeout(60)
def test_transforms_run_in_the_worker_processes():
    batches = list(DataManager(Numbers(16), 2, transforms=add_pid, n_process_augmentation=2))
    pids = {int(batch['pid'][0]) for batch in batches}
    assert os.getpid() not in pids
    assert len(pids) == 2


@pytest.mark.timeout(60)
def test_worker_transform_error_keeps_its_type_and_message():
    manager = DataManager(Numbers(8), 2, transforms=failing_transform, n_process_augmentation=2)
    with pytest.raises(ZeroDivisionError, match='transform failed'):
        list(manager)


@pytest.mark.timeout(60)
def test_a_killed_worker_is_an_error_not_a_hang():
    manager = DataManager(Numbers(12), 2, transforms=kill_worker, n_process_augmentation=2)
    with pytest.raises(RuntimeError, match='exited'):
        list(manager)


def test_after_a_failed_batch_the_iterator_retries_the_same_batch():
    failures = [ValueError('flaky')]

    def flaky(batch):
        if failures:
            raise failures.pop()
        return batch

    iterator = DataManager(Numbers(6), 2, transforms=flaky).get_iterator()
    with pytest.raises(ValueError, match='flaky'):
        iterator.next()
    assert firsts(iterator.next() for _ in range(3)) == [[0, 1], [2, 3], [4, 5]]


def test_dataset_error_keeps_its_type_and_names_the_index():
    with pytest.raises(ArithmeticError, match='broken example') as info:
        list(DataManager(FailsAt(8), 2))
    assert 'dataset[5]' in '\n'.join(getattr(info.value, '__notes__', ['dataset[5]']))


def test_non_dict_example_is_refused_naming_the_index():
    with pytest.raises(TypeError, match=r'dataset\[0\] returned int'):
        list(DataManager([1, 2, 3], 2))


def test_iterator_counts_epochs_like_chainer():
    iterator = DataManager(Numbers(5), 2).get_iterator()
    details = []
    for _ in range(4):
        iterator.next()
        details.append((iterator.epoch, iterator.is_new_epoch, round(iterator.epoch_detail, 3)))
    assert details == [(0, False, 0.333), (0, False, 0.667), (1, True, 1.0), (1, False, 1.333)]
    assert iterator.previous_epoch_detail == pytest.approx(1.0)


def test_iterator_without_repeat_stops_after_one_epoch():
    iterator = DataManager(Numbers(5), 2).get_iterator(repeat=False)
    assert len(list(iterator)) == 3
    with pytest.raises(StopIteration):
        iterator.next()


def test_snapshot_mid_epoch_resumes_with_the_same_remaining_batches():
    manager = DataManager(Numbers(20), 3, sampler_cls=RandomSampler)
    iterator = manager.get_iterator()
    for _ in range(9):  # one epoch (7 batches) and two more
        iterator.next()
    state = {}
    iterator.serialize(chainer.serializers.DictionarySerializer(state))
    expected = firsts(iterator.next() for _ in range(8))
    resumed = manager.get_iterator()
    resumed.serialize(chainer.serializers.NpzDeserializer(state))
    assert firsts(resumed.next() for _ in range(8)) == expected
    assert resumed.epoch == iterator.epoch


def _random_order(seed, workers=0):
    return DataManager(Numbers(20), 3, sampler_cls=RandomSampler, sampler_kwargs={'seed': seed},
                       n_process_augmentation=workers)


@pytest.mark.timeout(60)
@pytest.mark.parametrize('workers', [0, 2])
def test_a_used_iterator_loading_another_seeds_snapshot_continues_in_its_order(workers):
    saved = _random_order(seed=0).get_iterator()
    for _ in range(2):
        saved.next()
    state = {}
    saved.serialize(chainer.serializers.DictionarySerializer(state))
    expected = firsts(saved.next() for _ in range(9))  # the rest of epoch 0 and into epoch 1
    # An iterator of seed 1 that already planned (and, with workers, started) its own batches.
    used = _random_order(seed=1, workers=workers).get_iterator()
    used.next()
    used.serialize(chainer.serializers.NpzDeserializer(state))
    try:
        assert firsts(used.next() for _ in range(9)) == expected
    finally:
        used.finalize()
    assert used.sampler.seed == 0


def _order(seed, epoch, size):
    """RandomSampler's documented order: ``RandomState([seed, epoch]).permutation(size)``."""
    return np.random.RandomState([seed, epoch]).permutation(size).tolist()


def _stopped_after(batch_size, n_batches, size=40, seed=2, **settings):
    """The state of an iterator stopped after ``n_batches``, and the batches it gave."""
    iterator = DataManager(Numbers(size), batch_size, sampler_cls=RandomSampler,
                           sampler_kwargs={'seed': seed}, **settings).get_iterator()
    given = [iterator.next() for _ in range(n_batches)]
    state = {}
    iterator.serialize(chainer.serializers.DictionarySerializer(state))
    return state, firsts(given)


def _resumed(state, batch_size, size=40, workers=0, **settings):
    iterator = DataManager(Numbers(size), batch_size, sampler_cls=RandomSampler,
                           n_process_augmentation=workers, **settings).get_iterator()
    iterator.serialize(chainer.serializers.NpzDeserializer(state))
    return iterator


def _rest_of_epoch(iterator):
    batches = []
    epoch = iterator.epoch
    while iterator.epoch == epoch:
        batches.append(iterator.next())
    assert iterator.is_new_epoch
    return firsts(batches)


@pytest.mark.timeout(60)
@pytest.mark.parametrize('workers', [0, 2])
@pytest.mark.parametrize('new_batch_size', [4, 16])
def test_a_snapshot_resumed_with_another_batch_size_continues_the_epoch_by_example(
        workers, new_batch_size):
    # Stopped after 2 batches of 8: the resumed run goes on from example 16 of the order.
    state, before = _stopped_after(8, 2)
    iterator = _resumed(state, new_batch_size, workers=workers)
    try:
        after = _rest_of_epoch(iterator)
        following = firsts([iterator.next()])
    finally:
        iterator.finalize()
    order = _order(2, 0, 40)
    assert before == [order[0:8], order[8:16]]
    assert after == [order[start:start + new_batch_size]
                     for start in range(16, 40, new_batch_size)]
    # Each example of the epoch once; then epoch 1 in batches of the new size.
    assert sorted(index for batch in before + after for index in batch) == list(range(40))
    assert following == [_order(2, 1, 40)[:new_batch_size]]


def test_with_drop_last_a_larger_batch_size_drops_the_rest_of_the_epoch_it_resumes_in():
    # 40 examples: 4 full batches of 8 were planned; after 3 (24 examples) only 16 are
    # left, which one batch of 32 cannot hold: the epoch ends there, as without a stop.
    state, _ = _stopped_after(8, 3, drop_last=True)
    iterator = _resumed(state, 32, drop_last=True)
    assert (iterator.epoch, iterator.is_new_epoch) == (1, True)
    assert firsts([iterator.next()]) == [_order(2, 1, 40)[:32]]


def test_a_snapshot_written_when_positions_counted_batches_still_resumes():
    state, _ = _stopped_after(8, 2)
    del state['current_position']
    state['position'] = np.asarray(2)
    assert _rest_of_epoch(_resumed(state, 8)) == [
        _order(2, 0, 40)[start:start + 8] for start in range(16, 40, 8)]


def test_a_snapshot_of_a_position_beyond_the_dataset_is_refused_naming_it():
    state, _ = _stopped_after(8, 2)
    with pytest.raises(ValueError, match='current_position 16 outside 0..9'):
        _resumed(state, 8, size=10)


def test_a_snapshot_after_exactly_one_batch_resumes_with_previous_epoch_detail_zero():
    manager = DataManager(Numbers(20), 3)
    iterator = manager.get_iterator()
    iterator.next()
    assert iterator.previous_epoch_detail == 0.0
    state = {}
    iterator.serialize(chainer.serializers.DictionarySerializer(state))
    resumed = manager.get_iterator()
    resumed.serialize(chainer.serializers.NpzDeserializer(state))
    assert resumed.previous_epoch_detail == 0.0
    assert resumed.epoch_detail == pytest.approx(1 / 7)
    # And a snapshot before any batch still says None, as Chainer's iterators do.
    fresh = {}
    manager.get_iterator().serialize(chainer.serializers.DictionarySerializer(fresh))
    resumed.serialize(chainer.serializers.NpzDeserializer(fresh))
    assert resumed.previous_epoch_detail is None


def _noise(manager, epochs=2):
    iterator = manager.get_iterator()
    batches = [iterator.next() for _ in range(epochs * len(manager))]
    iterator.finalize()
    return np.concatenate([batch['noise'] for batch in batches])


@pytest.mark.timeout(60)
def test_seeded_draws_are_the_same_with_and_without_workers():
    in_process = _noise(DataManager(Numbers(12), 4, transforms=add_noise, seed=7))
    workers = _noise(DataManager(Numbers(12), 4, transforms=add_noise, seed=7,
                                 n_process_augmentation=2))
    np.testing.assert_array_equal(in_process, workers)
    # Every batch of both epochs drew its own numbers.
    assert len(np.unique(in_process)) == len(in_process)


def test_seeded_draws_differ_between_seeds_and_repeat_for_one_seed():
    first = _noise(DataManager(Numbers(12), 4, transforms=add_noise, seed=1))
    again = _noise(DataManager(Numbers(12), 4, transforms=add_noise, seed=1))
    other = _noise(DataManager(Numbers(12), 4, transforms=add_noise, seed=2))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_seeded_draws_survive_a_mid_epoch_resume():
    manager = DataManager(Numbers(20), 3, transforms=add_noise, seed=3,
                          sampler_cls=RandomSampler, sampler_kwargs={'seed': 0})
    iterator = manager.get_iterator()
    for _ in range(9):
        iterator.next()
    state = {}
    iterator.serialize(chainer.serializers.DictionarySerializer(state))
    expected = [iterator.next()['noise'] for _ in range(5)]
    resumed = manager.get_iterator()
    resumed.serialize(chainer.serializers.NpzDeserializer(state))
    for want in expected:
        np.testing.assert_array_equal(resumed.next()['noise'], want)


def test_seeded_manager_leaves_the_global_random_state_alone():
    np.random.seed(5)
    expected = np.random.uniform(size=3)
    np.random.seed(5)
    list(DataManager(Numbers(6), 2, transforms=add_noise, seed=1))
    np.testing.assert_array_equal(np.random.uniform(size=3), expected)


def test_replace_keeps_the_seed():
    manager = DataManager(Numbers(6), 2, transforms=add_noise, seed=4)
    np.testing.assert_array_equal(_noise(manager.replace(batch_size=2)), _noise(manager))


def test_get_subset_keeps_the_settings():
    manager = DataManager(Numbers(10), 2, transforms=add_one).get_subset([9, 3])
    assert firsts(manager) == [[10, 4]]


def test_get_subset_works_on_a_plain_list_of_dicts():
    manager = DataManager([{'data': np.array([i])} for i in range(6)], 2).get_subset([5, 1])
    assert [list(b['data'][:, 0]) for b in manager] == [[5, 1]]


def test_batch_keys_are_the_keys_after_transforms():
    assert DataManager(Numbers(3), 2, transforms=add_pid).batch_keys() == ['data', 'label', 'pid']


# A refusal names the argument first and the value refused last.
@pytest.mark.parametrize('kwargs, error, message', [
    ({'batch_size': 0}, ValueError, '^batch_size .*, got 0$'),
    ({'batch_size': 2, 'n_process_augmentation': -1}, ValueError,
     '^n_process_augmentation .*, got -1$'),
    ({'batch_size': 2, 'sampler_cls': list}, TypeError, "^sampler_cls .*, got <class 'list'>$"),
    ({'batch_size': 2, 'transforms': 3}, TypeError, '^transforms .*, got 3$'),
    ({'batch_size': 20, 'drop_last': True}, ValueError, r'\b20\b.*\b10\b.* no batch'),
    ({'batch_size': 2, 'drop_last': 'no'}, TypeError, "^drop_last .*, got 'no'$"),
    ({'batch_size': True}, TypeError, '^batch_size .*, got True$'),
    ({'batch_size': 2, 'n_process_augmentation': 1.0}, TypeError,
     '^n_process_augmentation .*, got 1.0$'),
    ({'batch_size': 2, 'sampler_cls': SequentialSampler, 'sampler_kwargs': {'seed': 1}},
     TypeError, 'seed'),
    ({'batch_size': 2, 'seed': -1}, ValueError, '^seed .*, got -1$'),
    ({'batch_size': 2, 'seed': 2 ** 32}, ValueError, '^seed .*, got 4294967296$'),
    ({'batch_size': 2, 'seed': 1.5}, TypeError, '^seed .*, got 1.5$'),
    ({'batch_size': 2, 'seed': True}, TypeError, '^seed .*, got True$'),
    ({'batch_size': 2, 'sampler_kwargs': 5}, TypeError, '^sampler_kwargs must be a mapping'),
    ({'batch_size': 2, 'sampler_kwargs': [('seed', 1)]}, TypeError,
     '^sampler_kwargs must be a mapping'),
    ({'batch_size': 2, 'sampler_kwargs': {'shuffle': True}}, TypeError,
     r"^sampler_kwargs \{'shuffle': True\} are not arguments of SequentialSampler: .*'shuffle'$"),
    # ... and the values the sampler itself refuses, at once too.
    ({'batch_size': 2, 'sampler_cls': RandomSampler, 'sampler_kwargs': {'seed': -1}}, ValueError,
     '^seed .*, got -1$'),
])
def test_bad_arguments_are_refused_at_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        DataManager(Numbers(10), **kwargs)


def test_drop_last_with_exactly_one_batch_of_examples_gives_that_batch():
    manager = DataManager(Numbers(4), 4, drop_last=True)
    assert len(manager) == 1
    assert firsts(manager) == [[0, 1, 2, 3]]


def test_empty_dataset_is_refused():
    with pytest.raises(ValueError, match='empty'):
        DataManager([], 2)


def test_delira_positional_order_data_batch_size_workers_transforms_sampler():
    # BaseDataManager(data, batch_size, n_process_augmentation, transforms, sampler_cls,
    # sampler_kwargs), as Delira 0.4.1 orders them.
    manager = DataManager(Numbers(7), 3, 0, add_one, RandomSampler, {'seed': 5})
    assert (manager.batch_size, manager.n_process_augmentation) == (3, 0)
    assert (manager.transforms, manager.sampler_cls) == (add_one, RandomSampler)
    assert manager.sampler_kwargs == {'seed': 5}
    seen = sorted(int(x) for batch in manager for x in batch['data'][:, 0])
    assert seen == list(range(1, 8))  # every example once, through add_one


def test_delira_call_with_workers_and_no_transforms_positionally():
    manager = DataManager(Numbers(6), 4, 2, None)
    assert manager.n_process_augmentation == 2
    assert firsts(manager) == [[0, 1, 2, 3], [4, 5]]


def test_base_data_manager_is_data_manager():
    from researchutils.chainer.data_loading import BaseDataManager
    assert BaseDataManager is DataManager


def test_data_and_dataset_keywords_both_name_the_examples():
    assert firsts(DataManager(data=Numbers(3), batch_size=2)) == [[0, 1], [2]]
    assert firsts(DataManager(dataset=Numbers(3), batch_size=2)) == [[0, 1], [2]]
    with pytest.raises(TypeError, match='data'):
        DataManager(Numbers(3), 2, data=Numbers(3))


def test_a_path_as_data_is_refused_with_what_to_pass():
    # Delira loaded a folder given as a str with load_fn; here data is a dataset.
    with pytest.raises(TypeError, match='AbstractDataset') as raised:
        DataManager('/data/train', 2)
    assert "'/data/train'" in str(raised.value)


class _LengthOnly(object):
    def __len__(self):
        return 4


class _IndexingOnly(object):
    def __getitem__(self, index):
        return {'data': np.float32(index)}


@pytest.mark.parametrize('data', [_LengthOnly(), _IndexingOnly()])
def test_data_without_len_or_indexing_is_refused_naming_its_type(data):
    with pytest.raises(TypeError, match='len.. and indexing') as raised:
        DataManager(data, 2)
    assert type(data).__name__ in str(raised.value)


def test_without_n_process_augmentation_batches_are_made_in_this_process():
    import multiprocessing
    manager = DataManager(Numbers(4), 2)
    assert manager.n_process_augmentation == 0
    before = set(multiprocessing.active_children())
    iterator = manager.get_iterator()
    try:
        assert firsts([iterator.next()]) == [[0, 1]]
        assert not _new_workers(before)
    finally:
        iterator.finalize()


def test_missing_batch_size_is_refused():
    with pytest.raises(TypeError, match='batch_size'):
        DataManager(Numbers(3))


def test_replace_keeps_every_other_setting():
    manager = DataManager(Numbers(9), 2, 0, add_one, RandomSampler, {'seed': 3},
                          drop_last=True, seed=8)
    replaced = manager.replace(batch_size=4)
    assert replaced.batch_size == 4
    assert (replaced.dataset, replaced.n_process_augmentation, replaced.transforms) == (
        manager.dataset, 0, add_one)
    assert (replaced.sampler_cls, replaced.sampler_kwargs) == (RandomSampler, {'seed': 3})
    assert (replaced.drop_last, replaced.seed) == (True, 8)


def test_replace_refuses_an_unknown_setting_naming_it():
    with pytest.raises(TypeError, match='batchsize'):
        DataManager(Numbers(4), 2).replace(batchsize=4)


def _pids(batches):
    return {int(pid) for batch in batches for pid in batch['pid']}


@pytest.mark.timeout(120)
def test_an_iterator_starts_its_workers_once_for_all_epochs():
    manager = DataManager(Numbers(8), 2, transforms=add_pid, n_process_augmentation=2)
    iterator = manager.get_iterator()
    try:
        batches = [iterator.next() for _ in range(3 * len(manager))]
    finally:
        iterator.finalize()
    assert iterator.epoch == 3
    assert len(_pids(batches)) == 2


@pytest.mark.timeout(120)
def test_passes_over_a_manager_reuse_its_workers():
    manager = DataManager(Numbers(8), 2, transforms=add_pid, n_process_augmentation=2)
    try:
        passes = [list(manager) for _ in range(3)]
    finally:
        manager.finalize()
    assert [len(batches) for batches in passes] == [4, 4, 4]
    assert len(_pids(batch for batches in passes for batch in batches)) == 2


@pytest.mark.timeout(120)
def test_training_and_validation_passes_start_two_workers_each():
    # Three epochs of training plus a validation pass after each, as an experiment runs them.
    train = DataManager(Numbers(8), 2, transforms=add_pid, n_process_augmentation=2)
    val = DataManager(Numbers(6), 2, transforms=add_pid, n_process_augmentation=2)
    iterator = train.get_iterator()
    train_batches, val_batches = [], []
    try:
        for _ in range(3):
            train_batches += [iterator.next() for _ in range(len(train))]
            val_batches += list(val)
    finally:
        iterator.finalize()
        val.finalize()
    assert len(_pids(train_batches)) == 2
    assert len(_pids(val_batches)) == 2
    assert not _pids(train_batches) & _pids(val_batches)


@pytest.mark.timeout(60)
def test_finalize_leaves_no_worker_process():
    import multiprocessing
    # Children of earlier tests that the garbage collector has not finalized yet (Python
    # 3.13 keeps some a while longer) are not this manager's.
    before = set(multiprocessing.active_children())
    manager = DataManager(Numbers(8), 2, transforms=add_one, n_process_augmentation=2)
    iterator = manager.get_iterator()
    iterator.next()
    list(manager)
    assert len(set(multiprocessing.active_children()) - before) == 4   # two pools of two
    iterator.finalize()
    manager.finalize()
    assert set(multiprocessing.active_children()) - before == set()


def _new_workers(before):
    """Worker processes started since ``before`` (earlier tests' may await the collector)."""
    import multiprocessing
    return sorted(set(multiprocessing.active_children()) - before, key=lambda p: p.pid)


def _signal_from_another_process(pid, signal_number):
    """Sends ``signal_number`` to ``pid`` from a ``kill`` process, as a cluster would."""
    import subprocess
    subprocess.run(['kill', '-s', signal.Signals(signal_number).name[3:], str(pid)],
                   check=True, timeout=60)


@pytest.mark.timeout(120)
@pytest.mark.parametrize('start_method', START_METHODS)
def test_sigusr1_and_sigterm_sent_to_the_workers_are_left_to_the_main_process(start_method):
    # SLURM's warning before the time limit, and scancel, reach every process of the job:
    # the workers go on making batches, and the main process alone decides when they end.
    import multiprocessing
    before = set(multiprocessing.active_children())
    manager = DataManager(Numbers(16), 2, transforms=add_one, n_process_augmentation=2)
    with using_start_method(start_method):
        iterator = manager.get_iterator()
        try:
            got = [iterator.next()]
            workers = _new_workers(before)
            assert len(workers) == 2
            for worker in workers:
                for number in (signal.SIGUSR1, signal.SIGTERM):
                    _signal_from_another_process(worker.pid, number)
                # Taken by the worker, which still runs.
                wait_until_taken(worker.pid, (signal.SIGUSR1, signal.SIGTERM), 60)
            got += [iterator.next() for _ in range(2 * len(manager) - 1)]
            assert all(worker.exitcode is None for worker in workers)
        finally:
            iterator.finalize()
    assert firsts(got) == [[i + 1, i + 2] for i in range(0, 16, 2)] * 2
    assert _new_workers(before) == []


@pytest.mark.timeout(120)
def test_finalize_ends_forked_workers_at_once_despite_a_handler_of_the_main_process():
    # PreemptionSnapshot's SIGTERM handler only sets a flag; a worker forked with it kept
    # running on SIGTERM, and finalize() waited, then killed it.
    import multiprocessing
    before = set(multiprocessing.active_children())
    previous = signal.signal(signal.SIGTERM, lambda number, frame: None)
    try:
        manager = DataManager(Numbers(8), 2, transforms=add_one, n_process_augmentation=2)
        with using_start_method('fork'):
            iterator = manager.get_iterator()
            iterator.next()
            workers = _new_workers(before)
            iterator.finalize()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [worker.exitcode for worker in workers] == [-signal.SIGKILL] * 2


@pytest.mark.timeout(60)
def test_breaking_out_of_a_pass_starts_the_next_pass_at_the_first_batch():
    manager = DataManager(Numbers(8), 2, transforms=add_one, n_process_augmentation=2)
    try:
        for _ in manager:
            break
        assert firsts(manager) == [[1, 2], [3, 4], [5, 6], [7, 8]]
    finally:
        manager.finalize()


@pytest.mark.timeout(60)
def test_a_nested_pass_over_the_same_manager_gets_its_own_batches():
    manager = DataManager(Numbers(4), 2, n_process_augmentation=2)
    try:
        pairs = [(firsts([outer]), firsts(manager)) for outer in manager]
    finally:
        manager.finalize()
    assert pairs == [([[0, 1]], [[0, 1], [2, 3]]), ([[2, 3]], [[0, 1], [2, 3]])]


@pytest.mark.timeout(120)
@pytest.mark.parametrize('start_method', PICKLING_START_METHODS)
def test_workers_of_the_pickling_start_methods_give_the_in_process_batches(start_method):
    manager = DataManager(Numbers(12), 4, transforms=add_one, n_process_augmentation=2)
    with using_start_method(start_method):
        iterator = manager.get_iterator()
        try:
            got = firsts(iterator.next() for _ in range(2 * len(manager)))
        finally:
            iterator.finalize()
    assert got == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]] * 2


@pytest.mark.timeout(120)
@pytest.mark.parametrize('start_method', START_METHODS)
def test_a_training_step_longer_than_a_second_keeps_the_workers(start_method):
    # The workers idle through the step with every batch ahead made, longer than
    # they wait between two checks that the main process lives.
    manager = DataManager(Numbers(8), 2, transforms=add_one, n_process_augmentation=2)
    with using_start_method(start_method):
        iterator = manager.get_iterator()
        try:
            got = []
            for _ in range(len(manager)):
                got.append(iterator.next())
                time.sleep(1.6)
        finally:
            iterator.finalize()
    assert firsts(got) == [[1, 2], [3, 4], [5, 6], [7, 8]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize('start_method', PICKLING_START_METHODS)
def test_a_transform_that_cannot_be_pickled_is_refused_naming_it(start_method):
    with using_start_method(start_method):
        manager = DataManager(Numbers(4), 2, transforms=lambda batch: batch,
                              n_process_augmentation=2)
        with pytest.raises(TypeError, match=r'\btransforms\b'):
            manager.get_iterator()


@pytest.mark.timeout(60)
def test_each_pass_over_a_manager_with_workers_draws_a_new_unseeded_order():
    # As without workers, where every pass builds a new RandomSampler.
    def two_passes(manager):
        np.random.seed(4)
        try:
            return firsts(manager), firsts(manager)
        finally:
            manager.finalize()

    expected = two_passes(DataManager(Numbers(12), 4, sampler_cls=RandomSampler))
    assert expected[0] != expected[1]
    assert two_passes(DataManager(Numbers(12), 4, sampler_cls=RandomSampler,
                                  n_process_augmentation=2)) == expected


class CountsPickling(Numbers):
    """Numbers that count how often the main process pickles them."""

    pickled = 0

    def __getstate__(self):
        type(self).pickled += 1
        return self.__dict__


@pytest.mark.timeout(120)
@pytest.mark.parametrize('start_method', PICKLING_START_METHODS)
def test_the_dataset_is_sent_to_each_worker_once_for_all_epochs(start_method):
    CountsPickling.pickled = 0
    with using_start_method(start_method):
        manager = DataManager(CountsPickling(8), 2, n_process_augmentation=2)
        iterator = manager.get_iterator()
        try:
            for _ in range(3 * len(manager)):
                iterator.next()
        finally:
            iterator.finalize()
    # Once to check at get_iterator() that it can be sent, then once per worker.
    assert CountsPickling.pickled == 1 + 2


@pytest.mark.timeout(60)
def test_a_copy_of_a_manager_iterates_with_workers_of_its_own():
    import copy
    import pickle
    manager = DataManager(Numbers(4), 2, transforms=add_pid, n_process_augmentation=2)
    try:
        original = _pids(manager)
        copied = copy.copy(manager)
        unpickled = pickle.loads(pickle.dumps(manager))
        try:
            assert not _pids(copied) & original
            assert not _pids(unpickled) & original
        finally:
            copied.finalize()
            unpickled.finalize()
    finally:
        manager.finalize()


def test_epoch_plan_slices_the_samplers_order_into_the_managers_batches():
    manager = DataManager(Numbers(7), 3)
    order = _order(6, 2, 7)
    plan = manager.epoch_plan(RandomSampler(range(7), seed=6), 2)
    assert len(plan) == len(manager) == 3
    assert [list(batch) for batch in plan] == [order[0:3], order[3:6], order[6:7]]
    assert [list(batch) for batch in plan[1:]] == [order[3:6], order[6:7]]
    assert list(plan[2]) == order[6:7]


def test_epoch_plan_with_drop_last_has_no_short_batch():
    plan = DataManager(Numbers(7), 3, drop_last=True).epoch_plan(SequentialSampler(range(7)), 0)
    assert [list(batch) for batch in plan] == [[0, 1, 2], [3, 4, 5]]
    assert [list(batch) for batch in plan[::-1]] == [[3, 4, 5], [0, 1, 2]]


@pytest.mark.parametrize('index', [-1, 3, 4])
def test_epoch_plan_refuses_a_batch_outside_the_epoch_naming_it_and_the_epochs_length(index):
    plan = DataManager(Numbers(7), 3).epoch_plan(SequentialSampler(range(7)), 0)
    with pytest.raises(IndexError, match=r'{}\D+3'.format(index)):
        plan[index]


class OwnSubsets(Numbers):
    """Numbers whose get_subset gives a dataset of its own kind (say, one loaded at once)."""

    def get_subset(self, indices):
        return OwnSubsets(len(indices))


def test_get_subset_uses_the_datasets_own_get_subset():
    manager = DataManager(OwnSubsets(10), 2).get_subset([9, 3, 4])
    assert isinstance(manager.dataset, OwnSubsets)
    assert firsts(manager) == [[0, 1], [2]]


def test_replace_data_gives_a_manager_over_the_new_examples():
    manager = DataManager(Numbers(9), 2, transforms=add_one)
    replaced = manager.replace(data=Numbers(3))
    assert firsts(replaced) == [[1, 2], [3]]
    assert replaced.transforms is add_one


def test_replace_refuses_every_unknown_setting_naming_each():
    with pytest.raises(TypeError, match=r"replace.*\['batchsize', 'seeed'\]"):
        DataManager(Numbers(4), 2).replace(seeed=1, batchsize=4)


@pytest.mark.timeout(120)
def test_a_copy_made_during_a_pass_keeps_its_workers_across_its_own_passes():
    import copy
    import pickle
    manager = DataManager(Numbers(4), 2, transforms=add_pid, n_process_augmentation=2)
    copies = []
    try:
        for _ in manager:
            copies = [copy.copy(manager), pickle.loads(pickle.dumps(manager))]
            break
        for copied in copies:
            # Which of the two workers builds a batch is a race, so a pass may see one or
            # both; workers made anew for each pass would show as more than two.
            seen = set().union(*(_pids(copied) for _ in range(3)))
            assert 1 <= len(seen) <= 2 and os.getpid() not in seen, seen
    finally:
        for copied in copies:
            copied.finalize()
        manager.finalize()


def _notes(error):
    return '\n'.join(getattr(error, '__notes__', []))


def test_examples_with_other_keys_are_refused_naming_both_examples_and_their_keys():
    data = [{'data': np.zeros(1), 'label': 0}] * 3 + [{'data': np.zeros(1)}]
    with pytest.raises(KeyError) as info:
        list(DataManager(data, 2))
    message = str(info.value)
    assert 'dataset[3]' in message and 'dataset[2]' in message
    assert "['data']" in message and "['data', 'label']" in message


def test_examples_that_cannot_be_stacked_keep_the_error_and_name_the_key_and_indices():
    data = [{'label': 0, 'data': np.zeros(2)}] * 3 + [{'label': 0, 'data': np.zeros(3)}]
    with pytest.raises(ValueError) as info:
        list(DataManager(data, 2))
    assert "'data'" in _notes(info.value) and '[2, 3]' in _notes(info.value)


def test_a_failing_transform_keeps_its_error_and_names_the_batchs_indices():
    with pytest.raises(ZeroDivisionError, match='transform failed') as info:
        list(DataManager(Numbers(4), 2, transforms=failing_transform))
    assert 'transforms' in _notes(info.value) and '[0, 1]' in _notes(info.value)


def test_a_failing_dataset_note_names_the_failing_index_only():
    with pytest.raises(ArithmeticError) as info:
        list(DataManager(FailsAt(8), 2))
    assert 'dataset[5]' in _notes(info.value) and 'dataset[4]' not in _notes(info.value)


def returns_a_list(batch):
    return [batch]


def test_a_transform_returning_no_dict_is_refused_naming_what_it_returned():
    with pytest.raises(TypeError, match='transforms.*list'):
        list(DataManager(Numbers(4), 2, transforms=returns_a_list))


def with_a_function(batch):
    return dict(batch, function=lambda: 0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize('sampler_cls, sampler_kwargs, first', [
    (SequentialSampler, {}, [0, 1]),
    # An order array: its indices are NumPy integers, named as plain ones.
    (RandomSampler, {'seed': 1}, _order(1, 0, 4)[:2]),
])
def test_a_batch_that_cannot_be_sent_back_from_a_worker_names_its_indices(
        sampler_cls, sampler_kwargs, first):
    manager = DataManager(Numbers(4), 2, 1, with_a_function, sampler_cls, sampler_kwargs)
    with using_start_method('fork'), pytest.raises(Exception) as info:
        list(manager)
    assert 'dataset indices {}'.format(first) in _notes(info.value)


class Unpicklable(Numbers):
    def __reduce__(self):
        raise TypeError('no pickling of this dataset')


@pytest.mark.timeout(60)
@pytest.mark.parametrize('start_method', PICKLING_START_METHODS)
def test_a_dataset_that_cannot_be_pickled_is_refused_naming_the_dataset(start_method):
    with using_start_method(start_method):
        manager = DataManager(Unpicklable(4), 2, transforms=add_one, n_process_augmentation=2)
        with pytest.raises(TypeError, match='DataManager: dataset cannot be pickled'):
            manager.get_iterator()


def test_batch_keys_of_a_seeded_manager_are_the_keys_after_transforms():
    manager = DataManager(Numbers(3), 2, transforms=add_noise, seed=5)
    assert manager.batch_keys() == ['data', 'label', 'noise']


def _take_flag(path):
    """True for the one process that removes ``path``: the flagged event happens once."""
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True


class FailsOnceAt4(object):
    """A transform that fails (or, with ``exit``, ends its process) once, on the batch
    starting at example 4, while ``flag`` exists."""

    def __init__(self, flag, exit=False):
        self.flag, self.exit = str(flag), exit

    def __call__(self, batch):
        if batch['data'][0, 0] == 4 and _take_flag(self.flag):
            if self.exit:
                os._exit(1)
            raise ValueError('flaky')
        return batch


@pytest.mark.timeout(120)
@pytest.mark.parametrize('exit', [False, True])
def test_with_workers_the_call_after_a_failed_batch_gives_that_batch(tmp_path, exit):
    # An exception in a transform travels with its batch: the call for that batch (the
    # third) raises it. A worker that exits loses whatever it held, which the pool cannot
    # tell apart, so the death is reported by the call that sees it: the first, second or
    # third, as the workers race. Either way the failed call leaves the position where it
    # was, and the calls after it give every batch once, in order.
    flag = tmp_path / 'fail'
    flag.touch()
    manager = DataManager(Numbers(8), 2, transforms=FailsOnceAt4(flag, exit),
                          n_process_augmentation=2)
    iterator = manager.get_iterator()
    expected = RuntimeError if exit else ValueError
    got, failed_at = [], []
    try:
        while len(got) < 8 and len(failed_at) < 2:
            before = iterator.epoch_detail
            try:
                got += firsts([iterator.next()])
            except expected as error:
                assert ('exited with code 1' in str(error)) if exit else str(error) == 'flaky'
                assert iterator.epoch_detail == before
                failed_at.append(before)
    finally:
        iterator.finalize()
    assert got == [[0, 1], [2, 3], [4, 5], [6, 7]] * 2
    if exit:
        assert len(failed_at) == 1 and failed_at[0] in (0, 0.25, 0.5)
    else:
        assert failed_at == [0.5]


class WaitsForFile(object):
    """A transform that waits (at most 60 s) until ``path`` exists."""

    def __init__(self, path):
        self.path = str(path)

    def __call__(self, batch):
        deadline = time.monotonic() + 60
        while not os.path.exists(self.path) and time.monotonic() < deadline:
            time.sleep(0.01)
        return batch


@pytest.mark.timeout(120)
def test_a_slow_batch_warns_with_chainers_timeout_warning_then_arrives(tmp_path, monkeypatch):
    import threading
    import warnings

    from chainer.iterators import MultiprocessIterator

    from researchutils.chainer.data_loading import _batch_iterator
    monkeypatch.setattr(_batch_iterator, '_DATASET_TIMEOUT_S', 0.2)
    release = tmp_path / 'release'
    manager = DataManager(Numbers(4), 2, transforms=WaitsForFile(release),
                          n_process_augmentation=1)
    iterator = manager.get_iterator()

    def timeouts(caught):
        return [w for w in caught if issubclass(w.category, MultiprocessIterator.TimeoutWarning)]

    def release_after_a_warning(caught):
        # The main thread is inside next() until the batch arrives.
        deadline = time.monotonic() + 60
        while not timeouts(caught) and time.monotonic() < deadline:
            time.sleep(0.01)
        release.touch()

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            helper = threading.Thread(target=release_after_a_warning, args=(caught,))
            helper.start()
            batch = iterator.next()
            helper.join()
    finally:
        iterator.finalize()
    assert firsts([batch]) == [[0, 1]]
    assert timeouts(caught)
    # It names the iterator and how long the batch has taken.
    assert 'DataManager' in str(timeouts(caught)[0].message)
    assert '0.2 s' in str(timeouts(caught)[0].message)


def test_epoch_detail_with_drop_last_counts_the_full_batches():
    iterator = DataManager(Numbers(7), 3, drop_last=True).get_iterator()
    details = []
    for _ in range(3):
        iterator.next()
        details.append((iterator.epoch, iterator.is_new_epoch, iterator.epoch_detail))
    assert details == [(0, False, 0.5), (1, True, 1.0), (1, False, 1.5)]


def test_a_snapshot_holds_chainers_iterator_keys_and_the_samplers_seed():
    iterator = _random_order(seed=4).get_iterator()
    iterator.next()
    state = {}
    iterator.serialize(chainer.serializers.DictionarySerializer(state))
    assert sorted(state) == ['current_position', 'epoch', 'is_new_epoch',
                             'previous_epoch_detail', 'sampler/seed']
    assert (int(state['current_position']), int(state['epoch'])) == (3, 0)
    assert (bool(state['is_new_epoch']), float(state['previous_epoch_detail'])) == (False, 0.0)
    assert int(state['sampler/seed']) == 4


def test_a_snapshot_of_chainers_serial_iterator_resumes_where_it_stopped():
    # Chainer's iterators and ours share their keys: a Trainer snapshot written with a
    # SerialIterator resumes under a DataManager (the order Chainer also keeps is unused).
    serial = chainer.iterators.SerialIterator(list(range(10)), 4, shuffle=False)
    for _ in range(4):
        serial.next()
    state = {}
    serial.serialize(chainer.serializers.DictionarySerializer(state))
    iterator = DataManager(Numbers(10), 4).get_iterator()
    iterator.serialize(chainer.serializers.NpzDeserializer(state))
    assert (iterator.epoch, iterator.is_new_epoch) == (1, False)
    assert iterator.previous_epoch_detail == pytest.approx(serial.previous_epoch_detail)
    # Chainer's batches ran across the epoch's end: [8, 9, 0, 1], then [2, 3, 4, 5].
    assert firsts([iterator.next()]) == [[6, 7, 8, 9]]
    assert iterator.is_new_epoch and iterator.epoch == 2


def test_a_snapshot_at_the_start_of_an_epoch_resumes_there():
    state, before = _stopped_after(8, 5)
    iterator = _resumed(state, 8)
    assert (iterator.epoch, iterator.current_position, iterator.is_new_epoch) == (1, 0, True)
    assert iterator.previous_epoch_detail == pytest.approx(0.8)
    assert firsts([iterator.next()]) == [_order(2, 1, 40)[:8]]


def test_a_snapshot_of_a_position_just_past_the_dataset_is_refused():
    state, _ = _stopped_after(8, 2)
    with pytest.raises(ValueError, match='current_position 16 outside 0..15'):
        _resumed(state, 8, size=16)


def test_a_fresh_snapshot_has_the_values_chainers_iterators_write():
    # -1 stands for "no previous epoch detail" in Chainer's snapshots.
    ours, chainers = {}, {}
    DataManager(Numbers(10), 4).get_iterator().serialize(
        chainer.serializers.DictionarySerializer(ours))
    chainer.iterators.SerialIterator(list(range(10)), 4, shuffle=False).serialize(
        chainer.serializers.DictionarySerializer(chainers))
    shared = ['current_position', 'epoch', 'is_new_epoch', 'previous_epoch_detail']
    assert {key: float(ours[key]) for key in shared} == {
        key: float(chainers[key]) for key in shared}


def test_the_source_a_worker_is_sent_makes_the_managers_batches():
    # What each worker process runs (the source protocol of researchutils._process_pool),
    # run here, where it can be watched.
    from researchutils.chainer.data_loading._batches import BatchSource
    seeded = DataManager(Numbers(6), 2, transforms=add_noise, seed=3)
    made = BatchSource(Numbers(6), add_noise, 3).make([[4, 5], [0, 1]], [(0, 2), (0, 0)])
    expected = list(seeded)
    for batch, want in zip(made, [expected[2], expected[0]]):
        assert batch.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(batch[key], want[key])
    unseeded = BatchSource(Numbers(6), add_one, None).make([[3, 1]], None)
    assert firsts(unseeded) == [[4, 2]]
    assert '[4, 5]' in BatchSource.describe(np.array([4, 5]))


def test_the_worker_processes_are_named_for_the_data_manager():
    import multiprocessing
    before = set(multiprocessing.active_children())
    iterator = DataManager(Numbers(8), 2, n_process_augmentation=2).get_iterator()
    try:
        iterator.next()
        assert {child.name for child in _new_workers(before)} == {'DataManager-0',
                                                                  'DataManager-1'}
    finally:
        iterator.finalize()


class CountsOrders(SequentialSampler):
    """Counts, by epoch, how often the iterator asks for an epoch's order (this process)."""

    asked = []

    def epoch_order(self, epoch):
        CountsOrders.asked.append(epoch)
        return super(CountsOrders, self).epoch_order(epoch)


@pytest.mark.parametrize('n_processes', [0, 2])
def test_an_epochs_order_is_asked_of_the_sampler_once(n_processes):
    # A sampler's order may be costly (a permutation of the whole dataset): once an epoch,
    # not once a batch.
    CountsOrders.asked = []
    iterator = DataManager(Numbers(12), 2, n_process_augmentation=n_processes,
                           sampler_cls=CountsOrders).get_iterator()
    try:
        batches = [iterator.next()['data'][:, 0].tolist() for _ in range(12)]
    finally:
        iterator.finalize()
    assert batches == [[i, i + 1] for i in range(0, 12, 2)] * 2
    # The third epoch's, at most, for the batches made ahead.
    assert CountsOrders.asked[:2] == [0, 1] and set(CountsOrders.asked) <= {0, 1, 2}
    assert len(CountsOrders.asked) == len(set(CountsOrders.asked))


@pytest.mark.parametrize('repeat', [True, False])
def test_the_workers_make_two_batches_each_ahead_across_the_epochs_end_if_it_repeats(repeat):
    iterator = DataManager(Numbers(8), 2, n_process_augmentation=2).get_iterator(repeat=repeat)
    try:
        # (epoch, position) of the batches in the making, after each batch of the epoch.
        ahead = []
        for _ in range(4):
            iterator.next()
            ahead.append([spot[:2] for spot in iterator._planned])
    finally:
        iterator.finalize()
    if repeat:  # 2 workers: 4 batches, the one just collected among them
        assert ahead == [[(0, 2), (0, 4), (0, 6)], [(0, 4), (0, 6), (1, 0)],
                         [(0, 6), (1, 0), (1, 2)], [(1, 0), (1, 2), (1, 4)]]
    else:  # nothing beyond the only epoch
        assert ahead == [[(0, 2), (0, 4), (0, 6)], [(0, 4), (0, 6)], [(0, 6)], []]
