"""Parameters as JSON: classes and functions by reference, read back safely.

What :meth:`Parameters.to_json <researchutils.chainer.training.Parameters.to_json>` and
``ChainerExperiment.save`` write, and what their loaders read: nested dicts, lists, tuples,
numbers, strings, NumPy arrays, and classes and functions as ``"module:qualname"``
references, which resolve on reading only as
:func:`~researchutils.chainer.training.train_utils.resolve_reference` allows.
"""
import json

import numpy

from researchutils.chainer.training.train_utils import (
    _PARAMETER_RULES,
    _check_allowed_modules,
    object_reference,
    resolve_reference,
)

# Keyword arguments and triggers: plain values only, never a reference.
_PLAIN_KEYS = ('optimizer_params', 'lr_sched_params', 'lr_sched_trigger')
_ARRAY_KINDS = 'biufc'  # bool, signed and unsigned ints, floats, complex


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
    # NumPy scalars first: numpy.float64 is also a float, and would stay a NumPy scalar.
    if isinstance(value, numpy.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
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


def _decode_array(value, where):
    dtype = value['dtype']
    try:
        dtype = numpy.dtype(dtype) if isinstance(dtype, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _ARRAY_KINDS or dtype.subdtype is not None or (
            dtype.fields is not None):
        raise ValueError('{}: the array has the dtype {!r}; only boolean and numeric dtypes '
                         'such as "float32" are read'.format(where, value['dtype']))
    try:
        return numpy.asarray(value['__ndarray__'], dtype=dtype)
    except (TypeError, ValueError) as error:
        raise ValueError('{}: the array cannot be read: {}'.format(where, error)) from error


def _decode(value, where, allowed_modules, model_package, plain):
    if isinstance(value, list):
        return [_decode(item, where, allowed_modules, model_package, plain) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {'__tuple__'} and isinstance(value['__tuple__'], list):
        return tuple(_decode(item, where, allowed_modules, model_package, plain)
                     for item in value['__tuple__'])
    if set(value) == {'__object__'}:
        if plain:
            raise ValueError('{} holds the reference {!r}, but keyword arguments and triggers '
                             '({}) take plain JSON values only'.format(
                                 where, value['__object__'], ', '.join(_PLAIN_KEYS)))
        key = where.rsplit('/', 1)[-1]
        return resolve_reference(value['__object__'], where, allowed_modules=allowed_modules,
                                 key=key if key in _PARAMETER_RULES else '',
                                 model_package=model_package)
    if set(value) == {'__ndarray__', 'dtype'}:
        return _decode_array(value, where)
    return {key: _decode(item, '{}/{}'.format(where, key), allowed_modules, model_package,
                         plain or key in _PLAIN_KEYS)
            for key, item in value.items()}


def from_json_value(value, where='value', allowed_modules=(), model_package=None):
    """Decodes what :func:`to_json_value` wrote, resolving references safely.

    A reference resolves only to the kind its key expects, from the
    namespaces that key allows (see
    :func:`~researchutils.chainer.training.train_utils.resolve_reference`); under
    ``optimizer_params``, ``lr_sched_params`` and ``lr_sched_trigger`` no
    reference is read at all. Arrays must have a boolean or numeric dtype.

    Args:
        value: Data read by :func:`json.loads`.
        where (str): The path of ``value``, for error messages.
        allowed_modules (list of str): Modules whose classes and functions
            references may name; only modules you trust.
        model_package (str or None): The model class's top-level package,
            trusted for functions (losses, metrics).

    Returns:
        object: The parameters, with classes and functions imported again.

    Raises:
        ValueError: A reference is not allowed or not of the kind its key
            expects, or an array's dtype is not numeric; the message names
            its path and the reference.

    Example:
        >>> from_json_value({'__tuple__': [1, 'epoch']})
        (1, 'epoch')
    """
    allowed_modules = _check_allowed_modules(allowed_modules)
    return _decode(value, where, allowed_modules, model_package,
                   where.rsplit('/', 1)[-1] in _PLAIN_KEYS)


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
