"""ChainerExperiment: training, resuming, testing, and checks of run's inputs."""
import json
import os
import subprocess
import sys
import textwrap
import time

import chainer
import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer.data_loading import (
    BaseDataManager,
    DataManager,
    RandomSampler,
    SequentialSampler,
)
from researchutils.chainer.training import ChainerExperiment, create_optims_default_chainer
from tests.chainer.training import tasks
from tests.chainer.training.tasks import (
    assert_same_weights,
    experiment,
    forward,
    numpy_mse,
    read_log,
    val_mse,
    weights,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class MakesMarkerWhenUnpickled(object):
    """An object whose unpickling creates the folder ``path`` (stands for any code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


class IntegerLabels(tasks.LinearTask):
    def __getitem__(self, index):
        example = super().__getitem__(index)
        return dict(example, label=np.rint(example['label']).astype(np.int64))


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


def test_rerun_of_a_finished_experiment_returns_its_model_without_training(tmp_path):
    train, val = tasks.make_managers()
    first = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    trained = weights(first.run(train, val))
    log = read_log(first)
    again = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    assert_same_weights(weights(again.run(train, val)), trained)
    assert again.trainer is None and read_log(again) == log


@pytest.mark.system  # a training process killed mid-run (tests/support/stacks.py)
@pytest.mark.slow(reason='two training subprocesses, one killed mid-run: 10-20 s')
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


def test_key_mapping_to_a_missing_batch_key_fails_before_training(tmp_path):
    exp = experiment(tmp_path, key_mapping={'x': 'image'})
    with pytest.raises(KeyError, match="batch key 'image'"):
        exp.run(*tasks.make_managers())
    assert not os.path.exists(exp.output_dir)


def test_training_batches_need_a_data_entry(tmp_path):
    train = DataManager([{'x': np.ones(4, np.float32), 'label': np.ones(2, np.float32)}], 1)
    with pytest.raises(KeyError, match='batch\\["data"\\]'):
        experiment(tmp_path).run(train)


def test_variable_parameters_need_grid_search_to_run(tmp_path):
    params = tasks.make_params(variable={'model': {'num_hidden': [4, 8]}})
    with pytest.raises(ValueError, match='grid'):
        experiment(tmp_path, params).run(*tasks.make_managers())


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


def test_key_mapping_is_checked_against_training_batches_without_val(tmp_path):
    exp = experiment(tmp_path, key_mapping={'x': 'image'})
    with pytest.raises(KeyError, match="batch key 'image'"):
        exp.run(tasks.make_managers()[0])
    assert not os.path.exists(exp.output_dir)


def test_a_delira_script_runs_with_only_the_imports_changed(tmp_path):
    # Written as for Delira 0.4.1's BaseExperiment, positional arguments included.
    params = tasks.make_params(num_epochs=6)
    manager_train = BaseDataManager(tasks.LinearTask(96, seed=1), 16, 0, None, RandomSampler,
                                    {'seed': 0})
    manager_val = BaseDataManager(tasks.LinearTask(32, seed=2), 16, 0, None, SequentialSampler)
    manager_test = BaseDataManager(tasks.LinearTask(20, seed=3), 16, 0, None)
    experiment = ChainerExperiment(params, tasks.Regressor, 2, 'delira', str(tmp_path),
                                   {'x': 'data'}, 'MSE', create_optims_default_chainer, 1)
    model = experiment.run(manager_train, manager_val)
    preds, metrics = experiment.test(model, manager_test, {'MSE': numpy_mse}, None, False)
    outputs, fold_metrics = experiment.kfold(manager_train, {'MSE': numpy_mse}, 1, 2, True, 0,
                                             'random', 0.2, 'label')

    assert [row['epoch'] for row in read_log(os.path.join(str(tmp_path), 'delira'))] == [1, 2]
    reference = forward(model, manager_test.dataset.data)
    np.testing.assert_allclose(preds['pred'], reference, rtol=1e-6)
    assert metrics['MSE'] == pytest.approx(
        np.mean((reference - manager_test.dataset.labels) ** 2), rel=1e-5)
    assert sorted(outputs) == sorted(fold_metrics) == ['0', '1']
    assert sum(len(outputs[fold]['pred']) for fold in outputs) == 96


def test_n_epochs_overrides_num_epochs_of_the_parameters(tmp_path):
    experiment = ChainerExperiment(tasks.make_params(num_epochs=6), tasks.Regressor, 3,
                                   save_path=str(tmp_path))
    experiment.run(*tasks.make_managers(n_train=32))
    assert [row['epoch'] for row in read_log(experiment.output_dir)] == [1, 2, 3]


def test_n_epochs_stands_for_a_missing_num_epochs(tmp_path):
    params = tasks.make_params()
    del params.fixed_params['training']['num_epochs']
    experiment = ChainerExperiment(params, tasks.Regressor, n_epochs=1, save_path=str(tmp_path))
    experiment.run(*tasks.make_managers(n_train=32))
    assert [row['epoch'] for row in read_log(experiment.output_dir)] == [1]


def test_test_returns_all_predictions_and_dataset_level_metrics(tmp_path):
    experiment = ChainerExperiment(tasks.make_params(), tasks.Regressor, save_path=str(tmp_path))
    model = experiment.build_model()
    dataset = tasks.LinearTask(37)
    preds, metrics = experiment.test(model, BaseDataManager(dataset, 8, 0, None),
                                     {'MSE': numpy_mse})
    reference = forward(model, dataset.data)
    np.testing.assert_allclose(preds['pred'], reference, rtol=1e-6)
    assert metrics['MSE'] == pytest.approx(np.mean((reference - dataset.labels) ** 2), rel=1e-5)


def test_test_verbose_prints_its_progress(tmp_path, capsys):
    experiment = ChainerExperiment(tasks.make_params(), tasks.Regressor, save_path=str(tmp_path))
    experiment.test(experiment.build_model(), BaseDataManager(tasks.LinearTask(20), 8, 0, None),
                    {'MSE': numpy_mse}, verbose=True)
    assert '3/3 batches' in capsys.readouterr().err


def test_integer_labels_with_an_l1_loss_fail_saying_to_make_them_float(tmp_path):
    params = tasks.make_params(num_epochs=1, losses={'L1': F.mean_absolute_error})
    experiment = ChainerExperiment(params, tasks.Regressor, save_path=str(tmp_path))
    with pytest.raises(TypeError, match=r"loss 'L1'.*'label'.*int64.*numpy.float32"):
        experiment.run(BaseDataManager(IntegerLabels(32), 8, 0, None))


def test_run_leaves_no_worker_process_behind(tmp_path):
    # The validation manager keeps its workers between passes; the run ends them.
    import multiprocessing
    train, val = tasks.make_managers(n_train=64, n_val=32, n_process_augmentation=1)
    experiment(tmp_path, params=tasks.make_params(num_epochs=2)).run(train, val)
    assert multiprocessing.active_children() == []
    assert len(list(val)) == 1  # the manager still works, with new workers
    val.finalize()


# A loaded experiment runs no code its files choose, and writes only in its own folder.

def saved_experiment(tmp_path, edit):
    exp = ChainerExperiment(tasks.make_params(num_epochs=1), tasks.Regressor, name='exp',
                            save_path=str(tmp_path / 'runs'), seed=0)
    tasks.edit_saved_experiment(exp, edit)
    return exp.output_dir


def test_a_snapshot_extension_with_autoload_as_scheduler_is_refused(tmp_path):
    # Chainer's _Snapshot(autoload=True) would unpickle a planted file in the folder.
    def plant(saved):
        training = saved['params']['fixed_params']['training']
        training['lr_sched_cls'] = {'__object__': 'chainer.training.extensions._snapshot:_Snapshot'}
        training['lr_sched_params'] = {'autoload': True, 'filename': 'pwn{.updater.epoch}'}

    folder = saved_experiment(tmp_path, plant)
    marker = str(tmp_path / 'code_ran')
    with open(os.path.join(folder, 'pwn_payload'), 'wb') as stream:
        np.savez(stream, **{'updater/iterator:main/epoch': np.array(
            [MakesMarkerWhenUnpickled(marker)], dtype=object)})
    with pytest.raises(ValueError, match=r"lr_sched_cls.*_Snapshot"):
        ChainerExperiment.load(folder).run(*tasks.make_managers(n_train=64))
    assert not os.path.exists(marker)


def test_a_loaded_experiment_writes_in_the_folder_it_was_loaded_from(tmp_path):
    elsewhere = tmp_path / 'victim'

    def move(saved):
        saved['save_path'], saved['name'] = str(elsewhere), 'home'

    folder = saved_experiment(tmp_path, move)
    loaded = ChainerExperiment.load(folder)
    assert loaded.output_dir == os.path.abspath(folder)
    loaded.run(*tasks.make_managers(n_train=64))
    assert not elsewhere.exists()
    assert os.path.exists(os.path.join(folder, 'final_model.npz'))


@pytest.mark.parametrize('name', ['../..', '..', 'a/b', '/etc', '', 3])
def test_a_loaded_experiment_ignores_the_name_and_save_path_in_its_file(tmp_path, name):
    # A grid-search or k-fold run saved under "exp/grid_0" loads as well as a crafted "../..".
    folder = saved_experiment(
        tmp_path, lambda saved: saved.update(name=name, save_path='/somewhere/else'))
    loaded = ChainerExperiment.load(folder)
    assert os.path.realpath(loaded.output_dir) == os.path.realpath(folder)


def test_a_loaded_model_class_must_be_a_network(tmp_path):
    folder = saved_experiment(
        tmp_path, lambda saved: saved.update(model_cls='chainer.links.connection.linear:Linear'))
    with pytest.raises(ValueError, match=r"model_cls.*Linear.*closure and prepare_batch"):
        ChainerExperiment.load(folder)


def test_a_model_class_of_a_library_does_not_trust_the_library(tmp_path):
    # A network class defined in researchutils would otherwise trust all of researchutils.
    def plant(saved):
        saved['model_cls'] = ('researchutils.chainer.models.abstract_network:'
                              'AbstractChainerNetwork')
        saved['params']['fixed_params']['training']['losses'] = {
            'L': {'__object__': 'researchutils.chainer.serializers.npz:load_model'}}

    folder = saved_experiment(tmp_path, plant)
    with pytest.raises(ValueError, match=r"losses/L.*load_model"):
        ChainerExperiment.load(folder)


def test_a_fifo_named_like_a_snapshot_is_not_resumed_from(tmp_path):
    exp = ChainerExperiment(tasks.make_params(num_epochs=1), tasks.Regressor, name='exp',
                            save_path=str(tmp_path), seed=0)
    os.makedirs(exp.output_dir)
    os.mkfifo(os.path.join(exp.output_dir, 'snapshot_epoch_9'))
    open(os.path.join(exp.output_dir, 'snapshot_epoch_\u0669'), 'w').close()  # Arabic 9
    exp.run(*tasks.make_managers(n_train=64))
    with open(os.path.join(exp.output_dir, 'log')) as stream:
        assert [entry['epoch'] for entry in json.load(stream)] == [1]


SAME_SCRIPT = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})
    from researchutils.chainer.training import ChainerExperiment
    from tests.chainer.training import tasks

    class Net(tasks.Regressor):
        pass

    exp = ChainerExperiment(tasks.make_params(num_epochs=1), Net, name='exp',
                            save_path={folder!r}, seed=0)
    exp.save()
    print(ChainerExperiment.load(exp.output_dir, allowed_modules=['tests']).model_cls is Net)
''')


def test_a_model_class_of_the_running_script_loads_in_that_script(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    result = subprocess.run(
        [sys.executable, '-c', SAME_SCRIPT.format(root=root, folder=str(tmp_path))],
        capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == 'True', result.stderr


def test_a_model_class_missing_from_the_running_script_is_refused(tmp_path):
    folder = saved_experiment(tmp_path, lambda saved: saved.update(model_cls='__main__:Net'))
    with pytest.raises(ValueError, match=r"model_cls.*'__main__:Net'"):
        ChainerExperiment.load(folder)
