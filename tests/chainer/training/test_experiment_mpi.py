"""ChainerExperiment with a ChainerMN communicator; run by `make test-mpi` (mpiexec -n 2)."""
import json
import os
import time
import warnings

import chainer
import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer.data_loading import DataManager, SequentialSampler
from researchutils.chainer.training import ChainerExperiment
from researchutils.chainer.training._ownership import OWNER_FILE, FolderInUseError
from tests.chainer.training import tasks

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]


def make(comm, path, **kwargs):
    return ChainerExperiment(tasks.make_params(num_epochs=kwargs.pop('num_epochs', 6)),
                             tasks.Regressor, name='mpi', save_path=path, comm=comm,
                             seed=comm.rank, **kwargs)


def val_mse(exp, model, val):
    return exp.test(model, val, {'MSE': tasks.mean_squared_error})[1]['MSE']


def test_training_over_ranks_learns(comm, shared_path):
    exp = make(comm, shared_path, val_score_key='MSE')
    train, val = tasks.make_managers()
    before = val_mse(exp, exp.build_model(), val)
    assert val_mse(exp, exp.run(train, val), val) < before / 10


def test_a_fresh_run_equals_one_process_training_on_the_union_of_the_ranks_batches(
        comm, shared_path):
    # 64 examples, 32 a batch, 2 ranks: each iteration the ranks' batches are the whole set.
    dataset = tasks.LinearTask(64, seed=1)
    params = tasks.make_params(num_epochs=3, optimizer_cls=chainer.optimizers.SGD,
                               optimizer_params={'lr': 0.1})
    # The ranks start apart (seed=comm.rank): rank 0's weights must win.
    exp = ChainerExperiment(params, tasks.Regressor, name='union', save_path=shared_path,
                            comm=comm, seed=comm.rank)
    model = exp.run(DataManager(dataset, 32, sampler_cls=SequentialSampler))
    updates = comm.mpi_comm.allgather(exp.trainer.updater.get_optimizer('main').t)
    every_rank_params = comm.mpi_comm.allgather(
        {name: param.array.copy() for name, param in model.namedparams()})

    np.random.seed(0)  # the initial weights of rank 0 (seed 0)
    reference = tasks.Regressor()
    optimizer = chainer.optimizers.SGD(lr=0.1).setup(reference)
    for _ in range(3):
        loss = F.mean_squared_error(reference.forward(dataset.data)['pred'], dataset.labels)
        reference.cleargrads()
        loss.backward()
        optimizer.update()
    assert updates == [3, 3]
    for params in every_rank_params:
        for name, param in reference.namedparams():
            np.testing.assert_allclose(params[name], param.array, rtol=1e-5, atol=1e-6,
                                       err_msg=name)


def test_every_rank_ends_with_the_same_parameters(comm, shared_path):
    model = make(comm, shared_path, num_epochs=2).run(*tasks.make_managers())
    flat = np.concatenate([param.array.ravel() for _, param in sorted(model.namedparams())])
    gathered = comm.mpi_comm.allgather(flat)
    np.testing.assert_array_equal(gathered[0], gathered[1])


def test_val_metrics_are_aggregated_over_the_whole_val_set(comm, shared_path):
    exp = make(comm, shared_path, num_epochs=1)
    train, val = tasks.make_managers(n_val=61)
    model = exp.run(train, val)
    reported = comm.mpi_comm.bcast(
        exp.trainer.observation['val/MSE'] if comm.rank == 0 else None, root=0)
    whole = val_mse(exp, model, DataManager(val.dataset, 61))
    assert exp.trainer.observation['val/MSE'] == pytest.approx(whole, rel=1e-5)
    assert reported == pytest.approx(whole, rel=1e-5)


def test_only_rank_0_writes_files(comm, tmp_path):
    exp = make(comm, str(tmp_path), num_epochs=1)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # rank 1 finds no final model in its own folder
        exp.run(*tasks.make_managers())
    if comm.rank == 0:
        assert {'log', 'final_model.npz', 'run_state.json'} <= set(os.listdir(exp.output_dir))
    else:  # Chainer's Trainer makes its (empty) out folder on every rank
        assert not os.path.exists(exp.output_dir) or os.listdir(exp.output_dir) == []


def test_a_resumed_run_ends_like_an_uninterrupted_one(comm, shared_path):
    first = make(comm, os.path.join(shared_path, 'resumed'), num_epochs=2)
    first.run(*tasks.make_managers())
    if comm.rank == 0:  # let it train further from its last snapshot
        os.remove(os.path.join(first.output_dir, 'run_state.json'))
    comm.mpi_comm.barrier()
    resumed = make(comm, os.path.join(shared_path, 'resumed'), num_epochs=4)
    resumed_model = resumed.run(*tasks.make_managers())
    reference = make(comm, os.path.join(shared_path, 'reference'), num_epochs=4)
    reference_model = reference.run(*tasks.make_managers())
    for name, param in reference_model.namedparams():
        np.testing.assert_allclose(dict(resumed_model.namedparams())[name].array, param.array,
                                   rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_folder_held_by_another_run_is_refused_on_every_rank(comm, shared_path):
    # A live run on another node holds the folder (its claim, as that run publishes it):
    # every rank raises the same error, and none hangs in a collective call.
    folder = os.path.join(shared_path, 'mpi')
    if comm.rank == 0:
        os.makedirs(folder)
        with open(os.path.join(folder, OWNER_FILE), 'w') as f:
            json.dump({'host': 'another-node', 'pid': 99, 'token': 'theirs',
                       'since': '2026-12-06T10:00:00+00:00', 'heartbeat': time.time()}, f)
    comm.mpi_comm.barrier()
    exp = make(comm, shared_path, num_epochs=1)
    train, val = tasks.make_managers()
    with pytest.raises(FolderInUseError, match='pid 99 on host another-node'):
        exp.run(train, val)
    assert not os.path.exists(os.path.join(folder, 'log'))


def test_a_user_extension_runs_on_rank_zero_and_one_for_every_rank_on_each(comm, shared_path):
    plain = tasks.CountCalls()
    own, paired = tasks.CountCallsOnEveryRank(), tasks.CountCallsOnEveryRank()
    exp = make(comm, shared_path, num_epochs=2,
               extensions=[plain, own, (paired, (1, 'iteration'))])
    exp.run(*tasks.make_managers(n_train=128, batch_size=32))
    # 128 examples in shards of 64, 32 a batch: two iterations an epoch on each rank.
    calls = comm.mpi_comm.allgather((plain.calls, own.calls, paired.calls))
    assert calls == [(2, 2, 4), (0, 2, 4)]


def test_a_training_set_the_ranks_do_not_divide_gives_each_rank_as_many_updates(
        comm, shared_path):
    # 65 examples on 2 ranks: shards of 33, the shorter one padded, so that every rank makes
    # two batches of 32 an epoch and no rank waits for the other in the gradients' allreduce.
    exp = make(comm, shared_path, num_epochs=2)
    exp.run(*tasks.make_managers(n_train=65, batch_size=32))
    updates = comm.mpi_comm.allgather(exp.trainer.updater.get_optimizer('main').t)
    assert updates == [4, 4]
