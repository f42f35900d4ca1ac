"""The experiment's settings table: the constructor's signature, replace, save and load."""
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import uuid

import chainer
import pytest

from researchutils.chainer.training import (
    ChainerExperiment,
    create_optims_default_chainer,
)
from researchutils.chainer.training._experiment import settings as settings_table
from tests.chainer.training import tasks
from tests.chainer.training.tasks import assert_same_weights, experiment, weights

# A process that saves and one that loads: the table of SETTINGS, and the functions that
# save and load its references, are built when the module is imported.
# First in this file: `make mutation` (mutmut) credits what runs at import to the first test.
LOAD_THEN_SAVE = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})
    from researchutils.chainer.training import ChainerExperiment
    assert not any(name.startswith('tests.') for name in sys.modules)
    loaded = ChainerExperiment.load({good!r}, allowed_modules=['tests'])
    print(loaded.model_cls.__module__, loaded.model_cls.__name__)
    print(loaded.optim_builder.__module__, loaded.optim_builder.__name__)
    loaded.save()
    # Its module imported now, the model's package is trusted for functions without
    # allowed_modules.
    print(ChainerExperiment.load({good!r}).optim_builder.__name__)
    try:
        ChainerExperiment.load({bad!r}, allowed_modules=['tests'])
    except ValueError as error:
        print(error)
''')


def test_an_experiment_saved_in_one_process_loads_and_saves_again_in_a_new_one(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))))
    good = ChainerExperiment(tasks.make_params(), tasks.Regressor, name='good',
                             save_path=str(tmp_path), optim_builder=one_sgd_builder)
    path = good.save()
    with open(path) as stream:
        saved = stream.read()
    bad = experiment(tmp_path / 'bad')
    tasks.edit_saved_experiment(bad, lambda data: data.update(model_cls='os:system'))
    bad_path = os.path.join(bad.output_dir, 'experiment.json')
    result = subprocess.run(
        [sys.executable, '-c', LOAD_THEN_SAVE.format(root=root, good=good.output_dir,
                                                     bad=bad.output_dir)],
        cwd=root, capture_output=True, text=True, timeout=300)
    lines = result.stdout.splitlines()
    assert lines[:2] == ['tests.chainer.training.tasks Regressor',
                         '{} one_sgd_builder'.format(__name__)], result.stderr
    with open(path) as stream:
        assert stream.read() == saved  # saved again by the new process: the same file
    assert lines[2] == 'one_sgd_builder'
    # The refusal names the file and the setting, then the reference.
    assert len(lines) == 4 and lines[3].startswith(bad_path + ': model_cls: ')
    assert "'os:system'" in lines[3]


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


def test_load_takes_the_file_or_its_folder_as_a_path_object(tmp_path):
    # A pathlib.Path to the file itself once failed with a TypeError (the path was used as
    # the str prefix of error locations); found by mypy.
    saved = ChainerExperiment(tasks.make_params(), tasks.Regressor, 2, 'saved', tmp_path)
    file = pathlib.Path(saved.save())
    for path in (file, file.parent):
        loaded = ChainerExperiment.load(path)
        assert (loaded.params, loaded.n_epochs) == (saved.params, 2)
        assert (loaded.name, loaded.save_path) == ('saved', str(tmp_path))


def test_the_signature_takes_delira_positional_order_then_keyword_only_settings():
    parameters = inspect.signature(ChainerExperiment).parameters.values()
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword_only = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    assert positional == ['params', 'model_cls', 'n_epochs', 'name', 'save_path', 'key_mapping',
                          'val_score_key', 'optim_builder', 'checkpoint_freq']
    assert keyword_only == ['gpu_ids', 'val_score_mode', 'comm', 'extensions', 'seed',
                            'stop_on_non_number', 'preemption_snapshot', 'tracking',
                            'wait_for_folder']


def test_the_constructor_spells_out_the_settings_table():
    # Its code, not a __signature__ attribute: what IDEs and type checkers read.
    code = ChainerExperiment.__init__.__code__
    names = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
    assert list(names) == [setting.name for setting in settings_table.SETTINGS]
    assert '__signature__' not in vars(ChainerExperiment.__init__)
    parameters = list(inspect.signature(ChainerExperiment).parameters.values())
    assert [(p.name, p.kind is p.KEYWORD_ONLY, p.default) for p in parameters] == [
        (setting.name, setting.keyword_only, setting.default)
        for setting in settings_table.SETTINGS]


def test_the_first_wrong_argument_in_the_signature_order_is_named(tmp_path):
    with pytest.raises(TypeError, match='n_epochs'):
        ChainerExperiment(tasks.make_params(), tasks.Regressor, 'three', save_path=123,
                          checkpoint_freq=0)
    with pytest.raises(TypeError, match='save_path'):
        ChainerExperiment(tasks.make_params(), tasks.Regressor, save_path=123,
                          checkpoint_freq=0)


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
    changed = settings_table.replace(exp, name='other', seed=None)
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


def test_a_key_given_twice_with_the_same_value_is_refused_too(tmp_path):
    # Equal values today, but an edit of one of them would silently be lost or win.
    exp = experiment(tmp_path)
    path = _edit_saved_text(exp, lambda text: text.replace(
        '"checkpoint_freq": 1', '"checkpoint_freq": 1, "checkpoint_freq": 1'))
    with pytest.raises(ValueError, match=re.escape(path) + r": the key 'checkpoint_freq' "
                                         r"appears twice in one object \(1, then 1\)"):
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


def test_experiment_json_is_strict_json_and_keeps_an_infinite_parameter(tmp_path):
    params = tasks.make_params(optimizer_params={'alpha': 0.02, 'eps': float('inf')})
    exp = experiment(tmp_path, params)

    def refuse(constant):
        raise AssertionError('experiment.json is not strict JSON: it holds ' + constant)

    with open(exp.save()) as stream:
        json.loads(stream.read(), parse_constant=refuse)
    loaded = ChainerExperiment.load(exp.output_dir)
    assert loaded.params.training['optimizer_params'] == {'alpha': 0.02, 'eps': float('inf')}


def test_a_run_below_the_experiment_is_named_by_its_folder(tmp_path):
    exp = experiment(tmp_path)
    fold = settings_table.replace(exp, name=os.path.join(exp.name, 'fold_0'))
    assert fold.output_dir == os.path.join(exp.output_dir, 'fold_0')
    assert fold.name == 'fold_0'


def test_functions_of_allowed_modules_load_in_the_parameters(tmp_path, monkeypatch):
    # A metric of a module outside the model's package: taken only when allowed.
    name = 'metrics_{}'.format(uuid.uuid4().hex)
    (tmp_path / (name + '.py')).write_text(
        'import numpy\n\n\ndef mse(pred, label):\n'
        '    return float(numpy.mean((pred - label) ** 2))\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    exp = experiment(tmp_path / 'runs', tasks.make_params(val_metrics={'MSE': module.mse}))
    exp.save()
    with pytest.raises(ValueError, match=r"val_metrics/MSE: the reference '{}:mse'".format(name)):
        ChainerExperiment.load(exp.output_dir)
    loaded = ChainerExperiment.load(exp.output_dir, allowed_modules=[name])
    assert loaded.params.training['val_metrics']['MSE'] is module.mse


def _refused_load(tmp_path, edit):
    """The experiment.json path and the message of the refusal to load an experiment whose
    saved file ``edit`` changed."""
    exp = experiment(tmp_path)
    tasks.edit_saved_experiment(exp, edit)
    with pytest.raises(ValueError) as caught:
        ChainerExperiment.load(exp.output_dir)
    return os.path.join(exp.output_dir, 'experiment.json'), str(caught.value)


def test_an_experiment_json_of_another_format_names_its_format_and_the_expected_one(tmp_path):
    path, message = _refused_load(tmp_path, lambda saved: saved.update(format='other/2'))
    assert message.startswith(path) and "'other/2'" in message
    assert repr(settings_table.FORMAT) in message
    assert 'fixed_params' not in message  # the format, not the whole file


def test_an_experiment_json_without_the_model_class_says_so_naming_the_file(tmp_path):
    path, message = _refused_load(tmp_path, lambda saved: saved.pop('model_cls'))
    assert message.startswith(path) and "'model_cls'" in message


def test_a_refused_model_class_in_experiment_json_names_the_file_and_the_setting(tmp_path):
    path, message = _refused_load(tmp_path, lambda saved: saved.update(model_cls='os:system'))
    assert message.startswith(path + ': model_cls: ')


def test_save_of_tracking_tags_that_are_no_json_names_where_they_sit(tmp_path):
    exp = experiment(tmp_path, tracking={'tensorboard': True, 'tags': {'run': object()}})
    with pytest.raises(ValueError, match='^ChainerExperiment/tracking/tags/run is '):
        exp.save()
    assert not os.path.exists(os.path.join(exp.output_dir, 'experiment.json'))
