"""references: what a "module:qualname" read from a file resolves to, and what is never imported."""
import subprocess
import sys
import uuid

import chainer
import chainer.functions as F
import pytest

from researchutils.chainer.training import (
    Parameters,
    create_optims_default_chainer,
    json_values,
    references,
)
from tests.chainer.training import tasks


def test_a_local_function_cannot_be_saved_by_reference():
    def local():
        pass

    with pytest.raises(ValueError, match='module level'):
        references.object_reference(local, 'metric')


# References read from a file resolve only to what their key expects --------

@pytest.fixture
def planted_module(tmp_path, monkeypatch):
    """A module on sys.path whose import creates a marker folder; yields (name, marker)."""
    name = 'planted_{}'.format(uuid.uuid4().hex)
    marker = tmp_path / 'imported'
    (tmp_path / (name + '.py')).write_text(
        'import os\nos.mkdir({!r})\n\ndef loss(pred, label):\n    return 0\n'.format(
            str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    sys.modules.pop(name, None)


def test_a_module_outside_the_trusted_ones_is_never_imported(planted_module):
    name, marker = planted_module
    reference = {'losses': {'L1': {'__object__': name + ':loss'}}}
    with pytest.raises(ValueError, match=r"training/losses/L1.*'{}:loss'".format(name)):
        json_values.from_json_value(reference, 'training')
    assert not marker.exists() and name not in sys.modules


def test_a_module_the_caller_allows_is_imported(planted_module):
    name, marker = planted_module
    value = json_values.from_json_value({'losses': {'L1': {'__object__': name + ':loss'}}},
                                        'training', allowed_modules=[name])
    assert marker.exists() and value['losses']['L1'] is sys.modules[name].loss


def test_a_function_of_an_untrusted_module_is_refused_even_when_imported():
    with pytest.raises(ValueError, match=r"losses/L1.*'os:system'"):
        json_values.from_json_value({'losses': {'L1': {'__object__': 'os:system'}}}, 'training')


def test_a_foreign_function_reached_through_a_trusted_module_is_refused():
    # researchutils._files imports os, so os.replace is an attribute of it.
    with pytest.raises(ValueError, match=r"losses/L1.*'researchutils._files:os.replace'"):
        json_values.from_json_value(
            {'losses': {'L1': {'__object__': 'researchutils._files:os.replace'}}}, 'training')


@pytest.mark.parametrize('key, reference', [
    ('optimizer_cls', 'chainer.functions:relu'),
    ('optimizer_cls', 'chainer.links:Linear'),
    ('lr_sched_cls', 'chainer.optimizers:SGD'),
    ('lr_sched_cls', 'chainer.training.extensions:observe_lr'),
])
def test_a_reference_of_the_wrong_kind_for_its_key_is_refused(key, reference):
    with pytest.raises(ValueError, match=r"training/{}.*'{}'".format(key, reference)):
        json_values.from_json_value({key: {'__object__': reference}}, 'training')


@pytest.mark.parametrize('key, reference, expected', [
    ('optimizer_cls', 'chainer.optimizers.adam:Adam', chainer.optimizers.Adam),
    ('lr_sched_cls', 'chainer.training.extensions.exponential_shift:ExponentialShift',
     chainer.training.extensions.ExponentialShift),
    ('MSE', 'chainer.functions.loss.mean_squared_error:mean_squared_error',
     chainer.functions.mean_squared_error),
])
def test_references_of_the_right_kind_resolve(key, reference, expected):
    assert json_values.from_json_value({key: {'__object__': reference}},
                                       'training')[key] is expected


def test_resolve_reference_of_a_malformed_reference_names_it():
    with pytest.raises(ValueError, match=r"metric.*'os system'"):
        references.resolve_reference('os system', 'metric')


# References read from experiment.json resolve only to what their keys allow.

def decode(training, **kwargs):
    return json_values.from_json_value({'training': training}, 'fixed_params', **kwargs)


# lr_sched_cls: Chainer's *Shift schedulers, or a class of a module the caller allows -------

@pytest.mark.parametrize('reference', [
    'chainer.training.extensions._snapshot:_Snapshot',
    'chainer.training.extensions.log_report:LogReport',
    'chainer.training.extensions.plot_report:PlotReport',
    'researchutils.chainer.training.extensions.slack_report:SlackReport',
    'chainer.training.extensions.evaluator:Evaluator',
])
def test_lr_sched_cls_outside_the_scheduler_allowlist_is_refused(reference):
    with pytest.raises(ValueError, match=r"lr_sched_cls.*{!r}".format(reference)):
        decode({'lr_sched_cls': {'__object__': reference}})


@pytest.mark.parametrize('name', ['ExponentialShift', 'InverseShift', 'LinearShift',
                                  'MultistepShift', 'PolynomialShift', 'StepShift',
                                  'WarmupShift'])
def test_chainers_shift_schedulers_resolve_as_lr_sched_cls(name):
    cls = getattr(chainer.training.extensions, name)
    data = json_values.to_json_value({'lr_sched_cls': cls})
    assert decode(data)['training']['lr_sched_cls'] is cls


def test_a_scheduler_class_from_an_allowed_module_resolves():
    reference = 'tests.chainer.training.tasks:SlowEpochs'
    assert decode({'lr_sched_cls': {'__object__': reference}},
                  allowed_modules=['tests'])['training']['lr_sched_cls'] is tasks.SlowEpochs


def test_a_scheduler_class_of_the_model_package_is_not_enough():
    # The model's package is trusted for functions, not for extensions.
    with pytest.raises(ValueError, match='lr_sched_cls'):
        decode({'lr_sched_cls': {'__object__': 'tests.chainer.training.tasks:SlowEpochs'}},
               model_package='tests')


@pytest.mark.parametrize('key', ['lr_sched_params', 'optimizer_params', 'lr_sched_trigger'])
def test_keyword_parameters_hold_plain_values_only(key):
    value = {'writer': {'__object__': 'chainer.functions:relu'}}
    with pytest.raises(ValueError, match=r"{}/writer.*plain JSON".format(key)):
        decode({key: value})


def test_plain_keyword_parameters_round_trip():
    training = {'lr_sched_params': {'attr': 'alpha', 'rate': 0.9, 'init': None},
                'lr_sched_trigger': (2, 'epoch'), 'optimizer_params': {'alpha': 1e-3}}
    assert decode(json_values.to_json_value(training))['training'] == training


# Generic callables (losses, metrics, model arguments) come from a few namespaces -------------

@pytest.mark.parametrize('reference', [
    'numpy.distutils.exec_command:exec_command',
    'numpy.f2py:compile',
    'numpy.ctypeslib:load_library',
    'numpy.testing._private.extbuild:build_and_import_extension',
    'chainer.serializers:load_npz',
    'numpy:load',
    'numpy:memmap',
    'numpy:fromfile',
    'chainer.datasets:ImageDataset',
    'researchutils.chainer.serializers.npz:load_model',
    'researchutils.chainer.training.train_utils:atomic_write_text',
    'chainer.functions:relu.__globals__',
    'numpy:dtype.__class__',
])
def test_a_loss_outside_the_function_namespaces_is_refused(reference):
    with pytest.raises(ValueError, match=r"losses/L.*{!r}".format(reference)):
        decode({'losses': {'L': {'__object__': reference}}})


@pytest.mark.parametrize('function', [F.mean_squared_error, F.softmax_cross_entropy,
                                      F.relu])
def test_chainer_functions_resolve_as_losses(function):
    data = json_values.to_json_value({'losses': {'L': function}})
    assert decode(data)['training']['losses']['L'] is function


def test_researchutils_functions_resolve_as_losses():
    from researchutils.chainer.functions import average_k_step_squared_error
    data = json_values.to_json_value({'losses': {'L': average_k_step_squared_error}})
    assert decode(data)['training']['losses']['L'] is average_k_step_squared_error


def test_functions_of_the_model_package_resolve_as_metrics():
    data = json_values.to_json_value({'val_metrics': {'MSE': tasks.mean_squared_error}})
    assert decode(data, model_package='tests')['training']['val_metrics']['MSE'] is (
        tasks.mean_squared_error)


def test_optimizer_cls_comes_from_chainer_optimizers():
    with pytest.raises(ValueError, match='optimizer_cls'):
        decode({'optimizer_cls': {'__object__':
                                  'chainer.training.extensions._snapshot:_Snapshot'}})
    data = json_values.to_json_value({'optimizer_cls': chainer.optimizers.Adam})
    assert decode(data)['training']['optimizer_cls'] is chainer.optimizers.Adam


def test_optim_builder_is_the_default_one_or_from_an_allowed_module():
    assert references.resolve_reference(
        references.object_reference(create_optims_default_chainer, 'optim_builder'),
        'optim_builder', key='optim_builder') is create_optims_default_chainer
    with pytest.raises(ValueError, match=r"optim_builder.*'chainer.serializers:load_npz'"):
        references.resolve_reference('chainer.serializers:load_npz', 'optim_builder',
                                      key='optim_builder')


# Nothing is imported before the module is checked ------------------------------------------

IMPORT_PROBE = '''
import sys
from researchutils.chainer.training import references
before = set(sys.modules)
try:
    references.resolve_reference({reference!r}, 'losses/L')
except ValueError as error:
    print('refused')
new = sorted(name for name in set(sys.modules) - before if {module!r} in name)
print('imported', new)
'''


@pytest.mark.parametrize('reference, module', [
    ('numpy.f2py.__main__:main', 'f2py'),
    ('numpy.distutils.cpuinfo:cpuinfo', 'distutils.cpuinfo'),
    ('numpy.testing:assert_equal', 'numpy.testing'),
    ('chainer.functions._private:x', 'chainer.functions._private'),
])
def test_a_refused_module_is_never_imported(reference, module):
    result = subprocess.run([sys.executable, '-c', IMPORT_PROBE.format(
        reference=reference, module=module)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split('\n')[:2] == ['refused', 'imported []'], result.stdout


def test_parameters_from_json_uses_the_model_package():
    params = Parameters({'training': {'val_metrics': {'MSE': tasks.mean_squared_error}}})
    data = params.to_json()
    with pytest.raises(ValueError, match='val_metrics/MSE'):
        Parameters.from_json(data)
    assert Parameters.from_json(data, model_package='tests') == params


def test_a_scheduler_reached_through_its_package_resolves():
    reference = 'chainer.training.extensions:ExponentialShift'
    assert decode({'lr_sched_cls': {'__object__': reference}})['training']['lr_sched_cls'] is (
        chainer.training.extensions.ExponentialShift)


def test_a_parameter_named_model_cls_gets_the_rule_of_functions():
    # model_cls may come from any imported module; inside the parameters that rule is not used.
    with pytest.raises(ValueError, match=r"model/model_cls.*'tests.chainer.training.tasks"):
        json_values.from_json_value(
            {'model': {'model_cls': {'__object__': 'tests.chainer.training.tasks:Regressor'}}},
            'fixed_params')


# A trusted module prefix covers that module and its submodules, never a longer name -------

@pytest.fixture
def lookalike_module(tmp_path, monkeypatch):
    """A module ``researchutilsx`` on sys.path whose import creates a marker folder."""
    marker = tmp_path / 'imported'
    (tmp_path / 'researchutilsx.py').write_text(
        'import os\nos.mkdir({!r})\n\ndef loss(pred, label):\n    return 0\n'.format(
            str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    sys.modules.pop('researchutilsx', None)


@pytest.mark.parametrize('key, options', [
    ('losses/L1', {'allowed_modules': ['researchutils']}),
    ('losses/L1', {'model_package': 'researchutils'}),
    ('lr_sched_cls', {'allowed_modules': ['researchutils']}),
])
def test_researchutilsx_is_not_trusted_for_researchutils(lookalike_module, key, options):
    with pytest.raises(ValueError, match="names the module 'researchutilsx', which is not "
                                         "trusted"):
        references.resolve_reference('researchutilsx:loss', key, key=key, **options)
    assert not lookalike_module.exists() and 'researchutilsx' not in sys.modules


@pytest.mark.parametrize('reference', ['researchutils.chainer.functionsx:relu',
                                       'chainer.functionsx:relu'])
def test_a_library_prefix_does_not_trust_a_longer_module_name(reference):
    with pytest.raises(ValueError, match='which is not trusted'):
        references.resolve_reference(reference, 'losses/L1')


MAIN_SCRIPT = '''
import sys
from researchutils.chainer.training import references

def my_loss(pred, label):
    return 0

def outcome(**options):
    try:
        value = references.resolve_reference('__main__:my_loss', 'losses/L1', **options)
    except ValueError as error:
        return 'refused' if 'not trusted' in str(error) else 'error: {}'.format(error)
    return 'trusted' if value is my_loss else 'other: {!r}'.format(value)

print(outcome())
print(outcome(allowed_modules=['__main__']))
print(outcome(allowed_modules=['mypackage']))
print(outcome(model_package=references.model_package(type('Net', (), {}))))
print(outcome(allowed_modules=['__main__x']))
'''


def test_references_into_main_are_trusted_only_when_main_is_allowed(tmp_path):
    # Run as a script, so that __main__ is the running script defining my_loss.
    script = tmp_path / 'script.py'
    script.write_text(MAIN_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.split('\n')[:5] == ['refused', 'trusted', 'refused', 'refused', 'refused']


@pytest.mark.parametrize('call, message', [
    (lambda: references.model_package(5), '^model_cls must be a class, got 5'),
    (lambda: references.object_reference(F.relu, 5), '^where must be a str, got 5'),
    (lambda: references.resolve_reference('chainer.functions:relu', None),
     '^where must be a str'),
    (lambda: references.resolve_reference('chainer.functions:relu', 'a', allowed_modules=5),
     '^allowed_modules must be a list of str, got 5'),
    (lambda: references.resolve_reference('chainer.functions:relu', 'a', key=['a']),
     '^key must be a str or None'),
    (lambda: references.resolve_reference('chainer.functions:relu', 'a', model_package=5),
     '^model_package must be a str or None'),
    (lambda: json_values.to_json_value(1, where=None), '^where must be a str'),
    (lambda: json_values.from_json_value(1, where=5), '^where must be a str'),
    (lambda: json_values.from_json_value(1, model_package=['a']),
     '^model_package must be a str or None'),
])
def test_arguments_of_the_reference_helpers_are_named(call, message):
    with pytest.raises(TypeError, match=message):
        call()
