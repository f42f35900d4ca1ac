"""Chainer extensions.

The subpackages are independent: ``functions``, ``links``, ``initializers``, ``iterators``,
``serializers``, ``models``, ``data_loading``, ``training`` and
``training.extensions``. Each is loaded only when first used, so importing one
piece never drags in the others.
"""
import importlib

_SUBPACKAGES = ('functions', 'links', 'initializers', 'iterators', 'serializers', 'models',
                'data_loading', 'training')

__all__ = list(_SUBPACKAGES)


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module('{}.{}'.format(__name__, name))
    raise AttributeError(
        'module {!r} has no attribute {!r}'.format(__name__, name))


def __dir__():
    return sorted(list(globals()) + list(_SUBPACKAGES))
