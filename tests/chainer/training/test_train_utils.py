"""train_utils: the default optimizer builder and atomic text files (Delira's import path)."""
import json
import os
import stat
import subprocess
import sys

import chainer
import chainer.links as L
import pytest

from researchutils.chainer.training import (
    create_optims_default_chainer,
    train_utils,
)


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


OLD_PATHS = '''
import {first}
from researchutils.chainer.training.train_utils import (
    create_optims_default_chainer, model_package, object_reference, resolve_reference)
from researchutils.chainer.training import references, train_utils
assert create_optims_default_chainer.__module__ == train_utils.__name__
assert (model_package, object_reference, resolve_reference) == (
    references.model_package, references.object_reference, references.resolve_reference)
assert {{'model_package', 'object_reference', 'resolve_reference'}} <= set(dir(train_utils))
try:
    train_utils.no_such_name
except AttributeError as error:
    assert 'no_such_name' in str(error)
print('ok')
'''


@pytest.mark.parametrize('first', ['researchutils.chainer.training.train_utils',
                                   'researchutils.chainer.training.references'])
def test_delira_and_earlier_import_paths_still_work_in_a_fresh_interpreter(first):
    # Delira imports create_optims_default_chainer from train_utils; the reference
    # functions lived there before they got their own module. Either module first.
    result = subprocess.run([sys.executable, '-c', OLD_PATHS.format(first=first)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'ok'


def test_atomic_write_text_writes_what_files_write_text_to_file_writes(tmp_path):
    # One writer behind both public names: UTF-8, line endings as given.
    from researchutils.files import write_text_to_file
    text = 'alpha=0.1\r\nnote: \u00e9t\u00e9 \u2713\n'
    train_utils.atomic_write_text(str(tmp_path / 'a.txt'), text)
    write_text_to_file(str(tmp_path / 'b.txt'), text)
    assert (tmp_path / 'a.txt').read_bytes() == (tmp_path / 'b.txt').read_bytes()
    assert (tmp_path / 'a.txt').read_bytes() == text.encode('utf-8')


def test_atomic_write_text_of_bytes_is_refused_and_leaves_nothing(tmp_path):
    with pytest.raises(TypeError, match='text must be a str, got bytes'):
        train_utils.atomic_write_text(str(tmp_path / 'settings.json'), b'{}')
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize('model', [None, 5])
def test_create_optims_names_a_model_that_is_not_a_link(model):
    with pytest.raises(TypeError, match='^model must be a chainer.Link'):
        create_optims_default_chainer(model, chainer.optimizers.SGD)


def test_create_optims_names_optim_cls():
    with pytest.raises(TypeError, match=r'^optimizer_cls \(optim_cls\) must be'):
        create_optims_default_chainer(L.Linear(2, 1), int)


@pytest.mark.parametrize('path, error', [(5, TypeError), (None, TypeError),
                                         ('a\0b.json', ValueError)])
def test_atomic_write_text_names_a_path_that_is_not_one(tmp_path, monkeypatch, path, error):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match='^path must'):
        train_utils.atomic_write_text(path, 'text')
    assert os.listdir(tmp_path) == []
