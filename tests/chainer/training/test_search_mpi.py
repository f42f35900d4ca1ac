"""ChainerExperiment.search under ChainerMN; run by `make test-mpi` (mpiexec -n 2)."""
import os
import re

import pytest

from tests.chainer.training import search_tasks, tasks
from tests.support import search_studies

optuna = pytest.importorskip('optuna')
pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]


# comm and shared_path: tests/chainer/training/conftest.py.
def experiment(comm, path, learning_rates):
    return tasks.ChainerExperiment(
        search_tasks.search_params(num_epochs=2, learning_rates=learning_rates),
        tasks.Regressor, name='exp', save_path=path, val_score_key='MSE', seed=0, comm=comm)


def test_rank_zero_asks_and_every_rank_trains_each_trial(comm, shared_path):
    if comm.rank == 0:
        os.makedirs(os.path.join(shared_path, 'exp'))
        study = search_studies.create('sqlite:///' + os.path.join(shared_path, 'exp',
                                                                  'search.db'))
        for lr in (0.1, 0.3):
            study.enqueue_trial({search_tasks.LR_KEY: lr})
    comm.mpi_comm.barrier()
    summary = experiment(comm, shared_path, [0.1, 0.3]).search(
        *search_tasks.search_managers(), n_trials=2, pruner=optuna.pruners.NopPruner())
    every_rank = comm.mpi_comm.allgather((summary['best_params'].choice, summary['results']))
    assert every_rank[0] == every_rank[1]
    assert [choice for choice, _ in summary['results']] == [
        {search_tasks.LR_KEY: 0.1}, {search_tasks.LR_KEY: 0.3}]
    assert (summary['study'] is None) == (comm.rank != 0)
    # Every rank has the summary of the folders rank 0 claimed for the trials.
    log = tasks.read_log(os.path.join(shared_path, 'exp', summary['trials'][1]['folder']))
    assert [entry['epoch'] for entry in log] == [1, 2]


@search_studies.FEW_COMPLETE
def test_a_pruned_trial_stops_every_rank_at_the_same_epoch(comm, shared_path):
    # Every MSE is above 0: each trial is pruned at its first report, on both ranks at once.
    summary = experiment(comm, shared_path, [0.1, 0.3]).search(
        *search_tasks.search_managers(), n_trials=2,
        pruner=optuna.pruners.ThresholdPruner(upper=0.0))
    assert [trial['state'] for trial in summary['trials']] == ['PRUNED', 'PRUNED']
    assert [trial['epochs_reported'] for trial in summary['trials']] == [1, 1]
    assert summary['best_params'] is None


def test_a_search_rank_zero_refuses_stops_every_rank_naming_it(comm, shared_path):
    if comm.rank == 0:
        os.makedirs(os.path.join(shared_path, 'exp'))
        study = search_studies.create('sqlite:///' + os.path.join(shared_path, 'exp',
                                                                  'search.db'))
        study.add_trial(optuna.trial.create_trial(
            params={'x': 1.0}, distributions={'x': optuna.distributions.FloatDistribution(0, 2)},
            value=0.5))
        search_studies.close_all()
    comm.mpi_comm.barrier()
    try:
        experiment(comm, shared_path, [0.1, 0.3]).search(*search_tasks.search_managers(),
                                                         n_trials=2)
    except Exception as error:  # compared on every rank below, so no rank waits alone
        raised = (type(error).__name__, str(error))
    else:
        raised = None
    zero, one = comm.mpi_comm.allgather(raised)
    assert zero[0] == 'ValueError', zero
    assert re.search(r"trial 0 of the study 'exp' has the parameters \['x'\]", zero[1])
    assert one[0] == 'RuntimeError', one
    assert re.match(r'search: rank 0 stopped the search with an error .*rank 1 ', one[1])
