"""The examples in docstrings and in the tutorials run and print what they show."""
import doctest
import glob
import importlib
import os
import pkgutil

import pytest

import _researchutils_chainer_compat
import researchutils

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIALS = sorted(glob.glob(os.path.join(ROOT, 'docs', 'tutorials', '*.rst')))
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules():
    for package in (researchutils, _researchutils_chainer_compat):
        yield package.__name__
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):
            yield info.name


@pytest.mark.parametrize('name', sorted(_modules()))
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=OPTIONS)
    assert result.failed == 0


@pytest.mark.parametrize('path', TUTORIALS, ids=os.path.basename)
def test_tutorial_examples_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(path, module_relative=False, optionflags=OPTIONS)
    assert result.failed == 0
