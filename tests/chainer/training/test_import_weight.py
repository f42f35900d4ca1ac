"""Importing the training API and data loading loads no optional dependency."""
import pytest

from tests.test_imports import _loaded_optional_modules


@pytest.mark.parametrize('name', ['researchutils.chainer.training',
                                  'researchutils.chainer.data_loading'])
def test_import_loads_no_optional_dependency(name):
    assert _loaded_optional_modules(name) == []
