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


# What the refusals name, and what the checks take and keep.

def _refusal(error, call):
    """The message of the ``error`` that ``call()`` raises (a KeyError's str is its repr)."""
    with pytest.raises(error) as info:
        call()
    return info.value.args[0]


def test_a_params_that_is_not_parameters_is_refused_naming_its_type(tmp_path):
    message = _refusal(TypeError, lambda: ChainerExperiment({'training': {}}, tasks.Regressor,
                                                            save_path=str(tmp_path)))
    assert 'params' in message and 'dict' in message


def test_a_model_class_refused_is_named(tmp_path):
    message = _refusal(TypeError, lambda: ChainerExperiment(
        tasks.make_params(), chainer.links.Linear, save_path=str(tmp_path)))
    assert 'model_cls' in message and repr(chainer.links.Linear) in message


@pytest.mark.parametrize('n_epochs', [1, 2, np.int64(3)])
def test_a_positive_n_epochs_is_kept_as_an_int(tmp_path, n_epochs):
    kept = experiment(tmp_path, n_epochs=n_epochs).n_epochs
    assert kept == int(n_epochs) and type(kept) is int


def test_n_epochs_stands_for_a_missing_or_bad_num_epochs_of_the_training(tmp_path):
    # n_epochs is the number of epochs trained: the training's num_epochs is not needed.
    params = tasks.make_params()
    del params.fixed_params['training']['num_epochs']
    assert experiment(tmp_path, params, n_epochs=2).n_epochs == 2
    assert experiment(tmp_path, tasks.make_params(num_epochs=0), n_epochs=2).n_epochs == 2


@pytest.mark.parametrize('save_path', [123, ['runs']])
def test_a_save_path_that_is_not_a_path_is_refused_naming_it(save_path):
    message = _refusal(TypeError, lambda: ChainerExperiment(
        tasks.make_params(), tasks.Regressor, name='exp', save_path=save_path))
    assert 'save_path' in message and repr(save_path) in message


def test_a_save_path_below_a_file_is_refused_naming_the_path_given(tmp_path):
    (tmp_path / 'file').write_text('not a folder')
    save_path = str(tmp_path / 'file' / 'runs')
    message = _refusal(ValueError, lambda: _make(tmp_path, name='exp', save_path=save_path))
    assert repr(save_path) in message and repr(str(tmp_path / 'file')) in message


@pytest.mark.parametrize('key_mapping', [{}, ['x'], 'x'])
def test_key_mapping_is_none_or_a_non_empty_dict(tmp_path, key_mapping):
    message = _refusal(ValueError, lambda: _make(tmp_path, name='exp',
                                                 key_mapping=key_mapping))
    assert message.startswith('key_mapping') and repr(key_mapping) in message


def test_a_bad_key_mapping_entry_is_named_with_the_mapping(tmp_path):
    key_mapping = {'x': 'data', 'y': 5}
    message = _refusal(TypeError, lambda: _make(tmp_path, name='exp', key_mapping=key_mapping))
    assert repr(key_mapping) in message
    # The entry, apart from the mapping: its argument and its batch key.
    entry = message.replace(repr(key_mapping), '')
    assert "'y'" in entry and '5' in entry


def test_a_key_mapping_is_kept_as_a_copy(tmp_path):
    key_mapping = {'x': 'data'}
    exp = _make(tmp_path, name='exp', key_mapping=key_mapping)
    key_mapping['x'] = 'label'
    assert exp.key_mapping == {'x': 'data'}


def test_an_optim_builder_that_is_not_callable_is_refused_naming_it(tmp_path):
    message = _refusal(TypeError, lambda: _make(tmp_path, name='exp', optim_builder='adam'))
    assert 'optim_builder' in message and repr('adam') in message


@pytest.mark.parametrize('extensions', [
    [], [chainer.training.extensions.LogReport()],
    [(chainer.training.extensions.LogReport(), (1, 'epoch'))]])
def test_extensions_and_extension_trigger_pairs_are_taken(tmp_path, extensions):
    assert _make(tmp_path, name='exp', extensions=tuple(extensions)).extensions == extensions


@pytest.mark.parametrize('extensions', ['logreport', b'logreport', 5, None])
def test_extensions_that_are_not_a_sequence_are_refused_naming_them(tmp_path, extensions):
    message = _refusal(TypeError, lambda: _make(tmp_path, name='exp', extensions=extensions))
    assert message.startswith('extensions') and repr(extensions) in message


@pytest.mark.parametrize('extension', [5, (5, (1, 'epoch'))])
def test_an_extension_that_is_not_callable_is_refused_naming_it(tmp_path, extension):
    message = _refusal(TypeError, lambda: _make(tmp_path, name='exp', extensions=[extension]))
    assert message.startswith('extensions') and repr(extension) in message


@pytest.mark.parametrize('training, key, value', [
    ({'optimizer_cls': dict}, 'optimizer_cls', dict),
    ({'optimizer_params': [0.1]}, 'optimizer_params', [0.1]),
    ({'lr_sched_params': 5}, 'lr_sched_params', 5),
    ({'lr_sched_cls': 5}, 'lr_sched_cls', 5),
    ({'train_metrics': {'MAE': 3}}, 'train_metrics', {'MAE': 3}),
    ({'val_metrics': {'MSE': 3}}, 'val_metrics', {'MSE': 3}),
])
def test_a_bad_training_parameter_is_refused_naming_it_and_its_value(tmp_path, training, key,
                                                                     value):
    message = _refusal(TypeError, lambda: experiment(tmp_path, tasks.make_params(**training)))
    assert key in message and repr(value) in message


def test_a_learning_rate_scheduler_class_is_taken(tmp_path):
    params = tasks.make_params(lr_sched_cls=chainer.training.extensions.ExponentialShift,
                               lr_sched_params={'attr': 'alpha', 'rate': 0.5})
    assert experiment(tmp_path, params).params.training['lr_sched_cls'] is \
        chainer.training.extensions.ExponentialShift


def test_an_unknown_training_parameter_is_refused_listing_the_known_ones(tmp_path):
    message = _refusal(ValueError, lambda: experiment(tmp_path,
                                                      tasks.make_params(num_epoch=3)))
    assert all(repr(key) in message for key in checks.TRAINING_KEYS)


def test_a_missing_training_parameter_is_named_with_what_it_is(tmp_path):
    params = tasks.make_params()
    del params.fixed_params['training']['losses']
    message = _refusal(KeyError, lambda: experiment(tmp_path, params))
    assert "'losses'" in message and checks.TRAINING_KEYS['losses'] in message


@pytest.mark.parametrize('training, name', [
    ({'num_epochs': 0}, 'num_epochs'), ({'early_stopping_patience': 0},
                                        'early_stopping_patience')])
def test_a_bad_count_of_the_training_is_named_as_a_training_parameter(tmp_path, training,
                                                                      name):
    with pytest.raises(ValueError, match='^training parameter {} must'.format(name)):
        experiment(tmp_path, tasks.make_params(**training), val_score_key='MSE')


def test_a_val_score_key_that_is_no_val_metric_is_refused_listing_the_val_metrics(tmp_path):
    params = tasks.make_params(val_metrics={'MSE': tasks.mean_squared_error,
                                            'neg': tasks.negative_mse})
    message = _refusal(ValueError, lambda: experiment(tmp_path, params, val_score_key='ACC'))
    assert "'MSE'" in message and "'neg'" in message


# The managers given to run, checked before anything is built or written.

@pytest.mark.parametrize('train, val', [(5, None), ('train', 'val'), (None, 2.5)])
def test_run_refuses_a_train_that_is_not_a_data_manager_naming_the_types(tmp_path, train,
                                                                        val):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    message = _refusal(TypeError, lambda: exp.run(train, val))
    assert 'DataManager' in message
    assert type(train).__name__ in message and type(val).__name__ in message
    assert not os.path.exists(exp.output_dir)


def test_run_refuses_a_val_that_is_not_a_data_manager(tmp_path):
    train, _ = tasks.make_managers(n_train=32, n_val=32)
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    message = _refusal(TypeError, lambda: exp.run(train, [1, 2]))
    assert 'DataManager' in message and 'list' in message
    assert not os.path.exists(exp.output_dir)


def test_run_with_a_val_score_key_needs_a_val_manager(tmp_path):
    train, _ = tasks.make_managers(n_train=32, n_val=32)
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1), val_score_key='MSE')
    message = _refusal(ValueError, lambda: exp.run(train))
    assert "'MSE'" in message and 'val' in message
    assert not os.path.exists(exp.output_dir)


def test_run_needs_a_data_entry_in_the_training_batches_naming_their_keys(tmp_path):
    from researchutils.chainer.data_loading import DataManager
    samples = [{'x': np.zeros(4, np.float32), 'label': np.zeros(2, np.float32)}] * 4
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    message = _refusal(KeyError, lambda: exp.run(DataManager(samples, 2)))
    assert 'data' in message and "['x', 'label']" in message
    assert not os.path.exists(exp.output_dir)


def test_run_without_val_trains_on_the_training_batches(tmp_path):
    train, _ = tasks.make_managers(n_train=64, n_val=32)
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    model = exp.run(train)
    assert os.path.isfile(os.path.join(exp.output_dir, 'final_model.npz'))
    assert isinstance(model, tasks.Regressor)
