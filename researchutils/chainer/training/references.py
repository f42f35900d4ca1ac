"""The trust rules of references: which class or function a name read from a file may be.

Saved parameters and ``experiment.json`` name classes and functions as
``"module:qualname"`` references (:func:`object_reference` writes them). Reading one back
(:func:`resolve_reference`) never runs code the file chooses: the key a reference sits under
says what kind of object it must be and which modules it may come from (Chainer's and
researchutils' namespaces for that kind, the model class's package, the modules the caller
allows), and the module is checked before it is imported. Its tests are in
``tests/chainer/training/test_references.py``.
"""
from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import chainer

from researchutils._checks import check_str, check_str_list

# What a reference read from a file may name, by its key. A key expects a kind of object, from
# a few namespaces of Chainer and researchutils (module prefixes) or a few named objects, or
# from the modules the caller allows. Anything else is refused before any import. Named
# objects are given by their references: the default optimizer builder is trusted without
# this module importing train_utils, which re-exports this module's names for older scripts
# (an import circle otherwise).
_SCHEDULERS = tuple('{0.__module__}:{0.__qualname__}'.format(
    getattr(chainer.training.extensions, name)) for name in (
        'ExponentialShift', 'InverseShift', 'LinearShift', 'MultistepShift', 'PolynomialShift',
        'StepShift', 'WarmupShift'))
_DEFAULT_OPTIM_BUILDER = ('researchutils.chainer.training.train_utils:'
                          'create_optims_default_chainer')
_FUNCTION_MODULES = ('chainer.functions', 'researchutils.chainer.functions')
# Module name parts refused inside Chainer, NumPy and researchutils (never even imported).
_REFUSED_PARTS = ('tests', 'testing', 'distutils', 'f2py', 'ctypeslib')
# Top-level packages that are never "the model class's package".
_LIBRARY_PACKAGES = ('chainer', 'chainermn', 'chainerx', 'cupy', 'numpy', 'onnx_chainer',
                     'researchutils', '__main__')
_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$')


class _Rule(object):
    """What the references under one key may be: a kind, and where it may come from."""

    def __init__(self, kind: type | Literal['callable', 'network'],
                 library: tuple[str, ...] = (), named: tuple[str, ...] = (),
                 model_package: bool = True, loaded: bool = False) -> None:
        self.kind = kind  # a base class, 'callable' or 'network'
        self.library = library  # module prefixes in Chainer / researchutils
        self.named = named  # or exactly these objects ("module:qualname")
        self.model_package = model_package  # the model class's package is trusted
        self.loaded = loaded  # any module already imported (model_cls only)

    def describe(self) -> str:
        if self.kind == 'network':
            return 'an AbstractChainerNetwork subclass (a Link with closure and prepare_batch)'
        if self.kind == 'callable':
            return 'a callable'
        return 'a {}.{} subclass'.format(self.kind.__module__, self.kind.__qualname__)

    def right_kind(self, value: object) -> bool:
        if self.kind == 'callable':
            return callable(value)
        if self.kind == 'network':
            return (isinstance(value, type) and issubclass(value, chainer.Link)
                    and callable(getattr(value, 'closure', None))
                    and callable(getattr(value, 'prepare_batch', None)))
        return isinstance(value, type) and issubclass(value, self.kind)


_RULES = {
    'optimizer_cls': _Rule(chainer.Optimizer, library=('chainer.optimizers',)),
    'lr_sched_cls': _Rule(chainer.training.Extension, named=_SCHEDULERS, model_package=False),
    'optim_builder': _Rule('callable', named=(_DEFAULT_OPTIM_BUILDER,)),
    'model_cls': _Rule('network', model_package=False, loaded=True),
}
_DEFAULT_RULE = _Rule('callable', library=_FUNCTION_MODULES)
# The keys of the parameters with a rule of their own; any other is a function's.
_PARAMETER_RULES = ('optimizer_cls', 'lr_sched_cls')


def object_reference(value: object, where: str) -> str:
    """Returns ``"module:qualname"`` for an importable class or function.

    Args:
        value: A class or a module-level function.
        where (str): Where the value sits, for the error message.

    Returns:
        str: A reference that :func:`resolve_reference` turns back into ``value``.

    Raises:
        ValueError: ``value`` cannot be found again by import (a lambda, a
            local function, a partial, a name starting with ``_``); the
            message says what to do.

    Example:
        >>> object_reference(chainer.optimizers.Adam, 'optimizer_cls')
        'chainer.optimizers.adam:Adam'
    """
    check_str(where, 'where')
    module = getattr(value, '__module__', None)
    qualname = getattr(value, '__qualname__', None)
    if module is None or qualname is None or '<' in qualname:
        raise ValueError('{} is {!r}, which cannot be saved as a reference: use a class or a '
                         'function defined at module level'.format(where, value))
    if any(part.startswith('_') for part in qualname.split('.')):
        raise ValueError('{} is {!r}, whose name {!r} is private: loading refuses names '
                         'starting with "_", so give it a public name'.format(
                             where, value, qualname))
    reference = '{}:{}'.format(module, qualname)
    if _loaded_object(module, qualname) is not value:
        raise ValueError('{} is {!r}, but {!r} does not import back to it: use a class or a '
                         'function defined at module level'.format(where, value, reference))
    return reference


def _loaded_object(module: str, qualname: str) -> object:
    """The object ``module:qualname`` names, looked up in a loaded module (None if not found).

    Imports nothing: the module of a value, or of a value just resolved, is loaded already.
    """
    found = sys.modules.get(module)
    try:
        for part in qualname.split('.'):
            found = getattr(found, part)
    except AttributeError:
        return None
    return found


def _check_allowed_modules(allowed_modules: Sequence[str]) -> tuple[str, ...]:
    if isinstance(allowed_modules, str) or not all(
            _NAME.match(name) for name in check_str_list(allowed_modules, 'allowed_modules')):
        raise TypeError('allowed_modules must be a list of module names such as ["mypackage"], '
                        'got {!r}'.format(allowed_modules))
    return tuple(allowed_modules)


def _in_modules(module_name: str, modules: Iterable[str]) -> bool:
    return any(module_name == name or module_name.startswith(name + '.') for name in modules)


def _library_module_allowed(module_name: str, rule: _Rule) -> bool:
    parts = module_name.split('.')
    if any(part.startswith('_') or part in _REFUSED_PARTS for part in parts):
        return False
    # A named object may be reached through its module or a package above it.
    return (_in_modules(module_name, rule.library)
            or any(_in_modules(named.partition(':')[0], (module_name,))
                   for named in rule.named))


def _user_module_allowed(module_name: str, user_modules: Sequence[str]) -> bool:
    if module_name == '__main__':
        # Only the running script, as it is: never imported.
        return '__main__' in user_modules and '__main__' in sys.modules
    return (_in_modules(module_name, user_modules)
            and not any(part.startswith('__') for part in module_name.split('.')))


def _loaded_module_allowed(module_name: str) -> bool:
    # An imported module is looked up, never imported again; __main__ only as it is.
    return module_name in sys.modules and (module_name == '__main__' or not any(
        part.startswith('__') for part in module_name.split('.')))


def model_package(model_cls: type) -> str | None:
    """The top-level package of ``model_cls``'s module, or None for a library or ``__main__``.

    Functions of that package may be named by a loaded experiment's losses and metrics.

    Example:
        >>> model_package(chainer.links.Linear) is None
        True
    """
    if not isinstance(model_cls, type):
        raise TypeError('model_cls must be a class, got {!r}'.format(model_cls))
    package = getattr(model_cls, '__module__', '').split('.')[0]
    return None if not package or package in _LIBRARY_PACKAGES else package


def resolve_reference(reference: str, where: str, allowed_modules: Sequence[str] = (),
                      key: str | None = None, model_package: str | None = None) -> Any:
    """Finds the class or function a ``"module:qualname"`` reference names, safely.

    References come from files (``experiment.json``), so resolving one never
    runs code the file chooses. The key the reference sits under says what it
    may be, and from where; a module is checked against that before it is
    imported, and the object found must be of that kind, defined there:

    * ``optimizer_cls``: a :class:`chainer.Optimizer` subclass from
      ``chainer.optimizers``;
    * ``lr_sched_cls``: one of Chainer's ``*Shift`` schedulers
      (``ExponentialShift``, ``InverseShift``, ``LinearShift``,
      ``MultistepShift``, ``PolynomialShift``, ``StepShift``, ``WarmupShift``),
      or an extension class of ``allowed_modules``; a named object may be
      reached through a package above its module
      (``chainer.training.extensions:ExponentialShift``);
    * ``optim_builder``:
      :func:`~researchutils.chainer.training.train_utils.create_optims_default_chainer`;
    * ``model_cls``: a Link subclass with ``closure`` and ``prepare_batch``
      from ``allowed_modules`` or a module already imported (``__main__``
      only when it is already the running script); nothing else imports it;
    * any other key (losses, metrics, model arguments): a callable from
      ``chainer.functions`` or ``researchutils.chainer.functions``.

    Besides, every key but ``lr_sched_cls`` and ``model_cls`` takes what
    ``model_package`` and ``allowed_modules`` define. Names starting with
    ``_`` are refused, as are modules of Chainer, NumPy and researchutils
    with a private part or a ``tests``, ``testing``, ``distutils``, ``f2py``
    or ``ctypeslib`` part; in ``allowed_modules``, a ``__dunder__`` part
    (``pkg.__main__``); ``"__main__"`` itself is allowed only by naming it
    and is never imported.

    Args:
        reference (str): As written by :func:`object_reference`.
        where (str): Where the reference sits (its path), for error messages.
        allowed_modules (list of str): More modules (and their submodules)
            the reference may name; only modules you trust.
        key (str or None): The rule to apply (above); None: the last name of
            ``where``.
        model_package (str or None): The top-level package of the model class,
            trusted for functions (see :func:`model_package`).

    Returns:
        object: The class or function.

    Raises:
        ValueError: The reference is malformed, names a module that is not
            allowed, cannot be found, or is not of the expected kind; the
            message names ``where`` and the reference.
        TypeError: ``allowed_modules`` is not a list of module names, or
            ``where``, ``key`` or ``model_package`` is not a str.

    Example:
        >>> resolve_reference('chainer.optimizers.adam:Adam', 'optimizer_cls').__name__
        'Adam'
        >>> resolve_reference('os:system', 'losses/L1')
        Traceback (most recent call last):
        ...
        ValueError: losses/L1: the reference 'os:system' names the module 'os', ...
    """
    check_str(where, 'where')
    allowed = _check_allowed_modules(allowed_modules)
    check_str(key, 'key', allow_none=True)
    check_str(model_package, 'model_package', allow_none=True)
    if key is None:
        key = re.split(r'[/ ]', where)[-1]
    rule = _RULES.get(key, _DEFAULT_RULE)
    user_modules = allowed + ((model_package,) if rule.model_package and model_package else ())
    module_name, _, qualname = reference.partition(':') if isinstance(reference, str) else ('',) * 3
    if not (_NAME.match(module_name) and _NAME.match(qualname)):
        raise ValueError('{}: {!r} is not a "module:qualname" reference'.format(where, reference))

    def allowed_module(name: str) -> bool:
        return (_library_module_allowed(name, rule) or _user_module_allowed(name, user_modules)
                or (rule.loaded and _loaded_module_allowed(name)))

    if any(part.startswith('_') for part in qualname.split('.')):
        raise ValueError('{}: the reference {!r} names the private name {!r}, which is never '
                         'resolved'.format(where, reference, qualname))
    if not allowed_module(module_name):
        raise ValueError('{}: the reference {!r} names the module {!r}, which is not trusted '
                         'for {}: {}; if you trust it, pass allowed_modules=[{!r}]'.format(
                             where, reference, module_name, key, rule.describe(),
                             module_name.split('.')[0]))
    try:
        value = (sys.modules[module_name] if module_name == '__main__'
                 else importlib.import_module(module_name))
        for part in qualname.split('.'):
            value = getattr(value, part)
    except (ImportError, AttributeError) as error:
        raise ValueError('{}: cannot import {!r} ({})'.format(where, reference, error)) from error
    defined_in = getattr(value, '__module__', None)
    if rule.named and not _user_module_allowed(str(defined_in), user_modules):
        from_here = any(value is _loaded_object(*named.split(':')) for named in rule.named)
    else:
        from_here = isinstance(defined_in, str) and allowed_module(defined_in)
    if not (rule.right_kind(value) and from_here):
        raise ValueError('{}: the reference {!r} is {!r}, defined in {!r}, but {} is expected '
                         'there, from {}'.format(
                             where, reference, value, defined_in, rule.describe(),
                             _where_from(rule, user_modules)))
    return value


def _where_from(rule: _Rule, user_modules: Sequence[str]) -> str:
    sources = list(rule.library) + list(rule.named) + list(user_modules)
    if rule.loaded:
        sources.append('a module already imported')
    return ', '.join(sources) or 'nowhere'
