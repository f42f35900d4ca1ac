"""The experiment's settings table: constructor checks, defaults, save and load."""
import inspect
import json
import os
import re
import sys
import uuid

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import (
    ChainerExperiment,
    _experiment_settings,
    create_optims_default_chainer,
)
from tests.chainer.training import tasks
from tests.chainer.training.tasks import assert_same_weights, experiment, weights


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


def test_experiment_json_naming_os_system_is_refused_and_runs_nothing(tmp_path):
    marker = str(tmp_path / 'code_ran')

    def plant(saved):
        training = saved['params']['fixed_params']['training']
        training['lr_sched_cls'] = {'__object__': 'os:system'}
        training['lr_sched_params'] = {'command': 'mkdir ' + marker}

    exp = experiment(tmp_path / 'runs', tasks.make_params(num_epochs=1))
    tasks.edit_saved_experiment(exp, plant)
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
    tasks.edit_saved_experiment(exp, lambda saved: saved.update(model_cls=name + ':Model'))
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


def test_save_and_load_keep_n_epochs(tmp_path):
    experiment = ChainerExperiment(tasks.make_params(), tasks.Regressor, 2, 'saved',
                                   str(tmp_path))
    loaded = ChainerExperiment.load(experiment.save())
    assert (loaded.n_epochs, loaded.name, loaded.save_path) == (2, 'saved', str(tmp_path))


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


def test_the_signature_takes_delira_positional_order_then_keyword_only_settings():
    parameters = inspect.signature(ChainerExperiment).parameters.values()
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword_only = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    assert positional == ['params', 'model_cls', 'n_epochs', 'name', 'save_path', 'key_mapping',
                          'val_score_key', 'optim_builder', 'checkpoint_freq']
    assert keyword_only == ['gpu_ids', 'val_score_mode', 'comm', 'extensions', 'seed',
                            'stop_on_non_number', 'preemption_snapshot']


def test_too_many_positional_arguments_are_refused():
    with pytest.raises(TypeError, match='positional'):
        ChainerExperiment(tasks.make_params(), tasks.Regressor, 1, 'n', '.', None, None,
                          create_optims_default_chainer, 1, None)


def one_sgd_builder(model, optim_cls, **optim_params):
    return create_optims_default_chainer(model, optim_cls, **optim_params)


def unusual_settings(tmp_path):
    """Every saved setting away from its default."""
    return dict(n_epochs=2, name='unusual', save_path=str(tmp_path), key_mapping={'x': 'data'},
                val_score_key='MSE', optim_builder=one_sgd_builder, checkpoint_freq=3,
                gpu_ids=['@numpy'], val_score_mode='highest', seed=5, stop_on_non_number=False,
                preemption_snapshot=False)


def test_load_restores_every_saved_setting(tmp_path):
    settings = unusual_settings(tmp_path)
    saved = ChainerExperiment(tasks.make_params(), tasks.Regressor, **settings)
    loaded = ChainerExperiment.load(saved.save())
    assert {name: getattr(loaded, name) for name in settings} == settings
    assert (loaded.params, loaded.model_cls) == (saved.params, tasks.Regressor)


def test_experiment_json_holds_every_setting_but_comm_and_extensions(tmp_path):
    exp = experiment(tmp_path)
    with open(exp.save()) as stream:
        saved = json.load(stream)
    names = [p for p in inspect.signature(ChainerExperiment).parameters]
    assert sorted(saved) == sorted(set(names) - {'comm', 'extensions'} | {'format'})


def test_replace_keeps_every_setting_but_the_changed_ones(tmp_path):
    settings = unusual_settings(tmp_path)
    extension = chainer.training.extensions.LogReport()
    exp = ChainerExperiment(tasks.make_params(), tasks.Regressor, extensions=[extension],
                            **settings)
    changed = _experiment_settings.replace(exp, name='other', seed=None)
    assert type(changed) is ChainerExperiment
    assert {name: getattr(changed, name) for name in settings} == dict(settings, name='other',
                                                                       seed=None)
    assert changed.extensions == [extension] and changed.params is exp.params


@pytest.mark.parametrize('setting, value', [
    ('extensions', None), ('extensions', 5), ('save_path', 123), ('save_path', ['runs'])])
def test_a_setting_of_the_wrong_type_is_refused_naming_it(tmp_path, setting, value):
    kwargs = {'name': 'exp', 'save_path': str(tmp_path), setting: value}
    with pytest.raises(TypeError, match=r'{} must be .*{}'.format(setting, re.escape(repr(value)))):
        ChainerExperiment(tasks.make_params(), tasks.Regressor, **kwargs)


# Hand-edited experiment.json files: every load error names the file (and the key).

def _edit_saved_text(exp, edit):
    path = exp.save()
    with open(path) as stream:
        text = stream.read()
    with open(path, 'w') as stream:
        stream.write(edit(text))
    return path


def test_experiment_json_with_a_trailing_comma_names_the_file_line_and_column(tmp_path):
    exp = experiment(tmp_path)
    path = _edit_saved_text(exp, lambda text: text.rstrip().rstrip('}') + ',\n}\n')
    with open(path) as stream:
        text = stream.read()
    # Where json itself places the error: at the closing brace up to Python 3.12, at the
    # trailing comma from 3.13 on.
    with pytest.raises(json.JSONDecodeError) as reference:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as caught:
        ChainerExperiment.load(exp.output_dir)
    assert str(caught.value).startswith(path + ': not valid JSON')
    assert (caught.value.lineno, caught.value.colno) == \
        (reference.value.lineno, reference.value.colno)
    assert caught.value.lineno >= len(text.splitlines()) - 1


def test_a_deeply_nested_experiment_json_is_a_value_error_naming_the_file(tmp_path):
    exp = experiment(tmp_path)
    depth = 200000
    path = _edit_saved_text(exp, lambda text: text.replace(
        '"seed": 0', '"seed": ' + '[' * depth + ']' * depth))
    with pytest.raises(ValueError, match=re.escape(path) + ': lists and objects nest deeper'):
        ChainerExperiment.load(exp.output_dir)


def test_a_key_given_twice_in_experiment_json_is_refused_naming_it(tmp_path):
    exp = experiment(tmp_path)
    # "alpha": 0.02 is saved; a second "alpha" after it would silently win.
    path = _edit_saved_text(exp, lambda text: text.replace(
        '"alpha": 0.02', '"alpha": 0.02, "alpha": 1000.0'))
    with pytest.raises(ValueError, match=re.escape(path) + r": the key 'alpha' appears twice "
                                         r"in one object \(0.02, then 1000.0\)"):
        ChainerExperiment.load(exp.output_dir)


def test_a_refused_reference_in_experiment_json_names_the_file_and_the_key(tmp_path):
    exp = experiment(tmp_path)

    def plant(saved):
        saved['params']['fixed_params']['training']['losses']['MSE'] = {'__object__': 'os:system'}

    tasks.edit_saved_experiment(exp, plant)
    path = os.path.join(exp.output_dir, 'experiment.json')
    with pytest.raises(ValueError, match=re.escape(path) + r": fixed_params/training/"
                                         r"losses/MSE: the reference 'os:system'"):
        ChainerExperiment.load(exp.output_dir)


@pytest.mark.parametrize('edit, error, message', [
    (lambda saved: saved.update(checkpoint_freq='3'), TypeError, 'checkpoint_freq'),
    (lambda saved: saved['params']['fixed_params'].update(modle={}), ValueError, 'modle'),
    (lambda saved: saved['params'].pop('variable_params'), ValueError, 'variable_params'),
    (lambda saved: saved.pop('model_cls'), ValueError, "no 'model_cls'"),
])
def test_a_bad_setting_in_experiment_json_is_refused_with_a_note_naming_the_file(
        tmp_path, edit, error, message):
    exp = experiment(tmp_path)
    tasks.edit_saved_experiment(exp, edit)
    path = os.path.join(exp.output_dir, 'experiment.json')
    with pytest.raises(error, match=message) as caught:
        ChainerExperiment.load(exp.output_dir)
    assert path in str(caught.value) or any(path in note for note in caught.value.__notes__)


def test_an_experiment_json_that_is_not_an_object_names_the_file(tmp_path):
    exp = experiment(tmp_path)
    path = _edit_saved_text(exp, lambda text: '[1, 2]\n')
    with pytest.raises(ValueError, match=re.escape(path) + ' is not a saved ChainerExperiment'):
        ChainerExperiment.load(exp.output_dir)
