"""ChainerExperiment.kfold and .grid_search (training/_experiment/model_selection.py)."""
import inspect
import json
import math
import os
import threading
import time
import uuid
import warnings

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


def mse_of_label(pred, label, *other_entries):
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
        # One message per start, however long the command line it shows (a mutation
        # run's can name hundreds of mutants).
        report = SlackReport(server.client(), flush_timeout=5, max_message_chars=40000)
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


@pytest.mark.parametrize('options, word, said', [
    (dict(num_splits=True), 'num_splits', ()), (dict(num_splits=1), 'num_splits', ()),
    (dict(num_splits=17), 'num_splits', ('len(data.dataset)', '16')),
    (dict(num_splits=2, val_split=float('nan')), 'val_split', ()),
    (dict(num_splits=2, val_split=1.0), 'val_split', ('< 1',)),
    (dict(num_splits=2, val_split=0.0), 'val_split', ('> 0',)),
    (dict(num_splits=2, random_seed=-1), 'random_seed', ()),
    (dict(num_splits=2, shuffle='no'), 'shuffle', ()),
    (dict(num_splits=2, verbose=None), 'verbose', ()),
    (dict(num_splits=2, train_kwargs=[('batch_size', 2)]), 'train_kwargs',
     ("[('batch_size', 2)]",)),
    (dict(num_splits=2, test_kwargs={'batchsize': 2}), 'test_kwargs',
     ("['batchsize']", "'batch_size'")),
    (dict(num_splits=2, train_kwargs={'batch_size': 2, 'shufle': True}), 'train_kwargs',
     ("['shufle']", "'drop_last'")),
])
def test_bad_kfold_arguments_are_refused_before_training(tmp_path, options, word, said):
    # The message names the argument (a word of its own) and what is wrong with it.
    exp = experiment(tmp_path)
    with pytest.raises((TypeError, ValueError), match=r'\b{}\b'.format(word)) as raised:
        exp.kfold(DataManager(tasks.LinearTask(16), 4), {'MSE': tasks.mean_squared_error},
                  **options)
    for part in said:
        assert part in str(raised.value), raised.value
    assert not os.path.exists(exp.output_dir)


def test_kfold_cuts_ten_folds_unless_told(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    _, results = exp.kfold(DataManager(tasks.LinearTask(20), 4),
                           {'MSE': tasks.mean_squared_error}, val_split=None)
    assert sorted(results, key=int) == [str(fold) for fold in range(10)]


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
    with pytest.raises(TypeError, match='DataManager.*Grouped'):
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
    with pytest.warns(RuntimeWarning, match='grid_0.*diverged') as said, diverging():
        summary = exp.grid_search(*tasks.make_managers())
    # It names the combination's number and folder, and says what the run said.
    [message] = [str(warning.message) for warning in said if 'diverged' in str(warning.message)]
    assert 'combination 0 ' in message and os.path.join(exp.output_dir, 'grid_0') in message
    assert 'stop_on_non_number=False' in message, message
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

    def loss(self, pred, label, index, *other_entries):
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


class Parity(Indexed):
    """Indexed plus ``parity`` (``index % 2``), as an array of ``shape``."""

    def __init__(self, num_samples, shape):
        super().__init__(num_samples)
        self.shape = shape

    def __getitem__(self, index):
        return dict(super().__getitem__(index), parity=np.full(self.shape, index % 2))


def recorded_kfold(make_experiment, data, **options):
    """The examples each fold of a kfold trained, validated and tested on (IndexRecorder's
    folds), with kfold's predictions; ``make_experiment(params)`` gives the experiment."""
    recorder = IndexRecorder()
    params = tasks.make_params(num_epochs=1, losses={'MSE': recorder.loss},
                               val_metrics={'seen': recorder.val_metric},
                               val_metric_keys={'seen': ('index',)})
    exp = make_experiment(params)
    predictions, _ = exp.kfold(BaseDataManager(data, 4, 0, None),
                               {'seen': recorder.test_metric},
                               metric_keys={'seen': ('index',)}, **options)
    return recorder.folds(), predictions


@pytest.mark.parametrize('shape', [(), (1,), (1, 1)])
def test_an_unshuffled_stratified_kfold_deals_each_label_s_examples_in_dataset_order(
        tmp_path, shape):
    # Each label's examples in dataset order, dealt to the folds in turn: the evens 0, 4,
    # 8... and the odds 1, 5, 9... to fold 0. A label of one element counts as one label.
    folds, _ = recorded_kfold(lambda params: experiment(tmp_path, params),
                              Parity(40, shape), num_splits=2, split_type='stratified',
                              label_key='parity', val_split=None)
    assert [sorted(fold['test']) for fold in folds] == [
        [i for i in range(40) if i // 2 % 2 == fold] for fold in range(2)]


class OneOddExample(Grouped):
    """Grouped, but dataset[3] has no ``group`` (``odd="missing"``) or two (``"wide"``)."""

    def __init__(self, num_samples, odd):
        super().__init__(num_samples)
        self.odd = odd

    def __getitem__(self, index):
        example = super().__getitem__(index)
        if index == 3 and self.odd == 'missing':
            del example['group']
        if index == 3 and self.odd == 'wide':
            example['group'] = np.zeros(2, np.int32)
        return example


def stratified_kfold_on(tmp_path, odd, label_key):
    grouped_experiment(tmp_path).kfold(BaseDataManager(OneOddExample(30, odd), 8, 0, None),
                                       {'share': share_of_group_1}, split_type='stratified',
                                       label_key=label_key)


@pytest.mark.parametrize('label_key, names', [('group', ("dataset[3]['group']", '(2,)')),
                                              ('data', ("dataset[0]['data']", '(4,)'))])
def test_a_stratified_kfold_names_the_example_whose_label_is_not_one_value(tmp_path,
                                                                          label_key, names):
    with pytest.raises(ValueError) as raised:
        stratified_kfold_on(tmp_path, 'wide', label_key)
    for name in names:
        assert name in str(raised.value), raised.value
    assert not os.path.exists(os.path.join(str(tmp_path), 'grouped'))


def test_a_stratified_kfold_names_the_example_without_the_label_key_and_its_keys(tmp_path):
    with pytest.raises(KeyError) as raised:
        stratified_kfold_on(tmp_path, 'missing', 'group')
    message = raised.value.args[0]
    assert "'group'" in message and "dataset[3] has the keys ['data', 'label']" in message, \
        message


@pytest.mark.parametrize('params, error, named', [
    (Parameters({}, {'model': {'num_hidden': [4, 8]}}), ValueError, 'model/num_hidden'),
    ({'model': {'num_hidden': 4}}, TypeError, 'dict'),
])
def test_kfold_params_that_do_not_make_one_experiment_are_refused_naming_why(
        tmp_path, params, error, named):
    # Variable parameters are the grid's, not a fold's: merged in, they are refused.
    with pytest.raises(error, match=named):
        experiment(tmp_path).kfold(DataManager(tasks.LinearTask(16), 4),
                                   {'MSE': tasks.mean_squared_error}, num_splits=2,
                                   val_split=None, params=params)


def test_kfold_random_seed_seeds_the_splits_and_a_seedless_experiment_s_weights(tmp_path):
    # The shuffle, the validation parts, and the folds' initial weights of an experiment
    # without a seed: the same as those of an experiment seeded with random_seed.
    def run(folder, random_seed, seed=None):
        return recorded_kfold(lambda params: experiment(tmp_path / folder, params, seed=seed),
                              Indexed(20), num_splits=2, shuffle=True,
                              random_seed=random_seed, val_split=0.25)

    first, first_predictions = run('first', 3)
    seeded, seeded_predictions = run('seeded', 3, seed=3)
    other, _ = run('other', 4)
    assert first == seeded
    for fold in '01':
        np.testing.assert_array_equal(first_predictions[fold]['pred'],
                                      seeded_predictions[fold]['pred'])
    assert [fold['test'] for fold in first] != [fold['test'] for fold in other]
    assert [fold['val'] for fold in first] != [fold['val'] for fold in other]
    # Shuffled: the test parts are not the two halves.
    assert sorted(first[0]['test']) not in (list(range(10)), list(range(10, 20)))


def test_kfold_without_val_split_trains_an_experiment_that_has_a_val_score_key(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key='MSE')
    _, results = exp.kfold(DataManager(tasks.LinearTask(16), 4),
                           {'MSE': tasks.mean_squared_error}, num_splits=2, val_split=None)
    assert sorted(results) == ['0', '1']
    assert 'val/MSE' not in read_log(os.path.join(exp.output_dir, 'fold_0'))[0]


def test_kfold_without_num_epochs_trains_the_experiment_s_n_epochs(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1), n_epochs=2)
    exp.kfold(DataManager(tasks.LinearTask(16), 4), {'MSE': tasks.mean_squared_error},
              num_splits=2, val_split=None)
    for fold in range(2):
        log = read_log(os.path.join(exp.output_dir, 'fold_{}'.format(fold)))
        assert [row['epoch'] for row in log] == [1, 2]


@pytest.mark.parametrize('verbose', [True, False])
def test_kfold_verbose_shows_each_fold_s_test_progress_on_stderr(tmp_path, capfd, verbose):
    experiment(tmp_path, tasks.make_params(num_epochs=1)).kfold(
        DataManager(tasks.LinearTask(16), 4), {'MSE': tasks.mean_squared_error}, num_splits=2,
        val_split=None, verbose=verbose)
    progress = capfd.readouterr().err.count('predicting: 2/2 batches')
    assert progress == (2 if verbose else 0)


def test_kfold_validates_on_one_example_when_val_split_picks_one(tmp_path):
    # 10 examples in 2 folds: 5 to train on, of which ceil(0.2 * 5) = 1 validates.
    folds, _ = recorded_kfold(lambda params: experiment(tmp_path, params),
                              Indexed(10), num_splits=2, val_split=0.2)
    assert [(len(fold['train']), len(fold['val'])) for fold in folds] == [(4, 1), (4, 1)]


def alpha_grid(num_epochs=1, alphas=(0.0, 0.02), **training):
    params = tasks.make_params(
        num_epochs=num_epochs, variable={'training': {'optimizer_params': {'alpha': list(alphas)}}},
        **training)
    del params.fixed_params['training']['optimizer_params']
    return params


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize('mode', ['kfold', 'grid_search'])
def test_each_fold_or_combination_is_tracked_as_its_own_run_of_the_experiment(
        tmp_path, mlflow_server, mode):
    # In the experiment's MLflow experiment (named after it), one run per fold or
    # combination, named after its folder; TensorBoard files in each folder.
    mlflow = pytest.importorskip('mlflow')
    name = 'exp-' + uuid.uuid4().hex[:8]
    exp = ChainerExperiment(alpha_grid() if mode == 'grid_search' else
                            tasks.make_params(num_epochs=1), tasks.Regressor, name=name,
                            save_path=str(tmp_path), val_score_key='MSE', seed=0,
                            tracking={'tensorboard': True, 'mlflow': mlflow_server.url})
    train, val = tasks.make_managers(n_train=32, n_val=16)
    if mode == 'kfold':
        exp.kfold(train, {'MSE': tasks.mean_squared_error}, num_splits=2, val_split=0.25)
        runs = ['fold_0', 'fold_1']
    else:
        exp.grid_search(train, val)
        runs = ['grid_0', 'grid_1']
    client = mlflow.MlflowClient(mlflow_server.url)
    found = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert sorted(run.info.run_name for run in found) == runs
    for run in runs:
        assert os.listdir(os.path.join(exp.output_dir, run, 'tensorboard'))


def test_grid_search_trains_each_combination_in_a_folder_of_the_experiment(tmp_path):
    exp = experiment(tmp_path, alpha_grid(), val_score_key='MSE')
    summary = exp.grid_search(*tasks.make_managers(n_train=32, n_val=16))
    assert sorted(os.listdir(exp.output_dir)) == ['grid_0', 'grid_1', 'grid_search.json']
    for k, (_, score) in enumerate(summary['results']):
        log = read_log(os.path.join(exp.output_dir, 'grid_{}'.format(k)))
        assert log[-1]['val/MSE'] == pytest.approx(score, rel=1e-6)
    saved = read_strict_json(os.path.join(exp.output_dir, 'grid_search.json'))
    assert saved['val_score_key'] == 'MSE'
    assert [result['choice'] for result in saved['results']] == [
        {'training/optimizer_params/alpha': 0.0}, {'training/optimizer_params/alpha': 0.02}]


@pytest.mark.parametrize('val_score_key, with_val', [(None, True), ('MSE', False)])
def test_grid_search_without_a_score_to_compare_is_refused_before_training(
        tmp_path, val_score_key, with_val):
    exp = experiment(tmp_path, alpha_grid(), val_score_key=val_score_key)
    train, val = tasks.make_managers(n_train=32, n_val=16)
    with pytest.raises(ValueError, match='val_score_key'):
        exp.grid_search(train, val if with_val else None)
    assert not os.path.exists(exp.output_dir)


class Inputs(tasks.LinearTask):
    """LinearTask whose inputs are also under ``inputs``, and negated under ``data``."""

    def __getitem__(self, index):
        example = super().__getitem__(index)
        return dict(example, inputs=example['data'], data=-example['data'])


def test_grid_search_scores_through_the_experiment_s_key_mapping(tmp_path):
    # The score is the validation's: the model reads "inputs", not "data".
    exp = experiment(tmp_path, alpha_grid(losses={'MSE': mse_of_label}), val_score_key='MSE',
                     key_mapping={'x': 'inputs'})
    train = DataManager(Inputs(32, seed=1), 16)
    summary = exp.grid_search(train, DataManager(Inputs(16, seed=2), 16))
    for k, (_, score) in enumerate(summary['results']):
        log = read_log(os.path.join(exp.output_dir, 'grid_{}'.format(k)))
        assert score == pytest.approx(log[-1]['val/MSE'], rel=1e-6)


def test_grid_search_scores_with_the_val_metric_keys(tmp_path):
    params = alpha_grid(losses={'MSE': mse_of_label}, val_metrics={'share': share_of_group_1},
                        val_metric_keys={'share': ('group',)})
    exp = ChainerExperiment(params, tasks.Regressor, name='grouped', save_path=str(tmp_path),
                            val_score_key='share', seed=0)
    train = BaseDataManager(Grouped(30), 8, 0, None)
    summary = exp.grid_search(train, BaseDataManager(Grouped(9), 8, 0, None))
    assert [score for _, score in summary['results']] == pytest.approx([1 / 3, 1 / 3])


@pytest.mark.timeout(120)
@pytest.mark.parametrize('mode', ['kfold', 'grid_search'])
def test_a_selection_on_a_held_folder_waits_for_its_owner_as_wait_for_folder_says(
        tmp_path, mode):
    from tests.chainer.training.test_ownership import _end, _start_holder
    params = alpha_grid() if mode == 'grid_search' else tasks.make_params(num_epochs=1)
    exp = experiment(tmp_path, params, val_score_key='MSE', wait_for_folder=60)
    train, val = tasks.make_managers(n_train=32, n_val=16)
    owner = _start_holder(exp.output_dir)

    def end_the_owner_once_waited_for(said):
        while not said and owner.poll() is None:  # ended: the selection did not wait
            time.sleep(0.005)
        owner.stdin.close()

    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter('always')
            ender = threading.Thread(target=end_the_owner_once_waited_for, args=(said,))
            ender.start()
            if mode == 'kfold':
                exp.kfold(train, {'MSE': tasks.mean_squared_error}, num_splits=2)
            else:
                exp.grid_search(train, val)
            ender.join()
    finally:
        _end(owner)
    assert owner.returncode == 0
    assert any('waiting up to 60 s' in str(warning.message) for warning in said), said


@pytest.mark.parametrize('random_seed', [0, 1, 2])
def test_kfold_stratified_val_split_gives_every_validation_part_the_label_shares(
        tmp_path, random_seed):
    # Each training part is 20 of group 0 and 10 of group 1: 6 validate, 2 of them group 1.
    experiment = grouped_experiment(tmp_path)
    experiment.kfold(BaseDataManager(Grouped(60), 8, 0, None), {'share': share_of_group_1},
                     num_splits=2, split_type='stratified', label_key='group',
                     metric_keys={'share': ('group',)}, val_split=0.2,
                     random_seed=random_seed)
    for fold in range(2):
        log = read_log(os.path.join(experiment.output_dir, 'fold_{}'.format(fold)))
        assert log[0]['val/share'] == pytest.approx(1 / 3), log
