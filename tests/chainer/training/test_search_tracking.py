"""A search with tracking on: one MLflow parent run per study, a child run per trial (a real
MLflow server), and a TensorBoard folder per trial (read with EventAccumulator)."""
import os
import uuid

import numpy as np
import pytest

from tests.chainer.training import search_tasks, tasks
from tests.chainer.training.test_search import enqueued_study, folder_of

optuna = pytest.importorskip('optuna')
mlflow = pytest.importorskip('mlflow')
event_accumulator = pytest.importorskip('tensorboard.backend.event_processing.event_accumulator')
# Two trials, one of them pruned: too few for the importance figure.
pytestmark = [pytest.mark.timeout(240), pytest.mark.filterwarnings(
    'ignore:search. search_importances.png is drawn:RuntimeWarning')]
LR = search_tasks.LR_KEY


def test_a_search_has_a_parent_run_and_a_marked_child_run_per_trial(tmp_path, mlflow_server):
    name = 'search-' + uuid.uuid4().hex[:8]
    study = enqueued_study(tmp_path, [0.1, 10.0])  # lr=10 diverges: pruned
    experiment = tasks.experiment(
        tmp_path, search_tasks.search_params(num_epochs=2), val_score_key='MSE',
        tracking={'tensorboard': True, 'mlflow': mlflow_server.url, 'mlflow_experiment': name})
    with np.errstate(all='ignore'):
        summary = experiment.search(*search_tasks.search_managers(), n_trials=2)
    client = mlflow.MlflowClient(mlflow_server.url)
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    parents = [run for run in runs if 'mlflow.parentRunId' not in run.data.tags]
    assert [run.data.tags['study'] for run in parents] == [study.study_name]
    [parent] = parents
    children = {run.data.tags['trial']: run for run in runs if run is not parent}
    assert sorted(children) == ['0', '1']
    by_lr = {trial['choice'][LR]: trial for trial in summary['trials']}
    for lr, state, status in ((0.1, 'COMPLETE', 'FINISHED'), (10.0, 'PRUNED', 'KILLED')):
        trial = by_lr[lr]
        run = children[str(trial['number'])]
        assert run.data.tags['mlflow.parentRunId'] == parent.info.run_id
        assert run.data.tags['study'] == study.study_name
        assert run.data.tags['trial_state'] == state and run.info.status == status
        assert float(run.data.params[LR]) == lr  # once, under the search's name
        assert run.info.run_name == 'trial_{}'.format(trial['number'])
    # TensorBoard: one folder per trial, holding that trial's epochs.
    completed = folder_of(tmp_path, by_lr[0.1])
    accumulator = event_accumulator.EventAccumulator(os.path.join(completed, 'tensorboard'))
    accumulator.Reload()
    assert [(event.step, pytest.approx(event.value, rel=1e-6))
            for event in accumulator.Scalars('val/MSE')] == [
        (row['epoch'], row['val/MSE']) for row in tasks.read_log(completed)]
    assert folder_of(tmp_path, by_lr[10.0]) != completed
    assert os.path.isdir(os.path.join(folder_of(tmp_path, by_lr[10.0]), 'tensorboard'))


def test_a_second_search_of_the_same_study_reuses_its_parent_run(tmp_path, mlflow_server):
    name = 'search-' + uuid.uuid4().hex[:8]
    enqueued_study(tmp_path, [0.1, 0.3])
    tracking = {'mlflow': mlflow_server.url, 'mlflow_experiment': name}
    for n_trials in (1, 2):
        tasks.experiment(tmp_path, search_tasks.search_params(num_epochs=1),
                         val_score_key='MSE', tracking=tracking).search(
            *search_tasks.search_managers(), n_trials=n_trials)
    client = mlflow.MlflowClient(mlflow_server.url)
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    parents = [run for run in runs if 'mlflow.parentRunId' not in run.data.tags]
    assert len(parents) == 1 and len(runs) == 3
