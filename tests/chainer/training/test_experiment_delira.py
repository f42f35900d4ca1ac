"""ChainerExperiment called as a Delira 0.4.1 user calls BaseExperiment: init, test, kfold."""
import json
import os

import chainer
import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer.data_loading import BaseDataManager, RandomSampler, SequentialSampler
from researchutils.chainer.training import (
    ChainerExperiment,
    Parameters,
    create_optims_default_chainer,
)
from tests.chainer.training import tasks


class Grouped(tasks.LinearTask):
    """LinearTask plus an integer ``group``: the first two thirds 0, the last third 1."""

    def __getitem__(self, index):
        return dict(super().__getitem__(index), group=np.int32(3 * index >= 2 * len(self)))


def mse_of_label(pred, label, group):
    return F.mean_squared_error(pred, label)


def share_of_group_1(group):
    return float(np.mean(group == 1))


def numpy_mse(pred, label):
    return float(np.mean((pred - label) ** 2))


def read_log(folder):
    with open(os.path.join(folder, 'log')) as stream:
        return json.load(stream)


def forward(model, data):
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        return model.forward(data)['pred'].array


def grouped_experiment(tmp_path, **training):
    params = tasks.make_params(num_epochs=1, losses={'MSE': mse_of_label},
                               val_metrics={'share': share_of_group_1},
                               val_metric_keys={'share': ('group',)}, **training)
    return ChainerExperiment(params, tasks.Regressor, name='grouped', save_path=str(tmp_path),
                             seed=0)


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


def test_name_and_save_path_default_to_unnamed_experiment_in_the_working_directory(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiment = ChainerExperiment(tasks.make_params(), tasks.Regressor)
    assert experiment.output_dir == os.path.join(str(tmp_path), 'UnnamedExperiment')


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


def test_a_name_where_delira_puts_n_epochs_is_refused_with_the_order(tmp_path):
    with pytest.raises(TypeError, match="n_epochs.*'exp'.*keyword"):
        ChainerExperiment(tasks.make_params(), tasks.Regressor, 'exp', str(tmp_path))


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


def test_kfold_gives_predictions_and_metrics_per_fold_keyed_by_fold_number(tmp_path):
    experiment = grouped_experiment(tmp_path)
    data = BaseDataManager(Grouped(30), 8, 0, None)
    outputs, metrics = experiment.kfold(data, {'share': share_of_group_1}, num_splits=3,
                                        metric_keys={'share': ('group',)}, val_split=None)
    assert sorted(outputs) == sorted(metrics) == ['0', '1', '2']
    assert [len(outputs[fold]['pred']) for fold in '012'] == [10, 10, 10]
    # Unshuffled random folds are contiguous: the last third is group 1.
    assert [metrics[fold]['share'] for fold in '012'] == [0.0, 0.0, 1.0]
    assert sorted(os.listdir(experiment.output_dir)) == ['fold_0', 'fold_1', 'fold_2']


def test_kfold_stratified_test_folds_keep_the_label_shares(tmp_path):
    experiment = grouped_experiment(tmp_path)
    data = BaseDataManager(Grouped(60), 8, 0, None)
    _, metrics = experiment.kfold(data, {'share': share_of_group_1}, num_splits=3,
                                  split_type='stratified', label_key='group',
                                  metric_keys={'share': ('group',)}, val_split=None)
    for fold in '012':
        assert abs(metrics[fold]['share'] - 1 / 3) <= 1 / 20 + 1e-9, metrics


def test_kfold_stratified_val_split_keeps_the_label_shares(tmp_path):
    experiment = grouped_experiment(tmp_path)
    data = BaseDataManager(Grouped(60), 8, 0, None)
    experiment.kfold(data, {'share': share_of_group_1}, num_splits=3, split_type='stratified',
                     label_key='group', metric_keys={'share': ('group',)}, val_split=0.25,
                     random_seed=4)
    for fold in range(3):
        log = read_log(os.path.join(experiment.output_dir, 'fold_{}'.format(fold)))
        assert log[0]['val/share'] in (0.3, 0.4), log  # 3 or 4 of the 10 validation examples


def test_kfold_unknown_split_type_is_refused_before_training(tmp_path):
    experiment = grouped_experiment(tmp_path)
    with pytest.raises(ValueError, match="split_type.*'shuffled'"):
        experiment.kfold(BaseDataManager(Grouped(30), 8, 0, None), {'share': share_of_group_1},
                         split_type='shuffled')
    assert not os.path.exists(experiment.output_dir)


def test_kfold_stratified_on_a_missing_label_key_names_it(tmp_path):
    experiment = grouped_experiment(tmp_path)
    with pytest.raises(KeyError, match='label_key.*class'):
        experiment.kfold(BaseDataManager(Grouped(30), 8, 0, None), {'share': share_of_group_1},
                         split_type='stratified', label_key='class')


def test_kfold_takes_a_data_manager(tmp_path):
    experiment = grouped_experiment(tmp_path)
    with pytest.raises(TypeError, match='DataManager'):
        experiment.kfold(Grouped(30), {'share': share_of_group_1})


def test_kfold_num_epochs_overrides_the_experiment(tmp_path):
    experiment = grouped_experiment(tmp_path)
    experiment.kfold(BaseDataManager(Grouped(30), 8, 0, None), {'share': share_of_group_1},
                     num_epochs=2, num_splits=2, metric_keys={'share': ('group',)})
    for fold in range(2):
        log = read_log(os.path.join(experiment.output_dir, 'fold_{}'.format(fold)))
        assert [row['epoch'] for row in log] == [1, 2]


def test_kfold_train_kwargs_and_test_kwargs_change_the_fold_managers(tmp_path):
    def add_flag(batch):
        return dict(batch, flag=np.ones(len(batch['data'])))

    experiment = grouped_experiment(tmp_path)
    _, metrics = experiment.kfold(
        BaseDataManager(Grouped(30), 8, 0, None), {'flag': lambda flag: float(flag.mean())},
        num_splits=2, val_split=None, metric_keys={'flag': ('flag',)},
        train_kwargs={'batch_size': 5}, test_kwargs={'transforms': add_flag})
    assert metrics['0']['flag'] == metrics['1']['flag'] == 1.0
    log = read_log(os.path.join(experiment.output_dir, 'fold_0'))
    assert log[0]['iteration'] == 3  # 15 training examples in batches of 5


def test_kfold_takes_delira_names_of_the_manager_settings(tmp_path):
    experiment = grouped_experiment(tmp_path)
    seen = []

    class Recording(RandomSampler):
        def epoch_order(self, epoch):
            order = super().epoch_order(epoch)
            seen.append((self.seed, len(order)))
            return order

    experiment.kfold(BaseDataManager(Grouped(30), 8, 0, None), {'share': share_of_group_1},
                     num_splits=2, val_split=None, metric_keys={'share': ('group',)},
                     train_kwargs={'sampler': Recording, 'sampling_kwargs': {'seed': 3}})
    assert (3, 15) in seen


def test_kfold_params_are_merged_into_the_experiment_parameters(tmp_path):
    experiment = grouped_experiment(tmp_path)
    more = Parameters({'training': {'optimizer_params': {'alpha': 0.0}}})
    untrained = experiment.build_model()
    outputs, _ = experiment.kfold(BaseDataManager(Grouped(20), 8, 0, None),
                                  {'share': share_of_group_1}, num_splits=2, val_split=None,
                                  metric_keys={'share': ('group',)}, params=more)
    # alpha 0: the folds' models keep the initial weights (same seed).
    np.testing.assert_allclose(outputs['0']['pred'], forward(untrained, Grouped(20).data[:10]),
                               rtol=1e-6)


def test_save_and_load_keep_n_epochs(tmp_path):
    experiment = ChainerExperiment(tasks.make_params(), tasks.Regressor, 2, 'saved',
                                   str(tmp_path))
    loaded = ChainerExperiment.load(experiment.save())
    assert (loaded.n_epochs, loaded.name, loaded.save_path) == (2, 'saved', str(tmp_path))


class IntegerLabels(tasks.LinearTask):
    def __getitem__(self, index):
        example = super().__getitem__(index)
        return dict(example, label=np.rint(example['label']).astype(np.int64))


def test_integer_labels_with_an_l1_loss_fail_saying_to_make_them_float(tmp_path):
    params = tasks.make_params(num_epochs=1, losses={'L1': F.mean_absolute_error})
    experiment = ChainerExperiment(params, tasks.Regressor, save_path=str(tmp_path))
    with pytest.raises(TypeError, match=r"loss 'L1'.*'label'.*int64.*numpy.float32"):
        experiment.run(BaseDataManager(IntegerLabels(32), 8, 0, None))
