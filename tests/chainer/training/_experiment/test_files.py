"""The files of an experiment's folder: which snapshot it resumes from, which model it returns."""
import os
import stat
import threading

import numpy as np
import pytest

from researchutils.chainer.training._experiment import files
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment


def test_resume_loads_the_newest_snapshot_and_trains_only_the_missing_epochs(tmp_path):
    train, val = tasks.make_managers(n_train=64, batch_size=32)  # 2 iterations per epoch
    # Both runs have the counter: a resumed Trainer finds every extension's state in the
    # snapshot (Chainer warns about a trigger whose state is missing).
    first = experiment(tmp_path, tasks.make_params(num_epochs=4),
                       extensions=[tasks.CountUpdates()])
    first.run(train, val)
    snapshots = sorted(n for n in os.listdir(first.output_dir) if n.startswith('snapshot'))
    assert snapshots == ['snapshot_epoch_3', 'snapshot_epoch_4']  # two kept
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    counter = tasks.CountUpdates()
    experiment(tmp_path, tasks.make_params(num_epochs=6), extensions=[counter]).run(train, val)
    assert counter.first_epoch == 4
    assert counter.updates == 2 * 2


@pytest.mark.parametrize('umask', [0o022, 0o077])
def test_every_file_the_experiment_writes_follows_the_umask(tmp_path, umask):
    params = tasks.make_params(num_epochs=1, variable={'model': {'num_hidden': [4]}})
    exp = experiment(tmp_path, params, val_score_key='MSE')
    previous = os.umask(umask)
    try:
        exp.save()
        exp.grid_search(*tasks.make_managers(n_train=64))
    finally:
        os.umask(previous)
    names = ['experiment.json', 'grid_search.json', 'grid_0/run_state.json',
             'grid_0/best_model.npz', 'grid_0/final_model.npz', 'grid_0/snapshot_epoch_1']
    modes = {name: stat.S_IMODE(os.stat(os.path.join(exp.output_dir, name)).st_mode)
             for name in names}
    assert modes == {name: 0o666 & ~umask for name in names}


def test_latest_snapshot_is_the_highest_epoch_by_number_not_by_name(tmp_path):
    for name in ('snapshot_epoch_9', 'snapshot_epoch_10', 'snapshot_epoch_2.tmp', 'log'):
        (tmp_path / name).write_bytes(b'')
    assert files.latest_snapshot(str(tmp_path)) == str(tmp_path / 'snapshot_epoch_10')


def test_latest_snapshot_of_a_missing_or_empty_folder_is_none(tmp_path):
    assert files.latest_snapshot(str(tmp_path / 'missing')) is None
    assert files.latest_snapshot(str(tmp_path)) is None


@pytest.mark.parametrize('val_score_key, missing', [('MSE', 'best_model.npz'),
                                                     (None, 'final_model.npz')])
def test_a_finished_run_whose_models_are_gone_refuses_naming_the_model_file(
        tmp_path, val_score_key, missing):
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    first = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key=val_score_key)
    first.run(train, val)
    for name in ('best_model.npz', 'final_model.npz'):
        if os.path.exists(os.path.join(first.output_dir, name)):
            os.remove(os.path.join(first.output_dir, name))
    again = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key=val_score_key)
    with pytest.raises(FileNotFoundError, match=r'run_state.json says the run finished at '
                                                r'epoch 1, but its model .*{}'.format(missing)):
        again.run(train, val)
    # As the message says: without the state file the run rebuilds its final model.
    os.remove(os.path.join(first.output_dir, 'run_state.json'))
    rebuilt = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key=val_score_key)
    rebuilt_model = rebuilt.run(train, val)
    assert os.path.isfile(os.path.join(first.output_dir, 'final_model.npz'))
    assert tasks.val_mse(rebuilt, rebuilt_model, val) < tasks.val_mse(
        rebuilt, rebuilt.build_model(), val)


def test_a_symlink_named_like_the_model_is_not_taken_as_the_model(tmp_path):
    # A finished run whose best_model.npz was replaced by a link to other weights (an
    # untrained model here): the link is refused, never loaded as the run's result.
    from researchutils.chainer import serializers
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    first = experiment(tmp_path / 'runs', tasks.make_params(num_epochs=1), val_score_key='MSE')
    first.run(train, val)
    other = str(tmp_path / 'other.npz')
    serializers.save_model(other, first.build_model())
    best = os.path.join(first.output_dir, 'best_model.npz')
    os.remove(best)
    os.symlink(other, best)
    again = experiment(tmp_path / 'runs', tasks.make_params(num_epochs=1), val_score_key='MSE')
    with pytest.raises(FileNotFoundError, match=r'its model .*best_model.npz is missing or not '
                                                r'a regular file'):
        again.run(train, val)


class _ThreadRank:
    """One of the ranks of a ChainerMN run played by threads of this process: allgather
    waits for every rank's value, as MPI's does. The real ranks run the same table in
    test_experiment_preemption_mpi.py, under mpiexec."""

    def __init__(self, rank, values, barrier):
        self.rank, self.size, self.mpi_comm = rank, len(values), self
        self._values, self._barrier = values, barrier

    def allgather(self, value):
        self._values[self.rank] = value
        self._barrier.wait(timeout=60)
        gathered = list(self._values)
        self._barrier.wait(timeout=60)
        return gathered


def _resumed_by_each_rank(folder, n_ranks=2):
    values, barrier, chosen = [None] * n_ranks, threading.Barrier(n_ranks), [None] * n_ranks

    def resume(rank):
        path = files.resume_snapshot(folder, _ThreadRank(rank, values, barrier))
        chosen[rank] = None if path is None else os.path.basename(path)

    threads = [threading.Thread(target=resume, args=(rank,)) for rank in range(n_ranks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return chosen


@pytest.mark.parametrize('names, chosen', [
    # Of the same epoch as the shared snapshot: each rank's own (its iterator position).
    (['snapshot_epoch_2', 'snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1'],
     ['snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1']),
    (['snapshot_epoch_1', 'snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1'],
     ['snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1']),
    # Older than the shared one: the shared one, on every rank.
    (['snapshot_epoch_3', 'snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1'],
     ['snapshot_epoch_3', 'snapshot_epoch_3']),
    # A rank's own is missing, or the ranks' differ: the shared one.
    (['snapshot_epoch_2', 'snapshot_epoch_2_rank0'], ['snapshot_epoch_2', 'snapshot_epoch_2']),
    (['snapshot_epoch_1', 'snapshot_epoch_2_rank0', 'snapshot_epoch_1_rank1'],
     ['snapshot_epoch_1', 'snapshot_epoch_1']),
    ([], [None, None]),
])
def test_under_chainermn_each_rank_resumes_from_its_own_snapshot_when_every_rank_has_one(
        tmp_path, names, chosen):
    for name in names:
        (tmp_path / name).write_bytes(b'')
    assert _resumed_by_each_rank(str(tmp_path)) == chosen


@pytest.mark.parametrize('names, chosen', [
    (['snapshot_epoch_2', 'snapshot_epoch_2_rank0'], ['snapshot_epoch_2_rank0']),
    (['snapshot_epoch_3', 'snapshot_epoch_2_rank0'], ['snapshot_epoch_3']),
    (['snapshot_epoch_1_rank0'], ['snapshot_epoch_1_rank0']),
])
def test_a_chainermn_run_of_one_rank_resumes_from_its_own_snapshot(tmp_path, names, chosen):
    for name in names:
        (tmp_path / name).write_bytes(b'')
    assert _resumed_by_each_rank(str(tmp_path), n_ranks=1) == chosen


@pytest.mark.parametrize('snapshot', [True, False])
def test_the_refusal_of_a_finished_run_without_its_model_says_how_to_train_again(
        tmp_path, snapshot):
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    first = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key='MSE')
    first.run(train, val)
    os.remove(os.path.join(first.output_dir, 'best_model.npz'))
    if not snapshot:
        os.remove(os.path.join(first.output_dir, 'snapshot_epoch_1'))
    again = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key='MSE')
    with pytest.raises(FileNotFoundError) as caught:
        again.run(train, val)
    message = str(caught.value)
    # The missing model and the state file to delete, by their paths; where a new run starts.
    assert os.path.join(first.output_dir, 'best_model.npz') in message
    assert os.path.join(first.output_dir, 'run_state.json') in message
    if snapshot:
        assert os.path.join(first.output_dir, 'snapshot_epoch_1') in message
    else:
        assert 'no snapshot' in message and 'snapshot_epoch' not in message


def test_a_scored_run_returns_its_best_model_then_and_when_run_again(tmp_path):
    # The validation score is best after the first of two epochs: the best model is the
    # first epoch's, not the final one.
    from researchutils.chainer import serializers
    train, val = tasks.make_managers(n_train=64, n_val=32, batch_size=32)

    def run():
        params = tasks.make_params(num_epochs=2, val_metrics={
            'MSE': tasks.ScriptedScore([1.0, 2.0])})
        return experiment(tmp_path, params, val_score_key='MSE').run(train, val)

    returned = tasks.weights(run())
    folder = os.path.join(str(tmp_path), 'exp')
    best, final = tasks.Regressor(), tasks.Regressor()
    serializers.load_model(os.path.join(folder, 'best_model.npz'), best)
    serializers.load_model(os.path.join(folder, 'final_model.npz'), final)
    best, final = tasks.weights(best), tasks.weights(final)
    assert any(not np.array_equal(best[name], final[name]) for name in best)
    tasks.assert_same_weights(returned, best)
    tasks.assert_same_weights(tasks.weights(run()), best)
