"""Every public name is re-exported from its package, documented, and in the API reference."""
import importlib
import inspect
import pkgutil

import pytest

import researchutils.chainer
from tests.support.api_reference import api_reference_text

PACKAGES = [
    'researchutils.chainer.functions',
    'researchutils.chainer.links',
    'researchutils.chainer.initializers',
    'researchutils.chainer.iterators',
    'researchutils.chainer.serializers',
    'researchutils.chainer.models',
    'researchutils.chainer.data_loading',
    'researchutils.chainer.training',
    'researchutils.chainer.training.extensions',
    'researchutils.chainer.training.triggers',
    'researchutils.chainer.training.updaters',
    'researchutils.chainer.onnx',
]


def _public_definitions(package_name):
    """Public classes and functions defined in the modules below a package."""
    package = importlib.import_module(package_name)
    for info in pkgutil.walk_packages(package.__path__, package_name + '.'):
        if any(part.startswith('_') for part in info.name.split('.')):
            continue
        if any(info.name.startswith(other + '.') for other in PACKAGES
               if other != package_name and other.startswith(package_name + '.')):
            continue  # a subpackage checked on its own
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.startswith('_') or not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if getattr(value, '__module__', None) == info.name:
                yield info.name, name


def test_every_package_is_checked():
    found = {info.name for info in pkgutil.walk_packages(researchutils.chainer.__path__,
                                                         'researchutils.chainer.')
             if info.ispkg and not any(part.startswith('_') for part in info.name.split('.'))}
    assert found == set(PACKAGES) | {'researchutils.chainer.functions.activation',
                                     'researchutils.chainer.functions.loss',
                                     'researchutils.chainer.links.connection'}


@pytest.mark.parametrize('package_name', PACKAGES)
def test_all_names_exist_and_have_docstrings(package_name):
    package = importlib.import_module(package_name)
    assert package.__all__, package_name
    for name in package.__all__:
        value = getattr(package, name)
        assert inspect.getdoc(value), '{}.{} has no docstring'.format(package_name, name)


@pytest.mark.parametrize('package_name', PACKAGES)
def test_public_definitions_are_reexported_from_their_package(package_name):
    package = importlib.import_module(package_name)
    missing = ['{}.{}'.format(module, name) for module, name in _public_definitions(package_name)
               if name not in package.__all__ and not _nested_package_exports(package, name)]
    assert missing == []


def _nested_package_exports(package, name):
    # A subpackage's names count when the subpackage itself is re-exported.
    return any(name in getattr(getattr(package, sub, None), '__all__', ())
               for sub in getattr(package, '__all__', ()))


@pytest.mark.parametrize('package_name', PACKAGES)
def test_every_public_name_is_in_the_api_reference(package_name):
    text = api_reference_text()
    package = importlib.import_module(package_name)
    if 'automodule:: {}\n'.format(package_name) in text:
        return
    undocumented = [name for name in package.__all__
                    if '{}.{}'.format(package_name, name) not in text
                    and '.. automodule:: {}'.format(getattr(package, name).__module__)
                    not in text]
    assert undocumented == []
