"""The examples in the docstrings of the training API and data loading modules run."""
import doctest
import importlib

import numpy
import pytest

from tests.test_imports import _loaded_optional_modules

MODULES = [
    'researchutils.chainer.data_loading.abstract_dataset',
    'researchutils.chainer.data_loading.abstract_sampler',
    'researchutils.chainer.data_loading.data_manager',
    'researchutils.chainer.data_loading.random_sampler',
    'researchutils.chainer.data_loading.sequential_sampler',
    'researchutils.chainer.training.parameters',
    'researchutils.chainer.training.predictor',
    'researchutils.chainer.training.train_utils',
    'researchutils.chainer.training.experiment',
]


@pytest.mark.parametrize('name', MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from researchutils.chainer.data_loading import SequentialSampler
    result = doctest.testmod(importlib.import_module(name), extraglobs={
        'numpy': numpy, 'SequentialSampler': SequentialSampler})
    assert result.failed == 0


@pytest.mark.parametrize('name', ['researchutils.chainer.training',
                                  'researchutils.chainer.data_loading'])
def test_import_loads_no_optional_dependency(name):
    assert _loaded_optional_modules(name) == []
