"""PreemptionSnapshot under ChainerMN; run by `make test-mpi` (mpiexec -n 2).

A process that is not a rank (started by rank 0) sends the signal to rank 1 only, at a
handshake: rank 1 writes its pid to a file at the end of an iteration and waits until the
signal has been sent. Every test does all its communication before it asserts, and
asserts on values every rank gathered alike, so the ranks pass or fail together; the
thread timeout ends a rank that hangs, and so the whole MPI job.
"""
import os
import signal

import numpy
import pytest

from researchutils.chainer.training.extensions import Preempted, PreemptionSnapshot
from tests.support import preemptible_training as run

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120, method='thread')]


def _differences(actual, expected):
    arrays, rows = actual
    expected_arrays, expected_rows = expected
    different = sorted(key for key in set(arrays) | set(expected_arrays)
                       if key not in arrays or key not in expected_arrays
                       or not numpy.array_equal(arrays[key], expected_arrays[key]))
    return different + (['log rows'] if rows != expected_rows else [])


def _signal_rank_1_and_resume(comm, out, iteration, check_interval=1):
    """Runs until rank 1 alone gets SIGUSR1 after ``iteration``, then resumes.

    Returns, gathered from every rank: the iteration each stopped at, the snapshots
    each wrote, and the run after resuming.
    """
    os.makedirs(out, exist_ok=True)
    comm.mpi_comm.barrier()
    trainer = run.build_trainer(out, comm=comm, check_interval=check_interval)
    signaller = None
    if comm.rank == 1:
        trainer.extend(run.pause_at(iteration, out))
    else:
        signaller = run.start_signaller(os.path.join(out, 'at_{}'.format(iteration)),
                                        os.path.join(out, 'go_{}'.format(iteration)),
                                        signal.SIGUSR1)
    stopped = None
    try:
        trainer.run()
    except Preempted as preempted:
        stopped = (preempted.iteration, preempted.signal_number, preempted.code)
    if signaller is not None:
        signaller.wait(timeout=60)
    comm.mpi_comm.barrier()  # every snapshot is written
    snapshots = sorted(name for name in os.listdir(out) if name.startswith('snapshot_iter_'))
    resumed = run.build_trainer(out, comm=comm, check_interval=check_interval)
    resumed.run()
    return (comm.mpi_comm.allgather(stopped), snapshots,
            comm.mpi_comm.allgather(run.final_state(resumed)))


def test_a_signal_to_one_rank_stops_every_rank_at_that_iteration_and_resumes_exactly(
        comm, shared_path):
    reference = run.build_trainer(os.path.join(shared_path, 'reference'), comm=comm)
    reference.run()
    expected = comm.mpi_comm.allgather(run.final_state(reference))
    iteration = 4  # mid-epoch: 9 examples a rank, batches of 4
    stopped, snapshots, resumed = _signal_rank_1_and_resume(
        comm, os.path.join(shared_path, 'preempted'), iteration)
    assert stopped == [(iteration, signal.SIGUSR1, 75)] * 2
    # The epoch-end snapshots of iteration 3 and the ranks' own preemption snapshots.
    assert snapshots == ['snapshot_iter_3_rank0', 'snapshot_iter_3_rank1',
                         'snapshot_iter_4_rank0', 'snapshot_iter_4_rank1']
    # Each rank ends as it would have, uninterrupted; the ranks' weights agree.
    assert [_differences(resumed[rank], expected[rank]) for rank in range(2)] == [[], []]
    assert _differences(({k: v for k, v in resumed[0][0].items() if k.startswith('model/')},
                         []),
                        ({k: v for k, v in resumed[1][0].items() if k.startswith('model/')},
                         [])) == []


def test_with_a_check_interval_the_ranks_stop_at_the_next_multiple(comm, shared_path):
    stopped, snapshots, _ = _signal_rank_1_and_resume(
        comm, os.path.join(shared_path, 'every_3'), 4, check_interval=3)
    assert stopped == [(6, signal.SIGUSR1, 75)] * 2
    assert 'snapshot_iter_6_rank0' in snapshots and 'snapshot_iter_6_rank1' in snapshots


def test_a_filename_without_the_rank_is_refused_under_several_ranks(comm):
    with pytest.raises(ValueError, match=r"'snapshot_iter_\{.updater.iteration\}' has no "
                                         r"\{rank\}.*2 ranks"):
        PreemptionSnapshot(filename='snapshot_iter_{.updater.iteration}', comm=comm)
