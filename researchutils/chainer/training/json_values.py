"""Parameters as JSON: classes and functions by reference, read back safely.

What :meth:`Parameters.to_json <researchutils.chainer.training.Parameters.to_json>` and
``ChainerExperiment.save`` write, and what their loaders read: nested dicts, lists, tuples,
numbers, strings, NumPy arrays, search ranges
(:class:`~researchutils.chainer.training.search_space.FloatRange`, ``IntRange``), and classes
and functions as ``"module:qualname"`` references, which resolve on reading only as
:func:`~researchutils.chainer.training.references.resolve_reference` allows.
Every JSON file the experiment reads (``experiment.json``, ``run_state.json``) goes through
:func:`load_json`, which refuses what :mod:`json` lets pass (a repeated key, nesting without
bound) and names the file in every error.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy
import numpy.typing

from researchutils._checks import check_path, check_str
from researchutils._errors import add_note
from researchutils.chainer.training import search_space
from researchutils.chainer.training.references import (
    _PARAMETER_RULES,
    _check_allowed_modules,
    object_reference,
    resolve_reference,
)

# The floats strict JSON has no number for, as _strict_json_value writes them.
_NON_FINITE = ('nan', 'inf', '-inf')
# Keyword arguments and triggers: plain values only, never a reference.
_PLAIN_KEYS = ('optimizer_params', 'lr_sched_params', 'lr_sched_trigger')
_ARRAY_KINDS = 'biufc'  # bool, signed and unsigned ints, floats, complex
#: How deeply :func:`load_json` lets lists and objects nest: deeper than any parameters
#: (a NumPy array has at most 64 dimensions), shallow enough for every recursive walk of
#: the data (decoding, copying, merging) to stay far from Python's recursion limit.
MAX_JSON_DEPTH = 100

#: What :func:`json.dumps` writes: None, bools, numbers, strings, and lists and string-keyed
#: dicts of these.
JSONData: TypeAlias = (
    None | bool | int | float | str | list['JSONData'] | dict[str, 'JSONData'])


def to_json_value(value: object, where: str = 'value') -> JSONData:
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
    check_str(where, 'where')
    # NumPy scalars first: numpy.float64 is also a float, and would stay a NumPy scalar.
    if isinstance(value, numpy.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, search_space.RANGES):
        return value.to_json()
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


def _decode_float(value: dict[str, Any], where: str) -> float:
    if value['__float__'] not in _NON_FINITE:
        raise ValueError('{}: __float__ holds {!r}; it takes one of {}'.format(
            where, value['__float__'], list(_NON_FINITE)))
    return float(value['__float__'])


def _array_items(items: object, where: str) -> object:
    """An array's nested lists, with _strict_json_value's non-finite floats read back."""
    if isinstance(items, list):
        return [_array_items(item, where) for item in items]
    if isinstance(items, dict) and set(items) == {'__float__'}:
        return _decode_float(items, where)
    return items


def _decode_array(value: dict[str, Any], where: str) -> numpy.typing.NDArray[Any]:
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
        return numpy.asarray(_array_items(value['__ndarray__'], where), dtype=dtype)
    except (TypeError, ValueError) as error:
        raise ValueError('{}: the array cannot be read: {}'.format(where, error)) from error


_SearchRange: TypeAlias = 'search_space.FloatRange | search_space.IntRange'
_BY_JSON_KEY: dict[str, type[search_space.FloatRange] | type[search_space.IntRange]] = {
    range_class.json_key: range_class for range_class in search_space.RANGES}


def _is_range_json(value: object) -> bool:
    """Whether JSON data ``value`` is a saved range (one ``__float_range__`` or
    ``__int_range__`` key)."""
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _BY_JSON_KEY


def _range_from_json(value: dict[str, Any], where: str) -> _SearchRange:
    """The range that ``FloatRange.to_json`` (or IntRange's) wrote; errors name ``where``."""
    (json_key, fields), = value.items()
    names = ('low', 'high', 'log', 'step')
    if not isinstance(fields, dict) or not set(fields) <= set(names) or not (
            {'low', 'high'} <= set(fields)):
        raise ValueError('{}: {} holds {!r}; it takes the keys low, high and optionally log '
                         'and step'.format(where, json_key, fields))
    kwargs = {name: fields[name] for name in ('log', 'step') if name in fields}
    return _BY_JSON_KEY[json_key](fields['low'], fields['high'], where=where, **kwargs)


def _decode(value: object, where: str, allowed_modules: tuple[str, ...],
            model_package: str | None, plain: bool) -> Any:
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
    if set(value) == {'__float__'}:
        return _decode_float(value, where)
    if _is_range_json(value):
        return _range_from_json(value, where)
    return {key: _decode(item, '{}/{}'.format(where, key), allowed_modules, model_package,
                         plain or key in _PLAIN_KEYS)
            for key, item in value.items()}


def from_json_value(value: object, where: str = 'value', allowed_modules: Sequence[str] = (),
                    model_package: str | None = None) -> Any:
    """Decodes what :func:`to_json_value` wrote, resolving references safely.

    A reference resolves only to the kind its key expects, from the
    namespaces that key allows (see
    :func:`~researchutils.chainer.training.references.resolve_reference`); under
    ``optimizer_params``, ``lr_sched_params`` and ``lr_sched_trigger`` no
    reference is read at all. Arrays must have a boolean or numeric dtype.
    ``{"__float__": "nan"}`` (``"inf"``, ``"-inf"``), how the summaries that
    are strict JSON (``search.json``, ``grid_search.json``) write such
    floats, is read back as the float.

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
    check_str(where, 'where')
    allowed_modules = _check_allowed_modules(allowed_modules)
    check_str(model_package, 'model_package', allow_none=True)
    return _decode(value, where, allowed_modules, model_package,
                   where.rsplit('/', 1)[-1] in _PLAIN_KEYS)


def _strict_json_value(data: JSONData) -> JSONData:
    """JSON-ready data with every NaN or infinite float written as strict JSON can hold it.

    Such a float becomes ``{"__float__": "nan"}`` (``"inf"``, ``"-inf"``), which
    :func:`from_json_value` reads back as the float: files promised to be strict
    JSON (``search.json``, ``grid_search.json``) keep such parameters exactly.

    Args:
        data: What :func:`to_json_value` returns.

    Returns:
        object: The same data, with no NaN or infinity left.

    Example:
        >>> _strict_json_value({'clip': [1.0, float('inf')]})
        {'clip': [1.0, {'__float__': 'inf'}]}
    """
    if isinstance(data, float) and not math.isfinite(data):
        return {'__float__': repr(data)}
    if isinstance(data, dict):
        return {key: _strict_json_value(item) for key, item in data.items()}
    if isinstance(data, list):
        return [_strict_json_value(item) for item in data]
    return data


def dumps_json(value: JSONData) -> str:
    """Formats JSON-ready data readably (indented, keys in their order), as strict JSON.

    Every JSON file researchutils writes (``experiment.json``, ``run_state.json``,
    ``search.json``, ``grid_search.json``) is strict JSON (RFC 8259), which any JSON
    reader takes: it holds no ``NaN`` or ``Infinity``, which :func:`json.dumps`
    would write, and every object key is a string, which :func:`json.dumps` would
    make of a number silently. Data that may hold such floats is converted first:
    parameters to ``{"__float__": "nan"}`` (read back as the float by
    :func:`from_json_value`), scores to ``null``.

    Args:
        value: Data for :func:`json.dumps`: None, bools, ints, finite floats,
            strings, and lists (tuples) and dicts with string keys of these.

    Returns:
        str: The text, ending with a newline.

    Raises:
        ValueError: ``value`` holds a NaN or infinite float; the message gives
            where (``value['loss'][2]``).
        TypeError: ``value`` holds a key that is not a str, or a value JSON has
            no type for (a NumPy scalar, a set, an object); the message gives where.

    Example:
        >>> print(dumps_json({"a": 1}), end='')
        {
          "a": 1
        }
    """
    _check_strict_json(value)
    return json.dumps(value, indent=2, allow_nan=False) + '\n'


def _check_strict_json(data: object) -> None:
    """Refuses what strict JSON cannot hold, naming where (without recursion)."""
    pending: list[tuple[object, str]] = [(data, 'value')]
    while pending:
        value, where = pending.pop()
        if value is None or isinstance(value, (bool, int, str)):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError('{} is {!r}: strict JSON has no NaN or infinity (write null, '
                                 'or what _strict_json_value writes)'.format(where, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise TypeError('{} has the key {!r} of type {}: JSON object keys are '
                                    'strings'.format(where, key, type(key).__name__))
                pending.append((item, '{}[{!r}]'.format(where, key)))
        elif isinstance(value, (list, tuple)):
            pending.extend((item, '{}[{}]'.format(where, index))
                           for index, item in enumerate(value))
        else:
            raise TypeError('{} is {!r} of type {}, which JSON has no type for'.format(
                where, value, type(value).__name__))


class _RepeatedKey(ValueError):
    """A key given twice in one JSON object (raised inside the parser, reported by load_json)."""


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _RepeatedKey(key, data[key], value)
        data[key] = value
    return data


def _depth(data: object) -> int:
    """How deeply ``data`` nests lists and dicts (0 for a plain value), without recursion."""
    deepest, pending = 0, [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            break
        pending.extend((item, depth + 1) for item in value)
    return deepest


def load_json(path: str | os.PathLike[str]) -> Any:
    """Reads a JSON file strictly; every error names the file.

    The one reader of the JSON files an experiment keeps (``experiment.json``,
    ``run_state.json``); use it, rather than :func:`json.load`, for a
    :meth:`Parameters.from_json <researchutils.chainer.training.Parameters.from_json>`
    file of your own. Beyond :func:`json.load` it refuses a key given twice in
    one object (``json`` keeps the last silently, so what a reader of the file
    sees is not what runs) and lists and objects nested deeper than
    :data:`MAX_JSON_DEPTH` levels (``json`` raises RecursionError far down).
    ``NaN`` and ``Infinity``, which files written by researchutils before its
    JSON files became strict may hold, are read.

    Args:
        path (str or os.PathLike): The file, UTF-8 encoded.

    Returns:
        object: The data, as :func:`json.load` gives it.

    Raises:
        json.JSONDecodeError: The text is not JSON (a trailing comma...): the
            message starts with the file and gives the line and column.
        ValueError: A key is repeated (the message names it), the data nests
            too deeply, or Python cannot convert a value (an integer longer than
            ``sys.get_int_max_str_digits()``); the message names the file.
        UnicodeDecodeError: The file is not UTF-8; a note names the file.
        OSError: The file cannot be read (the error names it).
        TypeError: ``path`` is not a str or an ``os.PathLike`` (a NUL byte in it is
            a ValueError).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), 'settings.json')
        >>> with open(path, 'w') as stream:
        ...     _ = stream.write('{"alpha": 0.01, "alpha": 1000.0}')
        >>> load_json(path)
        Traceback (most recent call last):
        ...
        ValueError: ...settings.json: the key 'alpha' appears twice in one object ...
    """
    path = check_path(path, 'path')
    with open(path, encoding='utf-8') as stream:
        try:
            text = stream.read()
        except UnicodeDecodeError as error:
            add_note(error, 'while reading the JSON file {!r}, which must be UTF-8'.format(path))
            raise
    try:
        data = json.loads(text, object_pairs_hook=_refuse_repeated_keys)
        too_deep = _depth(data) > MAX_JSON_DEPTH
    except json.JSONDecodeError as error:
        raise json.JSONDecodeError('{}: not valid JSON: {}'.format(path, error.msg), error.doc,
                                   error.pos) from None
    except _RepeatedKey as error:
        key, first, second = error.args
        raise ValueError('{}: the key {!r} appears twice in one object ({!r}, then {!r}): '
                         'keep only the value you mean'.format(path, key, first, second)
                         ) from None
    except RecursionError:
        too_deep = True  # nested past Python's recursion limit
    except ValueError as error:
        # What json passes on from Python's own conversions, such as an integer longer
        # than sys.get_int_max_str_digits() (4300 digits by default): named, kept as cause.
        raise ValueError('{}: a value cannot be read: {}'.format(path, error)) from error
    if too_deep:
        raise ValueError('{}: lists and objects nest deeper than {} levels, which no saved '
                         'experiment or parameters do'.format(path, MAX_JSON_DEPTH))
    return data
