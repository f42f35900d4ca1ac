"""ChainerExperiment(tracking=...): TensorBoard event files and MLflow runs of a run and of
a k-fold, read back with TensorBoard's EventAccumulator and a real MLflow server; the
reference is each run's own LogReport log."""
import os
import re
import uuid

import numpy as np
import pytest

from researchutils.chainer.training import ChainerExperiment
from researchutils.chainer.training._experiment.tracking import check_tracking
from tests.chainer.training import tasks

event_accumulator = pytest.importorskip('tensorboard.backend.event_processing.event_accumulator')
pytestmark = pytest.mark.timeout(180)


def _scalars(folder, tag):
    accumulator = event_accumulator.EventAccumulator(str(folder))
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def _expected(folder, key):
    return [(row['epoch'], pytest.approx(row[key], rel=1e-6)) for row in tasks.read_log(folder)]


@pytest.mark.parametrize('tracking, kept', [
    ('tensorboard', {'tensorboard': True, 'mlflow': False, 'mlflow_experiment': None}),
    (['tensorboard', 'mlflow'], {'tensorboard': True, 'mlflow': True,
                                 'mlflow_experiment': None}),
    ({'mlflow': 'http://127.0.0.1:5000', 'mlflow_experiment': 'mine'},
     {'tensorboard': False, 'mlflow': 'http://127.0.0.1:5000', 'mlflow_experiment': 'mine'}),
    (None, None),
])
def test_tracking_is_kept_as_plain_data(tracking, kept):
    assert check_tracking(tracking) == kept


@pytest.mark.parametrize('tracking, error', [
    ('wandb', ValueError), ([], ValueError), ({'tensorboard': 1}, TypeError),
    ({'mlflow': ''}, TypeError), ({'mlflow_experiment': 'x'}, ValueError),
    ({'comet': True}, ValueError), (3, TypeError),
])
def test_what_turns_no_known_tracker_on_is_refused_naming_tracking(tracking, error):
    with pytest.raises(error, match=r'tracking must be None, .*got ' + re.escape(repr(tracking))):
        check_tracking(tracking)


def test_the_constructor_refuses_a_bad_tracking_before_training(tmp_path):
    with pytest.raises(ValueError, match="tracking must be .*got 'wandb'"):
        tasks.experiment(tmp_path, tracking='wandb')


def test_a_run_writes_its_epochs_to_tensorboard_and_saves_tracking(tmp_path):
    experiment = tasks.experiment(tmp_path, tasks.make_params(num_epochs=2),
                                  val_score_key='MSE', tracking='tensorboard')
    experiment.run(*tasks.make_managers(n_train=64, n_val=32))
    folder = os.path.join(experiment.output_dir, 'tensorboard')
    for key in ('main/MSE', 'val/MSE'):
        assert _scalars(folder, key) == _expected(experiment.output_dir, key)
    # The experiment's parameters, for TensorBoard's hparams page.
    from tensorboard.plugins.hparams import plugin_data_pb2
    accumulator = event_accumulator.EventAccumulator(folder)
    accumulator.Reload()
    start = plugin_data_pb2.HParamsPluginData.FromString(accumulator.PluginTagToContent(
        'hparams')['_hparams_/session_start_info']).session_start_info
    assert start.hparams['training/batch_size'].number_value == 32
    loaded = ChainerExperiment.load(experiment.save())
    assert loaded.tracking == experiment.tracking


def test_a_run_logs_to_an_mlflow_run_named_after_the_experiment(tmp_path, mlflow_server):
    mlflow = pytest.importorskip('mlflow')
    name = 'exp-' + uuid.uuid4().hex[:8]
    experiment = tasks.experiment(tmp_path, tasks.make_params(num_epochs=2),
                                  tracking={'mlflow': mlflow_server.url,
                                            'mlflow_experiment': name})
    experiment.run(*tasks.make_managers(n_train=64, n_val=32))
    client = mlflow.MlflowClient(mlflow_server.url)
    [run] = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert run.info.status == 'FINISHED' and run.info.run_name == 'exp'
    assert run.data.params['training/batch_size'] == '32'
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                        'main/MSE'))
    assert history == _expected(experiment.output_dir, 'main/MSE')


def test_each_fold_of_a_kfold_has_its_own_tensorboard_folder(tmp_path):
    experiment = tasks.experiment(tmp_path, tasks.make_params(num_epochs=1),
                                  tracking='tensorboard')
    manager, _ = tasks.make_managers(n_train=48)
    with np.errstate(all='ignore'):
        experiment.kfold(manager, {'MSE': tasks.mean_squared_error}, num_splits=2,
                         val_split=None)
    for fold in ('fold_0', 'fold_1'):
        folder = os.path.join(experiment.output_dir, fold)
        assert _scalars(os.path.join(folder, 'tensorboard'), 'main/MSE') == _expected(
            folder, 'main/MSE')


def test_a_preempted_run_run_again_continues_its_mlflow_run_and_tensorboard_steps(
        tmp_path, mlflow_server):
    # What a retried trial of a search does too: train on in its folder from the snapshot.
    import signal

    from researchutils.chainer.training.extensions import Preempted
    from tests.support.preemptible_training import signal_self_at
    mlflow = pytest.importorskip('mlflow')
    name = 'exp-' + uuid.uuid4().hex[:8]
    tracking = {'tensorboard': True, 'mlflow': mlflow_server.url, 'mlflow_experiment': name}
    train, val = tasks.make_managers(n_train=64, n_val=32)  # 2 iterations an epoch
    first = tasks.experiment(tmp_path, tasks.make_params(num_epochs=3), tracking=tracking,
                             extensions=[signal_self_at(4, signal.SIGUSR1)])
    with pytest.raises(Preempted):
        first.run(train, val)
    tasks.experiment(tmp_path, tasks.make_params(num_epochs=3), tracking=tracking).run(
        train, val)
    client = mlflow.MlflowClient(mlflow_server.url)
    [run] = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert run.info.status == 'FINISHED'
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                        'main/MSE'))
    assert history == _expected(first.output_dir, 'main/MSE')
    assert [step for step, _ in history] == [1, 2, 3]
    folder = os.path.join(first.output_dir, 'tensorboard')
    assert _scalars(folder, 'main/MSE') == _expected(first.output_dir, 'main/MSE')


@pytest.mark.parametrize('tracking, mlflow_experiment', [
    ({'tensorboard': True, 'mlflow': True}, 'exp'),
    ({'mlflow': 'http://127.0.0.1:5000', 'mlflow_experiment': 'mine'}, 'mine')])
def test_a_fold_or_trial_reports_to_the_experiment_s_mlflow_experiment_under_its_name(
        tmp_path, tracking, mlflow_experiment):
    # What kfold, grid_search and the search give each fold, combination or trial.
    from researchutils.chainer.training._experiment import tracking as tracking_module
    experiment = tasks.experiment(tmp_path, tracking=tracking)
    tags = {'study': 's1'}
    assert tracking_module.sub_run(experiment, 'fold_1', parent_run_id='abc', tags=tags) == \
        dict(check_tracking(tracking), mlflow_experiment=mlflow_experiment, run_name='fold_1',
             parent_run_id='abc', tags=tags)
    assert tracking_module.sub_run(experiment, 'grid_0') == dict(
        check_tracking(tracking), mlflow_experiment=mlflow_experiment, run_name='grid_0')
    assert tracking_module.sub_run(tasks.experiment(tmp_path), 'fold_0') is None


@pytest.mark.parametrize('tracking', [
    ['tensorboard', 'tags'], ('mlflow', 'mlflow_experiment'), ['tensorboard', 5],
    {'mlflow': 5}, {'mlflow': None}, {'tensorboard': True, 'mlflow_experiment': ''},
    {'tensorboard': True, 'mlflow_experiment': 5}, {'tensorboard': 'yes'}, 'tensorboard,mlflow',
    {'tensorboard': False, 'mlflow': False}, {'tensorboard': False}])
def test_what_is_no_tracking_is_refused(tracking):
    with pytest.raises((TypeError, ValueError), match=r'^tracking must be None, .*got ' +
                       re.escape(repr(tracking))):
        check_tracking(tracking)


def test_a_tuple_of_trackers_turns_them_on():
    assert check_tracking(('mlflow',)) == {'tensorboard': False, 'mlflow': True,
                                           'mlflow_experiment': None}


def test_the_keys_of_a_search_s_trial_are_kept():
    trial = {'parent_run_id': 'abc', 'run_name': 'trial_3', 'tags': {'study': 's1'}}
    assert check_tracking(dict(trial, mlflow=True)) == dict(
        trial, tensorboard=False, mlflow=True, mlflow_experiment=None)
    every_key = dict(trial, tensorboard=True, mlflow='http://127.0.0.1:5000',
                     mlflow_experiment='mine')
    assert check_tracking(every_key) == every_key


def test_mlflow_true_logs_to_mlflow_s_default_tracking_uri(tmp_path, mlflow_server,
                                                          monkeypatch):
    mlflow = pytest.importorskip('mlflow')
    monkeypatch.setenv('MLFLOW_TRACKING_URI', mlflow_server.url)
    name = 'exp-' + uuid.uuid4().hex[:8]
    experiment = tasks.experiment(tmp_path, tasks.make_params(num_epochs=1),
                                  tracking={'mlflow': True, 'mlflow_experiment': name})
    experiment.run(*tasks.make_managers(n_train=32, n_val=32))
    client = mlflow.MlflowClient(mlflow_server.url)
    [run] = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert run.info.status == 'FINISHED' and run.info.run_name == 'exp'


def test_a_trial_s_mlflow_run_is_a_child_of_its_parent_run_with_its_tags_and_name(
        tmp_path, mlflow_server):
    # What the search sets for its trials; without mlflow_experiment, the MLflow
    # experiment is named after the experiment.
    mlflow = pytest.importorskip('mlflow')
    name = 'exp-' + uuid.uuid4().hex[:8]
    client = mlflow.MlflowClient(mlflow_server.url)
    parent = client.create_run(client.create_experiment(name), run_name='study')
    tracking = {'mlflow': mlflow_server.url, 'parent_run_id': parent.info.run_id,
                'tags': {'study': 's1'}, 'run_name': 'trial_7'}
    experiment = ChainerExperiment(tasks.make_params(num_epochs=1), tasks.Regressor, name=name,
                                   save_path=str(tmp_path), seed=0, tracking=tracking)
    experiment.run(*tasks.make_managers(n_train=32, n_val=32))
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    [child] = [run for run in runs if run.info.run_id != parent.info.run_id]
    assert child.info.run_name == 'trial_7' and child.data.tags['study'] == 's1'
    assert child.data.tags['mlflow.parentRunId'] == parent.info.run_id
