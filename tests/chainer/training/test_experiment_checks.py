"""ChainerExperiment: arguments checked at construction, and training that diverges.

Kept apart from test_experiment.py, which covers training, resuming and saving.
"""
import json
import math
import os

import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer import serializers
from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training import ChainerExperiment
from tests.chainer.training import tasks

ITERATIONS_PER_EPOCH = 256 // 32  # tasks.make_managers()


def experiment(tmp_path, params=None, **kwargs):
    kwargs.setdefault('seed', 0)
    return ChainerExperiment(params or tasks.make_params(), tasks.Regressor, name='exp',
                             save_path=str(tmp_path), **kwargs)


class MeanSquaredErrorThenNaN(object):
    """The MSE loss, which turns NaN from its call ``first_nan_call`` (counted from 1) on."""

    def __init__(self, first_nan_call):
        self.first_nan_call = first_nan_call
        self.calls = 0

    def __call__(self, pred, label):
        self.calls += 1
        loss = F.mean_squared_error(pred, label)
        return loss * np.float32('nan') if self.calls >= self.first_nan_call else loss


def diverging_params(first_nan_call, num_epochs=3, **training):
    return tasks.make_params(num_epochs=num_epochs,
                             losses={'MSE': MeanSquaredErrorThenNaN(first_nan_call)}, **training)


def all_finite(model):
    return all(np.isfinite(param.array).all() for param in model.params())


# --- arguments ----------------------------------------------------------------------------------

@pytest.mark.parametrize('seed, error', [(-1, ValueError), (2 ** 32, ValueError),
                                         ('abc', TypeError), (1.5, TypeError),
                                         (True, TypeError)])
def test_a_bad_seed_is_refused_at_construction_naming_it(tmp_path, seed, error):
    with pytest.raises(error, match='seed') as info:
        experiment(tmp_path, seed=seed)
    assert repr(seed) in str(info.value)


def test_a_numpy_integer_seed_is_taken(tmp_path):
    assert experiment(tmp_path, seed=np.int64(7)).seed == 7


@pytest.mark.parametrize('gpu_ids', [True, 1.0, [True], [0.5], [-1]])
def test_gpu_ids_that_name_no_device_are_refused_naming_gpu_ids(tmp_path, gpu_ids):
    with pytest.raises((TypeError, ValueError), match='gpu_ids'):
        experiment(tmp_path, gpu_ids=gpu_ids)


def test_gpu_ids_of_one_int_is_that_one_device_never_the_cpu(tmp_path):
    try:
        exp = experiment(tmp_path, gpu_ids=0)
    except ValueError as error:  # no CUDA here: the device is named, not replaced by the CPU
        assert 'gpu_ids' in str(error) and '0' in str(error)
    else:
        assert exp.gpu_ids == [0]
        assert exp.build_model().device.xp is not np


@pytest.mark.parametrize('patience', [True, 0, 1.5, '2'])
def test_a_bad_early_stopping_patience_is_refused(tmp_path, patience):
    with pytest.raises((TypeError, ValueError), match='early_stopping_patience'):
        experiment(tmp_path, tasks.make_params(early_stopping_patience=patience),
                   val_score_key='MSE')


@pytest.mark.parametrize('num_epochs', [True, 0, 2.0])
def test_a_bad_num_epochs_is_refused(tmp_path, num_epochs):
    with pytest.raises((TypeError, ValueError), match='num_epochs'):
        experiment(tmp_path, tasks.make_params(num_epochs=num_epochs))


@pytest.mark.parametrize('checkpoint_freq', [True, 0, 1.0])
def test_a_bad_checkpoint_freq_is_refused(tmp_path, checkpoint_freq):
    with pytest.raises((TypeError, ValueError), match='checkpoint_freq'):
        experiment(tmp_path, checkpoint_freq=checkpoint_freq)


@pytest.mark.parametrize('options, word', [
    (dict(num_splits=True), 'num_splits'), (dict(num_splits=1), 'num_splits'),
    (dict(num_splits=2, val_split=float('nan')), 'val_split'),
    (dict(num_splits=2, val_split=1.0), 'val_split'),
    (dict(num_splits=2, random_seed=-1), 'random_seed'),
])
def test_bad_kfold_arguments_are_refused_before_training(tmp_path, options, word):
    exp = experiment(tmp_path)
    with pytest.raises((TypeError, ValueError), match=word):
        exp.kfold(DataManager(tasks.LinearTask(16), 4), {'MSE': tasks.mean_squared_error},
                  **options)
    assert not os.path.exists(exp.output_dir)


# --- training that diverges --------------------------------------------------------------------

def test_a_nan_loss_stops_the_run_naming_epoch_and_iteration(tmp_path):
    first_nan = ITERATIONS_PER_EPOCH + 3
    exp = experiment(tmp_path, diverging_params(first_nan), val_score_key='MSE')
    with pytest.raises(RuntimeError, match='iteration {} .epoch 2'.format(first_nan)) as info:
        exp.run(*tasks.make_managers())
    assert 'stop_on_non_number' in str(info.value)
    assert 'main/MSE=nan' in str(info.value)


def test_a_stopped_run_keeps_the_last_good_snapshot_and_best_model(tmp_path):
    exp = experiment(tmp_path, diverging_params(2 * ITERATIONS_PER_EPOCH + 3),
                     val_score_key='MSE')
    with pytest.raises(RuntimeError):
        exp.run(*tasks.make_managers())
    files = sorted(os.listdir(exp.output_dir))
    assert 'snapshot_epoch_2' in files and 'snapshot_epoch_3' not in files
    best = serializers.load_model(os.path.join(exp.output_dir, 'best_model.npz'),
                                  exp.build_model())
    assert all_finite(best)
    with open(os.path.join(exp.output_dir, 'log')) as stream:
        assert [entry['epoch'] for entry in json.load(stream)] == [1, 2]


def test_stop_on_non_number_false_trains_every_epoch(tmp_path):
    exp = experiment(tmp_path, diverging_params(ITERATIONS_PER_EPOCH + 3),
                     stop_on_non_number=False)
    model = exp.run(*tasks.make_managers())
    assert exp.trainer.updater.epoch == 3
    assert not all_finite(model)


def test_stop_on_non_number_must_be_a_flag(tmp_path):
    with pytest.raises(TypeError, match='stop_on_non_number'):
        experiment(tmp_path, stop_on_non_number='no')


# --- grid_search and NaN scores ----------------------------------------------------------------

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


def test_a_nan_score_never_wins_the_grid_search(tmp_path):
    exp = experiment(tmp_path, grid_with_a_diverging_first_combination(), val_score_key='MSE',
                     stop_on_non_number=False)
    summary = exp.grid_search(*tasks.make_managers())
    assert summary['best_params'].choice == {'training/optimizer_params/alpha': 0.02}
    assert math.isfinite(summary['best_score'])
    assert math.isnan(summary['results'][0][1])


def test_grid_search_scores_a_stopped_combination_nan_and_goes_on(tmp_path):
    exp = experiment(tmp_path, grid_with_a_diverging_first_combination(), val_score_key='MSE')
    with pytest.warns(RuntimeWarning, match='grid_0.*diverged'):
        summary = exp.grid_search(*tasks.make_managers())
    assert math.isnan(summary['results'][0][1])
    assert summary['best_params'].choice == {'training/optimizer_params/alpha': 0.02}


def test_grid_search_json_is_strict_with_null_for_a_nan_score(tmp_path):
    exp = experiment(tmp_path, grid_with_a_diverging_first_combination(), val_score_key='MSE',
                     stop_on_non_number=False)
    summary = exp.grid_search(*tasks.make_managers())
    saved = read_strict_json(os.path.join(exp.output_dir, 'grid_search.json'))
    assert [result['score'] for result in saved['results']] == [None, summary['best_score']]
    assert saved['best_score'] == summary['best_score']


def test_a_grid_where_every_score_is_nan_has_no_best(tmp_path):
    params = tasks.make_params(
        num_epochs=1, variable={'training': {'optimizer_params': {'alpha': [1e30,
                                                                           1e30]}}})
    del params.fixed_params['training']['optimizer_params']
    exp = experiment(tmp_path, params, val_score_key='MSE', stop_on_non_number=False)
    summary = exp.grid_search(*tasks.make_managers())
    assert summary['best_params'] is None and math.isnan(summary['best_score'])
    saved = read_strict_json(os.path.join(exp.output_dir, 'grid_search.json'))
    assert saved['best_choice'] is None and saved['best_score'] is None

