"""ChainerExperiment under ChainerMN stopped by a signal to one rank; run by `make test-mpi`.

A process that is not a rank (started by rank 1) signals rank 0 alone at a handshake
(the experiment's extra extensions run on rank 0). Every test gathers before it asserts,
so the ranks pass or fail together; the thread timeout ends a rank that hangs.
"""
import os
import signal

import numpy
import pytest

from researchutils.chainer.training import ChainerExperiment
from researchutils.chainer.training._experiment import files as experiment_files
from researchutils.chainer.training.extensions import Preempted
from tests.chainer.training import tasks
from tests.support.preemptible_experiment import PauseAt
from tests.support.preemptible_training import start_signaller

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(180, method='thread')]


def _experiment(comm, path, extensions=()):
    return ChainerExperiment(tasks.make_params(num_epochs=3), tasks.Regressor, name='mpi',
                             save_path=path, comm=comm, seed=0, val_score_key='MSE',
                             extensions=extensions)


def _managers():
    # 128 examples, 64 a rank in batches of 32: epochs end after iterations 2, 4, 6.
    return tasks.make_managers(n_train=128)


def _outcome(comm, experiment, model):
    """What must not depend on the interruption, gathered from every rank."""
    val = _managers()[1]
    weights = {name: param.array.copy() for name, param in sorted(model.namedparams())}
    log = None
    if comm.rank == 0:
        log = [{key: value for key, value in row.items() if key != 'elapsed_time'}
               for row in tasks.read_log(experiment)]
    score = experiment.test(model, val, {'MSE': tasks.mean_squared_error})[1]['MSE']
    return comm.mpi_comm.allgather((weights, log, score))


def test_a_signal_to_one_rank_stops_the_experiment_everywhere_and_it_resumes_exactly(
        comm, shared_path):
    reference = _experiment(comm, os.path.join(shared_path, 'reference'))
    expected = _outcome(comm, reference, reference.run(*_managers()))

    path = os.path.join(shared_path, 'preempted')
    folder = os.path.join(path, 'mpi')
    os.makedirs(folder, exist_ok=True)
    comm.mpi_comm.barrier()
    signaller = None
    if comm.rank == 1:
        signaller = start_signaller(os.path.join(folder, 'paused'),
                                    os.path.join(folder, 'go'), signal.SIGTERM)
    stopped = None
    try:
        _experiment(comm, path, [PauseAt('mpi', 3, folder)]).run(*_managers())
    except Preempted as preempted:
        stopped = (preempted.iteration, preempted.signal_number)
    if signaller is not None:
        signaller.wait(timeout=60)
    comm.mpi_comm.barrier()
    snapshots = sorted(name for name in os.listdir(folder) if name.startswith('snapshot'))
    again = _experiment(comm, path)
    resumed = _outcome(comm, again, again.run(*_managers()))
    epochs_after = again.trainer.updater.epoch - 1  # resumed in epoch 2

    assert comm.mpi_comm.allgather(stopped) == [(3, signal.SIGTERM)] * 2
    assert snapshots == ['snapshot_epoch_1', 'snapshot_epoch_1_rank0', 'snapshot_epoch_1_rank1']
    assert epochs_after == 2
    for (weights, log, score), (expected_weights, expected_log, expected_score) in zip(
            resumed, expected):
        assert sorted(weights) == sorted(expected_weights)
        assert [name for name in weights
                if not numpy.array_equal(weights[name], expected_weights[name])] == []
        assert (log, score) == (expected_log, expected_score)


def _plant(folder, names):
    for name in names:
        with open(os.path.join(folder, name), 'w'):
            pass


@pytest.mark.parametrize('files, chosen', [
    # Every rank has one of the newest epoch: each takes its own.
    (['snapshot_epoch_2', 'snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1'],
     ['snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1']),
    # Older than the newest epoch-end snapshot: rank 0's epoch-end one, on every rank.
    (['snapshot_epoch_3', 'snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1'],
     ['snapshot_epoch_3', 'snapshot_epoch_3']),
    # One rank's is missing (its write was killed): none is used.
    (['snapshot_epoch_2', 'snapshot_epoch_2_rank0'], ['snapshot_epoch_2', 'snapshot_epoch_2']),
    # The ranks' newest differ: none is used.
    (['snapshot_epoch_1', 'snapshot_epoch_2_rank0', 'snapshot_epoch_1_rank1'],
     ['snapshot_epoch_1', 'snapshot_epoch_1']),
    (['snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1'],
     ['snapshot_epoch_2_rank0', 'snapshot_epoch_2_rank1']),
    ([], [None, None]),
])
def test_each_rank_resumes_from_its_own_snapshot_only_when_every_rank_has_it(
        comm, shared_path, files, chosen):
    if comm.rank == 0:
        _plant(shared_path, files)
    comm.mpi_comm.barrier()
    path = experiment_files.resume_snapshot(shared_path, comm)
    names = comm.mpi_comm.allgather(None if path is None else os.path.basename(path))
    assert names == chosen
