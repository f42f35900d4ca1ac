"""Lazy re-exports for package ``__init__`` files: a name's module is imported on first use.

A package that gathers the public names of its modules (``from researchutils.chainer.training
import ChainerExperiment``) would, by importing them all in its ``__init__``, make every user of
one piece pay for all of them: a Trainer extension would load the experiment, the data
managers and the worker pool. Instead a package keeps a table, module to names, and
:func:`lazy_exports` gives it the PEP 562 ``__getattr__`` and ``__dir__`` that import a
module when one of its names is first asked for, and the ``__all__`` that lists them all, so
``dir()``, ``from package import *`` and Sphinx see every name.

Type checkers do not run ``__getattr__``: each package also imports its table's names under
``typing.TYPE_CHECKING`` (a test holds the two to each other).

Guarded against: a name listed under two modules (which one wins would depend on the order
of first use), and an unknown name answered by anything but AttributeError (``hasattr`` and
``from package import submodule`` rely on it). A table name must not be a submodule's name
(DESIGN.md); ``tests/test_import_paths.py`` checks that for every package. Standard library
only. Tests: ``tests/test_lazy.py``.
"""
import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any


def lazy_exports(
        namespace: MutableMapping[str, Any], exports: Mapping[str, Sequence[str]],
        submodules: Sequence[str] = (),
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for a package re-exporting its modules' names.

    Args:
        namespace (dict): The package's ``globals()``. A name, once loaded, is stored there,
            so later lookups are plain attribute reads.
        exports (dict): Module name relative to the package (``'experiment'``) to the list of
            names it gives the package.
        submodules (sequence of str): Submodules that are public names of the package
            themselves, imported on first use (``researchutils.chainer.training``).

    Returns:
        tuple: ``__all__`` (the names in table order, then ``submodules``), and the
        package's ``__getattr__`` and ``__dir__``.

    Raises:
        ValueError: A name is listed under two modules.

    Example:
        >>> namespace = {'__name__': 'researchutils.chainer.serializers'}
        >>> names, getattr_, dir_ = lazy_exports(namespace, {'npz': ['save_model']})
        >>> names
        ['save_model']
        >>> getattr_('save_model') is namespace['save_model']
        True
    """
    package = namespace['__name__']
    home: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in home:
                raise ValueError('{}: {!r} is exported by both {!r} and {!r}'.format(
                    package, name, home[name], module))
            home[name] = module
    submodule_names = tuple(submodules)

    def __getattr__(name: str) -> Any:
        if name in home:
            module = importlib.import_module('{}.{}'.format(package, home[name]))
            value = namespace[name] = getattr(module, name)
            return value
        if name in submodule_names:
            return importlib.import_module('{}.{}'.format(package, name))
        raise AttributeError('module {!r} has no attribute {!r}'.format(package, name))

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(home) | set(submodule_names))

    return list(home) + list(submodule_names), __getattr__, __dir__
