"""The examples in docstrings and in the tutorials run and print what they show."""
import doctest
import glob
import importlib
import os
import pkgutil

import pytest

import _researchutils_chainer_compat
import researchutils
from tests.support.torch_twins import importable_here

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIALS = sorted(glob.glob(os.path.join(ROOT, 'docs', 'tutorials', '*.rst')))
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules():
    for package in (researchutils, _researchutils_chainer_compat):
        yield package.__name__
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):
            if importable_here(info.name):
                yield info.name


@pytest.mark.parametrize('name', sorted(_modules()))
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=OPTIONS)
    assert result.failed == 0


# Tutorials whose examples train and search for real: 10-25 s each on a busy machine.
TRAINING_TUTORIALS = {'experiment.rst': 'trains, k-folds and grid-searches small experiments',
                      'search.rst': 'runs small searches of several trials'}


def _tutorial(path):
    reason = TRAINING_TUTORIALS.get(os.path.basename(path))
    marks = [pytest.mark.slow(reason=reason)] if reason else []
    return pytest.param(path, id=os.path.basename(path), marks=marks)


# Tutorials that need the torch extra: they skip on a stack without it.
TORCH_TUTORIALS = ('pytorch.rst',)


# Tutorials that log to MLflow: they run against the session's MLflow server
# (tests/support/mlflow_server.py), named by MLFLOW_TRACKING_URI as a user's shell would.
MLFLOW_TUTORIALS = ('tracking.rst',)


@pytest.mark.parametrize('path', [_tutorial(path) for path in TUTORIALS
                                  if os.path.basename(path) not in MLFLOW_TUTORIALS])
def test_tutorial_examples_run(path, tmp_path, monkeypatch):
    if os.path.basename(path) in TORCH_TUTORIALS:
        pytest.importorskip('torch')
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(path, module_relative=False, optionflags=OPTIONS)
    assert result.failed == 0


@pytest.mark.parametrize('name', MLFLOW_TUTORIALS)
def test_tracking_tutorial_examples_run(name, mlflow_server, tmp_path, monkeypatch):
    pytest.importorskip('tensorboardX')
    pytest.importorskip('tensorboard')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('MLFLOW_TRACKING_URI', mlflow_server.url)
    result = doctest.testfile(os.path.join(ROOT, 'docs', 'tutorials', name),
                              module_relative=False, optionflags=OPTIONS)
    assert result.failed == 0
