import json
import os
import stat
import subprocess
import sys
import time
import uuid

import chainer
import numpy as np
import pytest
from chainer.training import extensions as chainer_extensions

from researchutils.chainer import serializers
from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training import ChainerExperiment
from tests.chainer.training import tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def experiment(tmp_path, params=None, **kwargs):
    kwargs.setdefault('seed', 0)
    return ChainerExperiment(params or tasks.make_params(), tasks.Regressor, name='exp',
                             save_path=str(tmp_path), **kwargs)


def read_log(exp):
    with open(os.path.join(exp.output_dir, 'log')) as stream:
        return json.load(stream)


def val_mse(exp, model, val):
    return exp.test(model, val, {'MSE': tasks.mean_squared_error})[1]['MSE']


class MakesMarkerWhenUnpickled(object):
    """An object whose unpickling creates the folder ``path`` (stands for any code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def weights(model):
    return {name: param.array.copy() for name, param in model.namedparams()}


def assert_same_weights(first, second):
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


class CountCalls(chainer.training.Extension):
    trigger = (1, 'epoch')

    def __init__(self):
        self.calls = 0

    def __call__(self, trainer):
        self.calls += 1


def test_run_learns_the_task(tmp_path):
    exp = experiment(tmp_path, val_score_key='MSE')
    train, val = tasks.make_managers()
    before = val_mse(exp, exp.build_model(), val)
    after = val_mse(exp, exp.run(train, val), val)
    assert after < before / 10


def test_losses_and_val_metrics_are_reported_every_epoch(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=3))
    exp.run(*tasks.make_managers())
    log = read_log(exp)
    assert [entry['epoch'] for entry in log] == [1, 2, 3]
    assert all({'main/MSE', 'val/MSE'} <= set(entry) for entry in log)


def test_logged_val_metric_is_the_numpy_metric_over_the_val_set(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2))
    train, val = tasks.make_managers()
    model = exp.run(train, val)
    dataset = val.dataset
    with chainer.using_config('train', False):
        preds = model.forward(dataset.data)['pred'].array
    reference = np.mean((preds - dataset.labels) ** 2)
    assert read_log(exp)[-1]['val/MSE'] == pytest.approx(reference, rel=1e-5)


def test_val_metrics_get_numpy_arrays(tmp_path):
    seen = set()

    def metric(pred, label):
        seen.add((type(pred), type(label)))
        return 0.0

    exp = experiment(tmp_path, tasks.make_params(num_epochs=1, val_metrics={'m': metric}))
    exp.run(*tasks.make_managers())
    assert seen == {(np.ndarray, np.ndarray)}


def test_train_metrics_run_in_the_closure_on_backend_arrays(tmp_path):
    seen = set()

    def metric(pred, label):
        seen.add((type(pred), type(label)))
        return chainer.functions.mean_absolute_error(pred, label)

    exp = experiment(tmp_path, tasks.make_params(num_epochs=1, train_metrics={'MAE': metric}))
    exp.run(*tasks.make_managers())
    assert seen == {(chainer.Variable, np.ndarray)}
    assert 'main/MAE' in read_log(exp)[0]


def test_returned_model_is_the_best_by_lowest_val_score(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=4), val_score_key='MSE')
    train, val = tasks.make_managers()
    model = exp.run(train, val)
    best = min(entry['val/MSE'] for entry in read_log(exp))
    assert val_mse(exp, model, val) == pytest.approx(best, rel=1e-5)


def test_returned_model_is_the_best_by_highest_val_score(tmp_path):
    # The highest MSE is the first epoch's, not the last one's.
    exp = experiment(tmp_path, tasks.make_params(num_epochs=4), val_score_key='MSE',
                     val_score_mode='highest')
    train, val = tasks.make_managers()
    model = exp.run(train, val)
    log = read_log(exp)
    assert val_mse(exp, model, val) == pytest.approx(log[0]['val/MSE'], rel=1e-5)
    assert log[0]['val/MSE'] > log[-1]['val/MSE']


def test_best_model_file_loads_into_a_fresh_model(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    model = exp.run(*tasks.make_managers())
    fresh = serializers.load_model(os.path.join(exp.output_dir, 'best_model.npz'),
                                   tasks.Regressor())
    assert_same_weights(weights(fresh), weights(model))


def test_checkpoints_every_checkpoint_freq_epochs(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=4), checkpoint_freq=2)
    exp.run(*tasks.make_managers())
    snapshots = sorted(n for n in os.listdir(exp.output_dir) if n.startswith('snapshot'))
    assert snapshots == ['snapshot_epoch_2', 'snapshot_epoch_4']


def test_lr_scheduler_extension_is_applied_every_epoch(tmp_path):
    params = tasks.make_params(num_epochs=3, optimizer_cls=chainer.optimizers.SGD,
                               optimizer_params={'lr': 0.1},
                               lr_sched_cls=chainer_extensions.ExponentialShift,
                               lr_sched_params={'attr': 'lr', 'rate': 0.5})
    exp = experiment(tmp_path, params, extensions=[chainer_extensions.observe_lr()])
    exp.run(*tasks.make_managers())
    rates = [entry['lr'] for entry in read_log(exp)]
    assert rates == pytest.approx([0.1, 0.05, 0.025])
    assert exp.trainer.updater.get_optimizer('main').lr == pytest.approx(0.0125)


def test_early_stopping_stops_when_the_val_score_stops_improving(tmp_path):
    # With a zero learning rate the score never improves after the first epoch.
    params = tasks.make_params(num_epochs=10, optimizer_cls=chainer.optimizers.SGD,
                               optimizer_params={'lr': 0.0}, early_stopping_patience=2)
    exp = experiment(tmp_path, params, val_score_key='MSE')
    exp.run(*tasks.make_managers())
    assert [entry['epoch'] for entry in read_log(exp)] == [1, 2, 3]


def test_log_and_png_plots_are_written(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2))
    exp.run(*tasks.make_managers())
    for name in ('loss.png', 'metrics.png'):
        with open(os.path.join(exp.output_dir, name), 'rb') as stream:
            assert stream.read(8) == b'\x89PNG\r\n\x1a\n'


@pytest.mark.parametrize('terminal', [True, False])
def test_progress_bar_only_when_output_is_a_terminal(tmp_path, monkeypatch, terminal):
    monkeypatch.setattr(sys.stdout, 'isatty', lambda: terminal)
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    exp.run(*tasks.make_managers(n_train=64))
    assert ('ProgressBar' in exp.trainer._extensions) is terminal


def test_user_extensions_run_with_their_triggers(tmp_path):
    every_epoch, every_iteration = CountCalls(), CountCalls()
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2),
                     extensions=[every_epoch, (every_iteration, (1, 'iteration'))])
    exp.run(*tasks.make_managers(n_train=64, batch_size=32))
    assert (every_epoch.calls, every_iteration.calls) == (2, 4)


def test_rerun_of_a_finished_experiment_returns_its_model_without_training(tmp_path):
    train, val = tasks.make_managers()
    first = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    trained = weights(first.run(train, val))
    log = read_log(first)
    again = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    assert_same_weights(weights(again.run(train, val)), trained)
    assert again.trainer is None and read_log(again) == log


@pytest.mark.timeout(120)
def test_resume_after_a_killed_run_repeats_and_loses_no_epoch(tmp_path):
    killed_path, reference_path = str(tmp_path / 'killed'), str(tmp_path / 'reference')
    process = subprocess.Popen([sys.executable, '-m', 'tests.chainer.training.tasks',
                                killed_path, '6'], cwd=ROOT)
    snapshot = os.path.join(killed_path, 'resumable', 'snapshot_epoch_2')
    deadline = time.time() + 60
    while not os.path.exists(snapshot) and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.kill()
    process.wait(timeout=30)
    assert os.path.exists(snapshot), 'the run ended before its second snapshot'
    assert not os.path.exists(os.path.join(killed_path, 'resumable', 'run_state.json'))

    resumed = tasks.make_experiment(killed_path, 6).run(*tasks.make_managers())
    reference = tasks.make_experiment(reference_path, 6).run(*tasks.make_managers())
    with open(os.path.join(killed_path, 'resumable', 'log')) as stream:
        assert [entry['epoch'] for entry in json.load(stream)] == [1, 2, 3, 4, 5, 6]
    for name, param in reference.namedparams():
        np.testing.assert_allclose(dict(resumed.namedparams())[name].array, param.array,
                                   rtol=1e-5, atol=1e-6, err_msg=name)


class CountUpdates(chainer.training.Extension):
    """Counts iterations and remembers the epoch training resumed from."""

    trigger = (1, 'iteration')

    def __init__(self):
        self.updates = 0
        self.first_epoch = None

    def initialize(self, trainer):
        self.first_epoch = trainer.updater.epoch

    def __call__(self, trainer):
        self.updates += 1


def test_resume_loads_the_newest_snapshot_and_trains_only_the_missing_epochs(tmp_path):
    train, val = tasks.make_managers(n_train=64, batch_size=32)  # 2 iterations per epoch
    first = experiment(tmp_path, tasks.make_params(num_epochs=4))
    first.run(train, val)
    snapshots = sorted(n for n in os.listdir(first.output_dir) if n.startswith('snapshot'))
    assert snapshots == ['snapshot_epoch_3', 'snapshot_epoch_4']  # two kept
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    counter = CountUpdates()
    experiment(tmp_path, tasks.make_params(num_epochs=6), extensions=[counter]).run(train, val)
    assert counter.first_epoch == 4
    assert counter.updates == 2 * 2


def test_resume_never_unpickles_a_planted_snapshot(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    exp.run(*tasks.make_managers(n_train=64))
    os.remove(os.path.join(exp.output_dir, 'run_state.json'))
    snapshot = os.path.join(exp.output_dir, 'snapshot_epoch_1')
    with np.load(snapshot) as archive:
        arrays = {key: archive[key] for key in archive.files}
    marker = str(tmp_path / 'code_ran')
    arrays['extensions/planted'] = np.array([MakesMarkerWhenUnpickled(marker)], dtype=object)
    planted = os.path.join(exp.output_dir, 'snapshot_epoch_2')
    with open(planted, 'wb') as stream:
        np.savez(stream, **arrays)
    resumed = experiment(tmp_path, tasks.make_params(num_epochs=3))
    with pytest.raises(ValueError, match=r"snapshot_epoch_2.*object array.*'extensions/planted'"):
        resumed.run(*tasks.make_managers(n_train=64))
    assert not os.path.exists(marker)


def test_test_returns_dataset_level_metrics(tmp_path):
    exp = experiment(tmp_path)
    model = exp.build_model()
    dataset = tasks.LinearTask(37)
    _, result = exp.test(model, DataManager(dataset, 8), {'MSE': tasks.mean_squared_error})
    with chainer.using_config('train', False):
        preds = model.forward(dataset.data)['pred'].array
    assert result['MSE'] == pytest.approx(np.mean((preds - dataset.labels) ** 2), rel=1e-5)


def test_kfold_trains_one_model_per_fold(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=6))
    dataset = tasks.LinearTask(192)
    untrained = val_mse(exp, exp.build_model(), DataManager(dataset, 64))
    _, results = exp.kfold(DataManager(dataset, 32), {'MSE': tasks.mean_squared_error},
                           num_splits=3, val_split=None)
    assert len(results) == 3
    assert all(result['MSE'] < untrained / 5 for result in results.values()), (untrained,
                                                                               results)
    assert sorted(os.listdir(exp.output_dir)) == ['fold_0', 'fold_1', 'fold_2']


def test_kfold_with_val_split_selects_the_best_model_per_fold(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    _, results = exp.kfold(DataManager(tasks.LinearTask(90), 32),
                           {'MSE': tasks.mean_squared_error}, num_splits=2, val_split=0.25)
    assert len(results) == 2
    assert os.path.exists(os.path.join(exp.output_dir, 'fold_1', 'best_model.npz'))


def test_grid_search_reports_the_best_combination(tmp_path):
    params = tasks.make_params(num_epochs=3,
                               variable={'training': {'optimizer_params': {'alpha': [0.0, 0.02]}}})
    del params.fixed_params['training']['optimizer_params']
    exp = experiment(tmp_path, params, val_score_key='MSE')
    summary = exp.grid_search(*tasks.make_managers())
    assert summary['best_params'].choice == {'training/optimizer_params/alpha': 0.02}
    assert [choice for choice, _ in summary['results']] == [
        {'training/optimizer_params/alpha': 0.0}, {'training/optimizer_params/alpha': 0.02}]
    assert summary['best_score'] == min(score for _, score in summary['results'])
    with open(os.path.join(exp.output_dir, 'grid_search.json')) as stream:
        assert json.load(stream)['best_score'] == summary['best_score']


def test_save_writes_readable_json_that_load_restores(tmp_path):
    exp = experiment(tmp_path, val_score_key='MSE', checkpoint_freq=3)
    path = exp.save()
    with open(path) as stream:
        saved = json.load(stream)
    assert saved['model_cls'] == 'tests.chainer.training.tasks:Regressor'
    assert saved['params']['fixed_params']['training']['num_epochs'] == 6
    loaded = ChainerExperiment.load(exp.output_dir)
    assert loaded.params == exp.params and loaded.model_cls is tasks.Regressor
    assert (loaded.val_score_key, loaded.checkpoint_freq, loaded.seed) == ('MSE', 3, 0)


def test_loaded_experiment_returns_the_trained_model(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    exp.save()
    train, val = tasks.make_managers()
    trained = weights(exp.run(train, val))
    assert_same_weights(weights(ChainerExperiment.load(exp.output_dir).run(train, val)), trained)


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


def _edit_saved_experiment(exp, edit):
    path = exp.save()
    with open(path) as stream:
        saved = json.load(stream)
    edit(saved)
    with open(path, 'w') as stream:
        json.dump(saved, stream)


def test_experiment_json_naming_os_system_is_refused_and_runs_nothing(tmp_path):
    marker = str(tmp_path / 'code_ran')

    def plant(saved):
        training = saved['params']['fixed_params']['training']
        training['lr_sched_cls'] = {'__object__': 'os:system'}
        training['lr_sched_params'] = {'command': 'mkdir ' + marker}

    exp = experiment(tmp_path / 'runs', tasks.make_params(num_epochs=1))
    _edit_saved_experiment(exp, plant)
    with pytest.raises(ValueError, match=r"training/lr_sched_cls.*'os:system'"):
        ChainerExperiment.load(exp.output_dir).run(*tasks.make_managers(n_train=64))
    assert not os.path.exists(marker)


def test_experiment_json_naming_an_unimported_model_module_never_imports_it(tmp_path,
                                                                            monkeypatch):
    name = 'planted_{}'.format(uuid.uuid4().hex)
    marker = tmp_path / 'imported'
    (tmp_path / (name + '.py')).write_text('import os\nos.mkdir({!r})\n'.format(str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    exp = experiment(tmp_path / 'runs')
    _edit_saved_experiment(exp, lambda saved: saved.update(model_cls=name + ':Model'))
    with pytest.raises(ValueError, match=r"model_cls.*'{}:Model'.*allowed_modules".format(name)):
        ChainerExperiment.load(exp.output_dir)
    assert not marker.exists() and name not in sys.modules


def test_experiment_json_may_name_functions_of_the_model_package(tmp_path):
    # tasks.Regressor lives in the tests package, so tests.* functions are allowed.
    exp = experiment(tmp_path, tasks.make_params(val_metrics={'MSE': tasks.mean_squared_error}))
    exp.save()
    loaded = ChainerExperiment.load(exp.output_dir)
    assert loaded.params.training['val_metrics']['MSE'] is tasks.mean_squared_error


def test_save_of_a_lambda_metric_names_it(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(val_metrics={'bad': lambda p, y: 0.}))
    with pytest.raises(ValueError, match='training/val_metrics/bad'):
        exp.save()


@pytest.mark.parametrize('training, error, message', [
    ({'num_epochs': None}, KeyError, 'need .*num_epochs'),
    ({'optimizer_cls': dict}, TypeError, 'Chainer optimizer class'),
    ({'num_epoch': 3}, ValueError, r"unknown training parameters \['num_epoch'\]"),
    ({'losses': {}}, ValueError, 'at least one loss'),
    ({'val_metrics': {'MSE': 3}}, TypeError, 'val_metrics'),
])
def test_bad_training_parameters_are_refused_at_construction(tmp_path, training, error,
                                                             message):
    params = tasks.make_params(**training)
    if training.get('num_epochs', 1) is None:
        del params.fixed_params['training']['num_epochs']
    with pytest.raises(error, match=message):
        experiment(tmp_path, params)


def test_val_score_key_must_be_a_val_metric(tmp_path):
    with pytest.raises(ValueError, match="val_score_key 'ACC' is not one of the val_metrics"):
        experiment(tmp_path, val_score_key='ACC')


def test_early_stopping_needs_a_val_score_key(tmp_path):
    with pytest.raises(ValueError, match='early_stopping_patience needs val_score_key'):
        experiment(tmp_path, tasks.make_params(early_stopping_patience=2))


def test_key_mapping_to_a_missing_batch_key_fails_before_training(tmp_path):
    exp = experiment(tmp_path, key_mapping={'x': 'image'})
    with pytest.raises(KeyError, match="batch key 'image'"):
        exp.run(*tasks.make_managers())
    assert not os.path.exists(exp.output_dir)


def test_model_parameters_that_do_not_fit_fail_before_training(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(model={'num_layers': 3}))
    with pytest.raises(TypeError, match='"model" parameters .* do not fit Regressor'):
        exp.run(*tasks.make_managers())
    assert not os.path.exists(exp.output_dir)


def test_training_batches_need_a_data_entry(tmp_path):
    train = DataManager([{'x': np.ones(4, np.float32), 'label': np.ones(2, np.float32)}], 1)
    with pytest.raises(KeyError, match='batch\\["data"\\]'):
        experiment(tmp_path).run(train)


def test_a_model_class_without_closure_is_refused(tmp_path):
    with pytest.raises(TypeError, match='AbstractChainerNetwork'):
        ChainerExperiment(tasks.make_params(), chainer.links.Linear, save_path=str(tmp_path))


def test_variable_parameters_need_grid_search_to_run(tmp_path):
    params = tasks.make_params(variable={'model': {'num_hidden': [4, 8]}})
    with pytest.raises(ValueError, match='grid'):
        experiment(tmp_path, params).run(*tasks.make_managers())


@pytest.mark.gpu
def test_training_on_gpu_0_learns(tmp_path):
    exp = experiment(tmp_path, val_score_key='MSE', gpu_ids=[0])
    train, val = tasks.make_managers()
    before = val_mse(exp, exp.build_model(), val)
    model = exp.run(train, val)
    assert model.device.xp is not np
    assert val_mse(exp, model, val) < before / 10


def test_several_devices_train_a_data_parallel_model_like_one_device(tmp_path):
    from researchutils.chainer.models import (
        DataParallelChainerNetwork,
        DataParallelChainerOptimizer,
    )
    params = tasks.make_params(num_epochs=2)
    single = experiment(tmp_path / 'single', params).run(*tasks.make_managers())
    parallel_exp = experiment(tmp_path / 'parallel', params, gpu_ids=['@numpy', '@numpy'])
    parallel = parallel_exp.run(*tasks.make_managers())
    assert isinstance(parallel, DataParallelChainerNetwork)
    assert isinstance(parallel_exp.trainer.updater.get_optimizer('main'),
                      DataParallelChainerOptimizer)
    for name, param in single.namedparams():
        np.testing.assert_allclose(dict(parallel.namedparams())[name].array, param.array,
                                   rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.timeout(60)
def test_slack_report_posts_the_experiment_log(tmp_path):
    from researchutils.chainer.training.extensions import SlackReport
    from tests.support.slack_server import SlackServer

    with SlackServer() as server:
        report = SlackReport(server.client(), entries=['epoch', 'main/MSE', 'val/MSE'],
                             flush_timeout=5)
        exp = experiment(tmp_path, tasks.make_params(num_epochs=2),
                         extensions=[(report, (1, 'epoch'))])
        exp.run(*tasks.make_managers(n_train=64))
        texts = '\n'.join(server.texts())
    assert 'val/MSE' in texts and 'finished' in texts
    assert '{:.6g}'.format(read_log(exp)[-1]['val/MSE'])[:5] in texts


@pytest.mark.timeout(60)
def test_kfold_with_one_slack_report_posts_each_folds_start_and_finished(tmp_path):
    from researchutils.chainer.training.extensions import SlackReport
    from tests.support.slack_server import SlackServer

    with SlackServer() as server:
        report = SlackReport(server.client(), flush_timeout=5)
        exp = experiment(tmp_path, tasks.make_params(num_epochs=1),
                         extensions=[(report, (1, 'epoch'))])
        exp.kfold(DataManager(tasks.LinearTask(96), 32), {'MSE': tasks.mean_squared_error},
                  num_splits=3, val_split=None)
        messages = list(server.messages)
    for fold in range(3):
        out = os.path.join(exp.output_dir, 'fold_{}'.format(fold))
        starts = [m for m in messages if 'started' in m['text'] and out in m['text']]
        assert len(starts) == 1, (fold, [m['text'] for m in messages])
        assert starts[0]['thread_ts'] is None
        finished = [m for m in messages if 'finished' in m['text'] and out in m['text']]
        assert len(finished) == 1, (fold, [m['text'] for m in messages])
        assert finished[0]['thread_ts'] == starts[0]['ts']


def test_early_stopping_resumed_from_a_snapshot_stops_at_the_same_epoch(tmp_path):
    def params(num_epochs):
        return tasks.make_params(num_epochs=num_epochs, optimizer_cls=chainer.optimizers.SGD,
                                 optimizer_params={'lr': 0.0}, early_stopping_patience=2)

    first = experiment(tmp_path, params(2), val_score_key='MSE')
    first.run(*tasks.make_managers())
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    resumed = experiment(tmp_path, params(10), val_score_key='MSE')
    resumed.run(*tasks.make_managers())
    # Uninterrupted, the same run stops after epoch 3 (see the test above).
    assert [entry['epoch'] for entry in read_log(resumed)] == [1, 2, 3]


def test_key_mapping_is_checked_against_training_batches_without_val(tmp_path):
    exp = experiment(tmp_path, key_mapping={'x': 'image'})
    with pytest.raises(KeyError, match="batch key 'image'"):
        exp.run(tasks.make_managers()[0])
    assert not os.path.exists(exp.output_dir)
