"""ChainerExperiment.kfold and .grid_search (training/_experiment/model_selection.py)."""
import inspect
import json
import math
import os

import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer.data_loading import BaseDataManager, DataManager, RandomSampler
from researchutils.chainer.training import ChainerExperiment, Parameters, from_json_value
from tests.chainer.training import search_tasks, tasks
from tests.chainer.training.tasks import experiment, forward, read_log, val_mse


class Grouped(tasks.LinearTask):
    """LinearTask plus an integer ``group``: the first two thirds 0, the last third 1."""

    def __getitem__(self, index):
        return dict(super().__getitem__(index), group=np.int32(3 * index >= 2 * len(self)))


def mse_of_label(pred, label, group):
    return F.mean_squared_error(pred, label)


def share_of_group_1(group):
    return float(np.mean(group == 1))


def grouped_experiment(tmp_path, **training):
    params = tasks.make_params(num_epochs=1, losses={'MSE': mse_of_label},
                               val_metrics={'share': share_of_group_1},
                               val_metric_keys={'share': ('group',)}, **training)
    return ChainerExperiment(params, tasks.Regressor, name='grouped', save_path=str(tmp_path),
                             seed=0)


def grid_with_a_diverging_first_combination():
    # Adam moves every weight by about alpha per step: with 1e30 the outputs overflow at once.
    params = tasks.make_params(
        num_epochs=2, variable={'training': {'optimizer_params': {'alpha': [1e30,
                                                                           0.02]}}})
    del params.fixed_params['training']['optimizer_params']
    return params


def read_strict_json(path):
    def refuse(constant):
        raise ValueError('not strict JSON: {}'.format(constant))

    with open(path) as stream:
        return json.load(stream, parse_constant=refuse)


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


@pytest.mark.parametrize('options, word', [
    (dict(num_splits=True), 'num_splits'), (dict(num_splits=1), 'num_splits'),
    (dict(num_splits=2, val_split=float('nan')), 'val_split'),
    (dict(num_splits=2, val_split=1.0), 'val_split'),
    (dict(num_splits=2, random_seed=-1), 'random_seed'),
    (dict(num_splits=2, shuffle='no'), 'shuffle'),
    (dict(num_splits=2, verbose=None), 'verbose'),
])
def test_bad_kfold_arguments_are_refused_before_training(tmp_path, options, word):
    exp = experiment(tmp_path)
    with pytest.raises((TypeError, ValueError), match=word):
        exp.kfold(DataManager(tasks.LinearTask(16), 4), {'MSE': tasks.mean_squared_error},
                  **options)
    assert not os.path.exists(exp.output_dir)


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


def diverging():
    """What training with a learning rate of 1e30 computes: inf and NaN, on purpose."""
    return np.errstate(over='ignore', invalid='ignore')


def test_a_nan_score_never_wins_the_grid_search(tmp_path):
    exp = experiment(tmp_path, grid_with_a_diverging_first_combination(), val_score_key='MSE',
                     stop_on_non_number=False)
    with diverging():
        summary = exp.grid_search(*tasks.make_managers())
    assert summary['best_params'].choice == {'training/optimizer_params/alpha': 0.02}
    assert math.isfinite(summary['best_score'])
    assert math.isnan(summary['results'][0][1])


def test_grid_search_scores_a_stopped_combination_nan_and_goes_on(tmp_path):
    exp = experiment(tmp_path, grid_with_a_diverging_first_combination(), val_score_key='MSE')
    with pytest.warns(RuntimeWarning, match='grid_0.*diverged'), diverging():
        summary = exp.grid_search(*tasks.make_managers())
    assert math.isnan(summary['results'][0][1])
    assert summary['best_params'].choice == {'training/optimizer_params/alpha': 0.02}


def test_grid_search_json_is_strict_with_null_for_a_nan_score(tmp_path):
    exp = experiment(tmp_path, grid_with_a_diverging_first_combination(), val_score_key='MSE',
                     stop_on_non_number=False)
    with diverging():
        summary = exp.grid_search(*tasks.make_managers())
    saved = read_strict_json(os.path.join(exp.output_dir, 'grid_search.json'))
    assert [result['score'] for result in saved['results']] == [None, summary['best_score']]
    assert saved['best_score'] == summary['best_score']


def test_grid_search_json_is_strict_for_infinite_scores_and_candidates(tmp_path):
    params = tasks.make_params(num_epochs=1, val_metrics={'MSE': search_tasks.mse_or_inf},
                               variable={'model': {'marker': [math.nan, math.inf]}})
    exp = ChainerExperiment(params, search_tasks.MarkedRegressor, name='exp',
                            save_path=str(tmp_path), val_score_key='MSE', seed=0)
    summary = exp.grid_search(*tasks.make_managers(n_train=64, n_val=32))
    assert summary['results'][0][1] == math.inf  # the NaN marker's model is 100 off
    saved = read_strict_json(os.path.join(exp.output_dir, 'grid_search.json'))
    assert [result['score'] for result in saved['results']] == [None, summary['best_score']]
    assert saved['results'][0]['choice'] == {'model/marker': {'__float__': 'nan'}}
    assert saved['best_choice'] == {'model/marker': {'__float__': 'inf'}}
    assert from_json_value(saved['best_choice']) == {'model/marker': math.inf}


def test_a_grid_where_every_score_is_nan_has_no_best(tmp_path):
    params = tasks.make_params(
        num_epochs=1, variable={'training': {'optimizer_params': {'alpha': [1e30,
                                                                           1e30]}}})
    del params.fixed_params['training']['optimizer_params']
    exp = experiment(tmp_path, params, val_score_key='MSE', stop_on_non_number=False)
    with diverging():
        summary = exp.grid_search(*tasks.make_managers())
    assert summary['best_params'] is None and math.isnan(summary['best_score'])
    saved = read_strict_json(os.path.join(exp.output_dir, 'grid_search.json'))
    assert saved['best_choice'] is None and saved['best_score'] is None


class Indexed(tasks.LinearTask):
    """LinearTask whose examples also carry their own ``index``."""

    def __getitem__(self, index):
        return dict(super().__getitem__(index), index=np.int64(index))


class IndexRecorder(object):
    """Loss and metrics that record which example indices each role saw, in call order."""

    def __init__(self):
        self.events = []  # (role, indices)

    def _record(self, role, index):
        self.events.append((role, set(np.asarray(getattr(index, 'array', index)).tolist())))

    def loss(self, pred, label, index):
        self._record('train', index)
        return F.mean_squared_error(pred, label)

    def val_metric(self, index):
        self._record('val', index)
        return 0.0

    def test_metric(self, index):
        self._record('test', index)
        return 0.0

    def folds(self):
        """Per fold (a fold ends with its test predictions): the indices of each role."""
        folds, current = [], {'train': set(), 'val': set(), 'test': set()}
        for number, (role, indices) in enumerate(self.events):
            current[role] |= indices
            following = self.events[number + 1][0] if number + 1 < len(self.events) else None
            if role == 'test' and following != 'test':
                folds.append(current)
                current = {'train': set(), 'val': set(), 'test': set()}
        return folds


@pytest.mark.parametrize('split_type, shuffle', [('random', False), ('random', True),
                                                 ('stratified', True)])
def test_kfold_trains_validates_and_tests_each_fold_on_disjoint_examples(tmp_path, split_type,
                                                                         shuffle):
    recorder = IndexRecorder()
    params = tasks.make_params(num_epochs=1, losses={'MSE': recorder.loss},
                               val_metrics={'seen': recorder.val_metric},
                               val_metric_keys={'seen': ('index',)})
    exp = experiment(tmp_path, params)
    size, num_splits = 30, 3
    exp.kfold(BaseDataManager(Indexed(size), 4, 0, None), {'seen': recorder.test_metric},
              num_splits=num_splits, shuffle=shuffle, random_seed=3, split_type=split_type,
              label_key='index',
              val_split=0.25, metric_keys={'seen': ('index',)})
    folds = recorder.folds()
    assert len(folds) == num_splits
    for fold in folds:
        train, val, test = fold['train'], fold['val'], fold['test']
        assert train and val and test
        assert not train & val and not train & test and not val & test, fold
        assert train | val | test == set(range(size))
        assert len(val) == int(np.ceil(0.25 * (size - len(test))))
    # Every example is tested exactly once over the folds.
    assert sorted(i for fold in folds for i in fold['test']) == list(range(size))


def test_kfold_val_split_that_leaves_no_training_example_is_refused_before_training(tmp_path):
    exp = experiment(tmp_path)
    # 10 examples in 2 folds: 5 to train on, and ceil(0.9 * 5) = 5 of them would validate.
    with pytest.raises(ValueError, match=r'val_split=0.9 of a training part of 5 examples '
                                         r'leaves 0 to train on'):
        exp.kfold(DataManager(tasks.LinearTask(10), 4), {'MSE': tasks.mean_squared_error},
                  num_splits=2, val_split=0.9)
    assert not os.path.exists(exp.output_dir)


def test_kfold_takes_delira_positional_arguments_up_to_label_key_then_keywords_only():
    # A Delira script passes data, metrics, num_epochs, ..., label_key by position
    # (test_experiment.py's Delira script); the managers' settings come by keyword.
    parameters = inspect.signature(ChainerExperiment.kfold).parameters.values()
    assert [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD] == [
        'self', 'data', 'metrics', 'num_epochs', 'num_splits', 'shuffle', 'random_seed',
        'split_type', 'val_split', 'label_key']
    assert [p.name for p in parameters if p.kind is p.KEYWORD_ONLY] == [
        'train_kwargs', 'metric_keys', 'test_kwargs', 'params', 'verbose']


def test_kfold_refuses_a_manager_setting_by_position(tmp_path):
    with pytest.raises(TypeError, match='positional'):
        experiment(tmp_path).kfold(DataManager(tasks.LinearTask(16), 4),
                                   {'MSE': tasks.mean_squared_error}, 1, 2, False, 0,
                                   'random', 0.2, 'label', {'batch_size': 2})
