import json
import os
import stat
import sys
import uuid

import chainer
import chainer.links as L
import pytest

from researchutils.chainer.training import create_optims_default_chainer, json_values, train_utils


def test_default_optimizer_is_set_up_on_the_whole_model():
    model = L.Linear(3, 2)
    optimizers = create_optims_default_chainer(model, chainer.optimizers.MomentumSGD, lr=0.3)
    assert list(optimizers) == ['default']
    assert isinstance(optimizers['default'], chainer.optimizers.MomentumSGD)
    assert optimizers['default'].target is model and optimizers['default'].lr == 0.3


def test_a_class_that_is_not_a_chainer_optimizer_is_refused():
    with pytest.raises(TypeError, match='Chainer optimizer class'):
        create_optims_default_chainer(L.Linear(3, 2), dict)


def test_optimizer_params_that_do_not_fit_name_the_class():
    with pytest.raises(TypeError, match='do not fit Adam'):
        create_optims_default_chainer(L.Linear(3, 2), chainer.optimizers.Adam, lr=0.1)


def test_atomic_write_leaves_only_the_target_file(tmp_path):
    path = tmp_path / 'sub' / 'settings.json'
    train_utils.atomic_write_text(str(path), '{"a": 1}')
    train_utils.atomic_write_text(str(path), '{"a": 2}')
    assert json.loads(path.read_text()) == {'a': 2}
    assert os.listdir(str(tmp_path / 'sub')) == ['settings.json']


@pytest.mark.parametrize('umask', [0o022, 0o077])
def test_atomic_write_follows_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        train_utils.atomic_write_text(str(tmp_path / 'settings.json'), '{}')
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(str(tmp_path / 'settings.json')).st_mode) == 0o666 & ~umask


def test_atomic_write_over_a_file_keeps_its_mode(tmp_path):
    # As chainer.serializers.save_npz, which rewrites an existing file in place.
    path = str(tmp_path / 'settings.json')
    train_utils.atomic_write_text(path, '{}')
    os.chmod(path, 0o640)
    train_utils.atomic_write_text(path, '{"a": 1}')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_a_local_function_cannot_be_saved_by_reference():
    def local():
        pass

    with pytest.raises(ValueError, match='module level'):
        train_utils.object_reference(local, 'metric')


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
        train_utils.resolve_reference('os system', 'metric')
