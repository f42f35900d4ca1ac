"""Helpers of the unified training API: the default optimizer builder and JSON encoding."""
import importlib
import json
import os
import re
import sys

import chainer
import numpy

from researchutils import _files


def create_optims_default_chainer(model, optim_cls, **optim_params):
    """Builds the optimizers of an experiment: one ``optim_cls`` over the whole model.

    A :class:`~researchutils.chainer.models.DataParallelChainerNetwork` gets a
    :class:`~researchutils.chainer.models.DataParallelChainerOptimizer`, so the
    replicas' gradients are summed and their parameters kept equal.

    Args:
        model (chainer.Link): The model to optimize.
        optim_cls (type): A :class:`chainer.Optimizer` subclass, for instance
            ``chainer.optimizers.Adam``.
        **optim_params: Hyper-parameters of ``optim_cls`` (``alpha=1e-3``...).

    Returns:
        dict: ``{"default": optimizer}``, the optimizer set up on ``model``.

    Raises:
        TypeError: ``optim_cls`` is not a Chainer optimizer class, or it does
            not take ``optim_params`` (the message names them).

    Example:
        >>> import chainer.links as L
        >>> optims = create_optims_default_chainer(L.Linear(2, 1), chainer.optimizers.SGD, lr=0.1)
        >>> optims["default"].lr
        0.1
    """
    if not (isinstance(optim_cls, type) and issubclass(optim_cls, chainer.Optimizer)):
        raise TypeError('optimizer_cls must be a Chainer optimizer class such as '
                        'chainer.optimizers.Adam, got {!r}'.format(optim_cls))
    data_parallel = sys.modules.get('researchutils.chainer.models.data_parallel')
    try:
        if data_parallel is not None and isinstance(model,
                                                    data_parallel.DataParallelChainerNetwork):
            optimizer = data_parallel.DataParallelChainerOptimizer.from_optimizer_class(
                optim_cls, **optim_params)
        else:
            optimizer = optim_cls(**optim_params)
    except TypeError as error:
        raise TypeError('optimizer_params {!r} do not fit {}: {}'.format(
            optim_params, optim_cls.__name__, error)) from error
    optimizer.setup(model)
    return {'default': optimizer}


def atomic_write_text(path, text):
    """Writes ``text`` to ``path`` atomically (a temporary file, then ``os.replace``).

    Args:
        path (str): The file to write; its folder is created when missing.
        text (str): The content.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), 'settings.json')
        >>> atomic_write_text(path, '{}')
        >>> open(path).read()
        '{}'
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = text.encode('utf-8')
    _files.write_atomically(path, lambda file: file.write(data))


# Modules whose references a file may name without the caller allowing them.
_TRUSTED_MODULES = ('chainer', 'numpy', 'researchutils')
# The kind of object a key of the parameters expects; any other key a callable.
_KEY_BASES = {'optimizer_cls': chainer.Optimizer, 'lr_sched_cls': chainer.training.Extension}
_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$')


def object_reference(value, where):
    """Returns ``"module:qualname"`` for an importable class or function.

    Args:
        value: A class or a module-level function.
        where (str): Where the value sits, for the error message.

    Returns:
        str: A reference that :func:`resolve_reference` turns back into ``value``.

    Raises:
        ValueError: ``value`` cannot be found again by import (a lambda, a
            local function, a partial); the message says what to do.

    Example:
        >>> object_reference(chainer.optimizers.Adam, 'optimizer_cls')
        'chainer.optimizers.adam:Adam'
    """
    module = getattr(value, '__module__', None)
    qualname = getattr(value, '__qualname__', None)
    if module is None or qualname is None or '<' in qualname:
        raise ValueError('{} is {!r}, which cannot be saved as a reference: use a class or a '
                         'function defined at module level'.format(where, value))
    reference = '{}:{}'.format(module, qualname)
    # The value's module is loaded already: look it up there, importing nothing.
    found = sys.modules.get(module)
    try:
        for part in qualname.split('.'):
            found = getattr(found, part)
    except AttributeError:
        found = None
    if found is not value:
        raise ValueError('{} is {!r}, but {!r} does not import back to it: use a class or a '
                         'function defined at module level'.format(where, value, reference))
    return reference


def _check_allowed_modules(allowed_modules):
    if isinstance(allowed_modules, str) or not all(
            isinstance(name, str) and _NAME.match(name) for name in allowed_modules):
        raise TypeError('allowed_modules must be a list of module names such as ["mypackage"], '
                        'got {!r}'.format(allowed_modules))
    return _TRUSTED_MODULES + tuple(allowed_modules)


def _in_modules(module_name, modules):
    return any(module_name == name or module_name.startswith(name + '.') for name in modules)


def _expected(base):
    return 'a callable' if base is None else 'a {}.{} subclass'.format(base.__module__,
                                                                     base.__qualname__)


def resolve_reference(reference, where, base=None, allowed_modules=()):
    """Finds the class or function a ``"module:qualname"`` reference names, safely.

    References come from files (``experiment.json``), so resolving one never
    runs code it chooses: a module is imported only if it is in Chainer,
    NumPy or researchutils or in ``allowed_modules``, checked before anything
    is imported. The object found must be of the expected kind, defined in
    such a module.
    The one exception: a Link class (``base`` a Link) may come from a module
    that is already imported, since importing it again runs nothing.

    Args:
        reference (str): As written by :func:`object_reference`.
        where (str): Where the reference sits (the key), for error messages.
        base (type or None): The class the object must subclass
            (``chainer.Optimizer``...); None: any callable.
        allowed_modules (list of str): More modules (and their submodules)
            the reference may name; only modules you trust.

    Returns:
        object: The class or function.

    Raises:
        ValueError: The reference is malformed, names a module that is not
            allowed, cannot be found, or is not of the expected kind; the
            message names ``where`` and the reference.
        TypeError: ``allowed_modules`` is not a list of module names.

    Example:
        >>> resolve_reference('chainer.optimizers.adam:Adam', 'optimizer_cls',
        ...                   base=chainer.Optimizer).__name__
        'Adam'
        >>> resolve_reference('os:system', 'lr_sched_cls')
        Traceback (most recent call last):
        ...
        ValueError: lr_sched_cls: the reference 'os:system' names the module 'os', ...
    """
    modules = _check_allowed_modules(allowed_modules)
    module_name, _, qualname = reference.partition(':') if isinstance(reference, str) else ('',) * 3
    if not (_NAME.match(module_name) and _NAME.match(qualname)):
        raise ValueError('{}: {!r} is not a "module:qualname" reference'.format(where, reference))
    already_loaded = base is not None and issubclass(base, chainer.Link) and (
        module_name in sys.modules)
    if not (_in_modules(module_name, modules) or already_loaded):
        raise ValueError('{}: the reference {!r} names the module {!r}, which is not trusted: a '
                         'file may name only {} and what the caller allows; if you trust it, '
                         'pass allowed_modules=[{!r}]'.format(
                             where, reference, module_name, ', '.join(modules),
                             module_name.split('.')[0]))
    try:
        value = importlib.import_module(module_name)
        for part in qualname.split('.'):
            value = getattr(value, part)
    except (ImportError, AttributeError) as error:
        raise ValueError('{}: cannot import {!r} ({})'.format(where, reference, error)) from error
    defined_in = getattr(value, '__module__', None)
    if base is None:
        right_kind = callable(value)
    else:
        right_kind = isinstance(value, type) and issubclass(value, base)
    if not right_kind or not (already_loaded or (isinstance(defined_in, str)
                                                 and _in_modules(defined_in, modules))):
        raise ValueError('{}: the reference {!r} is {!r}, defined in {!r}, but {} defined in a '
                         'trusted module ({}) is expected'.format(
                             where, reference, value, defined_in, _expected(base),
                             ', '.join(modules)))
    return value


def to_json_value(value, where='value'):
    """Encodes nested parameters as JSON-ready data; classes and functions by reference.

    Args:
        value: Nested dicts, lists, tuples, numbers, strings, NumPy scalars
            and arrays, classes and module-level functions.
        where (str): The path of ``value``, for error messages.

    Returns:
        object: Data for :func:`json.dumps`; :func:`from_json_value` inverts it.

    Example:
        >>> to_json_value({"lr": numpy.float64(0.5), "trigger": (1, "epoch")})
        {'lr': 0.5, 'trigger': {'__tuple__': [1, 'epoch']}}
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, numpy.generic):
        return value.item()
    if isinstance(value, numpy.ndarray):
        return {'__ndarray__': value.tolist(), 'dtype': str(value.dtype)}
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ValueError('{} has the key {!r}; only string keys can be saved'.format(
                    where, key))
        return {key: to_json_value(item, '{}/{}'.format(where, key))
                for key, item in value.items()}
    if isinstance(value, tuple):
        return {'__tuple__': [to_json_value(item, '{}[{}]'.format(where, i))
                              for i, item in enumerate(value)]}
    if isinstance(value, list):
        return [to_json_value(item, '{}[{}]'.format(where, i)) for i, item in enumerate(value)]
    if isinstance(value, type) or callable(value):
        return {'__object__': object_reference(value, where)}
    raise ValueError('{} is {!r} of type {}, which cannot be saved as JSON'.format(
        where, value, type(value).__name__))


def from_json_value(value, where='value', allowed_modules=()):
    """Decodes what :func:`to_json_value` wrote, resolving references safely.

    A reference under ``optimizer_cls`` must be a :class:`chainer.Optimizer`
    subclass, under ``lr_sched_cls`` a :class:`chainer.training.Extension`
    subclass, anywhere else a callable; all from trusted modules (see
    :func:`resolve_reference`).

    Args:
        value: Data read by :func:`json.loads`.
        where (str): The path of ``value``, for error messages.
        allowed_modules (list of str): Modules besides Chainer, NumPy and
            researchutils that references may name; only modules you trust.

    Returns:
        object: The parameters, with classes and functions imported again.

    Raises:
        ValueError: A reference is not allowed or not of the kind its key
            expects; the message names its path and the reference.

    Example:
        >>> from_json_value({'__tuple__': [1, 'epoch']})
        (1, 'epoch')
    """
    if isinstance(value, list):
        return [from_json_value(item, where, allowed_modules) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {'__tuple__'}:
        return tuple(from_json_value(item, where, allowed_modules)
                     for item in value['__tuple__'])
    if set(value) == {'__object__'}:
        return resolve_reference(value['__object__'], where,
                                 base=_KEY_BASES.get(where.rsplit('/', 1)[-1]),
                                 allowed_modules=allowed_modules)
    if set(value) == {'__ndarray__', 'dtype'}:
        return numpy.asarray(value['__ndarray__'], dtype=value['dtype'])
    return {key: from_json_value(item, '{}/{}'.format(where, key), allowed_modules)
            for key, item in value.items()}


def dumps_json(value):
    """Formats JSON-ready data readably (indented, keys in their order).

    Args:
        value: Data for :func:`json.dumps`.

    Returns:
        str: The text, ending with a newline.

    Example:
        >>> print(dumps_json({"a": 1}), end='')
        {
          "a": 1
        }
    """
    return json.dumps(value, indent=2) + '\n'
