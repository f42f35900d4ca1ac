"""The checks of ChainerExperiment's arguments and "training" parameters, at construction."""
import os

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import ChainerExperiment
from researchutils.chainer.training._experiment import checks
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment


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


def test_a_model_class_without_closure_is_refused(tmp_path):
    with pytest.raises(TypeError, match='AbstractChainerNetwork'):
        ChainerExperiment(tasks.make_params(), chainer.links.Linear, save_path=str(tmp_path))


@pytest.mark.parametrize('seed, error', [(-1, ValueError), (2 ** 32, ValueError),
                                         ('abc', TypeError), (1.5, TypeError),
                                         (True, TypeError)])
def test_a_bad_seed_is_refused_at_construction_naming_it(tmp_path, seed, error):
    with pytest.raises(error, match='seed') as info:
        experiment(tmp_path, seed=seed)
    assert repr(seed) in str(info.value)


def test_a_numpy_integer_seed_is_taken(tmp_path):
    assert experiment(tmp_path, seed=np.int64(7)).seed == 7


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


def test_stop_on_non_number_must_be_a_flag(tmp_path):
    with pytest.raises(TypeError, match='stop_on_non_number'):
        experiment(tmp_path, stop_on_non_number='no')


def test_preemption_snapshot_must_be_a_flag(tmp_path):
    with pytest.raises(TypeError, match="preemption_snapshot.*'no'"):
        experiment(tmp_path, preemption_snapshot='no')


def test_name_and_save_path_default_to_unnamed_experiment_in_the_working_directory(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiment = ChainerExperiment(tasks.make_params(), tasks.Regressor)
    assert experiment.output_dir == os.path.join(str(tmp_path), 'UnnamedExperiment')


def test_a_name_where_delira_puts_n_epochs_is_refused_with_the_order(tmp_path):
    with pytest.raises(TypeError, match="n_epochs.*'exp'.*keyword"):
        ChainerExperiment(tasks.make_params(), tasks.Regressor, 'exp', str(tmp_path))


@pytest.mark.parametrize('wait', [-1, float('nan'), float('inf'), '10', True, None])
def test_wait_for_folder_is_a_finite_number_of_seconds(wait):
    with pytest.raises((TypeError, ValueError), match='wait_for_folder'):
        checks.check_wait_for_folder(wait)


def test_wait_for_folder_is_kept_in_seconds():
    assert checks.check_wait_for_folder(0) == 0.0 and checks.check_wait_for_folder(2.5) == 2.5


def _make(tmp_path, **kwargs):
    kwargs.setdefault('save_path', str(tmp_path / 'runs'))
    return ChainerExperiment(tasks.make_params(), tasks.Regressor, **kwargs)


@pytest.mark.parametrize('name', ['..', '.', 'a/b', '../escape', '/etc', 'a\0b', ''])
def test_a_name_is_one_folder_name(tmp_path, name):
    with pytest.raises(ValueError, match='^name must be one file or folder name'):
        _make(tmp_path, name=name)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('name', [5, b'exp', ['exp']])
def test_a_name_that_is_not_a_str_is_refused(tmp_path, name):
    with pytest.raises(TypeError, match='^name must be a str'):
        _make(tmp_path, name=name)


def test_a_save_path_with_a_nul_byte_is_refused(tmp_path):
    with pytest.raises(ValueError, match='^save_path must not hold a NUL byte'):
        _make(tmp_path, name='exp', save_path=str(tmp_path / 'a\0b'))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('below', ['', 'sub/deeper'])
def test_a_save_path_that_is_or_is_below_a_file_is_refused(tmp_path, below):
    (tmp_path / 'file').write_text('not a folder')
    save_path = os.path.join(str(tmp_path / 'file'), below)
    with pytest.raises(ValueError, match="^save_path must be a folder or a place where one "
                                         "can be made, .*'.*file' is a file"):
        _make(tmp_path, name='exp', save_path=save_path)
    assert os.listdir(tmp_path) == ['file']


def test_a_save_path_that_does_not_exist_yet_is_taken_and_not_made(tmp_path):
    experiment = _make(tmp_path, name='exp', save_path=str(tmp_path / 'new' / 'runs'))
    assert experiment.output_dir == os.path.join(str(tmp_path / 'new' / 'runs'), 'exp')
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('key_mapping', [{'x': 5}, {5: 'data'}])
def test_key_mapping_maps_str_to_str(tmp_path, key_mapping):
    with pytest.raises(TypeError, match='^key_mapping must map names'):
        _make(tmp_path, name='exp', key_mapping=key_mapping)


@pytest.mark.parametrize('val_score_key, error', [(['MSE'], TypeError), (5, TypeError),
                                                  ('', ValueError)])
def test_val_score_key_is_a_non_empty_str(tmp_path, val_score_key, error):
    with pytest.raises(error, match='^val_score_key must be a non-empty str'):
        _make(tmp_path, name='exp', val_score_key=val_score_key)


@pytest.mark.parametrize('comm', [object(), 5])
def test_comm_that_is_not_a_communicator_is_refused(tmp_path, comm):
    with pytest.raises(TypeError, match='^comm must be a ChainerMN communicator'):
        _make(tmp_path, name='exp', comm=comm)


@pytest.mark.parametrize('n_epochs', [0, -1, -10])
def test_a_non_positive_n_epochs_is_refused_when_made_naming_it(tmp_path, n_epochs):
    with pytest.raises(ValueError, match='n_epochs') as info:
        experiment(tmp_path, n_epochs=n_epochs)
    assert repr(n_epochs) in str(info.value)
