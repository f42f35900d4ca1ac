"""Checking an npz file against the model or trainer it is loaded into, then loading it.

Every array the target needs is checked from the file's headers before the first
one is read or written: none missing, each exactly the target's shape and of a
dtype that casts within its kind. So a refused load changes nothing, and an array
NumPy would broadcast (a smaller one) never gets in. The public functions are in
:mod:`~researchutils.chainer.serializers.npz`; the tests of both are in
``tests/chainer/serializers/test_npz.py``.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any, Protocol, TypeAlias

import chainer
import numpy
from chainer import serializer as chainer_serializer
from chainer.serializers import npz as chainer_npz
from chainer.training import Trainer
from numpy.typing import NDArray

from researchutils._typing import Array, Variable
from researchutils.chainer.serializers import _safe_npz


class Serializable(Protocol):
    """What the serializers save and load: a Chainer Link, or any object with Chainer's
    serialize protocol (a Link is Any to mypy, so it always is one)."""

    def serialize(self, serializer: Any, /) -> object: ...


#: A value Chainer's serialize protocol passes: an array, a Variable, a number, a string,
#: or None for a lazy parameter not yet initialized.
Value: TypeAlias = Array | Variable | numbers.Number | str | bytes | None


class _KeyRecorder(chainer_serializer.Serializer):
    """Collects what a target would save (key to current value), copying nothing."""

    def __init__(self, found: dict[str, Value], path: str) -> None:
        self.found = found
        self.path = path

    def __getitem__(self, key: str) -> _KeyRecorder:
        return _KeyRecorder(self.found, self.path + key.strip('/') + '/')

    def __call__(self, key: str, value: Value) -> Value:
        self.found[self.path + key.lstrip('/')] = value
        return value


class _ReadAheadArrays(object):
    """Mapping for NpzDeserializer: arrays read ahead first, then the archive.

    It remembers the last key looked up, for error messages.
    """

    def __init__(self, archive: _safe_npz.Archive, what: str) -> None:
        self.archive = archive
        self.arrays: dict[str, NDArray[Any]] = {}
        self.what = what
        self.last_key: str | None = None

    def __contains__(self, key: object) -> bool:
        return key in self.archive

    def __getitem__(self, key: str) -> NDArray[Any]:
        self.last_key = key
        if key in self.arrays:
            return self.arrays.pop(key)
        return self.archive[key]

    def check_fits(self, key: str, value: Value) -> None:
        """Refuses, from its header, an array that does not fit ``value``, before reading it.

        An array must have exactly the shape of the value it is loaded into (NumPy would
        broadcast a smaller one into it, silently) and a dtype that casts to the value's
        within its kind; a number takes a shape () array. Where the value says nothing of
        the size (None: a lazy parameter; a string), at most ``_safe_npz.MAX_UNSIZED_BYTES``
        are read. A refused array is not even decompressed.
        """
        shape = self.archive.shapes.get(key)
        dtype = self.archive.dtypes.get(key)
        if shape is None or dtype is None:  # not in the file, or Chainer's None (both None)
            return
        if isinstance(value, chainer.Variable):
            value = value.array
        problem = None
        if value is None or isinstance(value, (str, bytes)) or not isinstance(
                value, numbers.Number) and getattr(value, 'shape', None) is None:
            if _safe_npz.nbytes(shape, dtype) > _safe_npz.MAX_UNSIZED_BYTES:
                problem = 'holds more than MAX_UNSIZED_BYTES = {} bytes'.format(
                    _safe_npz.MAX_UNSIZED_BYTES)
        elif isinstance(value, numbers.Number):
            if shape != ():
                problem = 'does not fit the single number the {} holds there'.format(self.what)
        elif dtype.kind not in 'biufc':
            problem = 'is not numeric, so it does not fit the {}\'s array'.format(self.what)
        elif tuple(shape) != tuple(value.shape):
            problem = 'is not the shape {} of the {}\'s array'.format(tuple(value.shape),
                                                                     self.what)
        elif not numpy.can_cast(dtype, numpy.dtype(value.dtype), casting='same_kind'):
            problem = 'does not cast to the {}\'s {}'.format(self.what,
                                                           numpy.dtype(value.dtype).str)
        if problem is not None:
            raise Mismatch('{!r}: array {!r} has shape {} and dtype {}, which '
                                           '{}'.format(self.archive.path, key, shape,
                                                       dtype.str, problem))


class Mismatch(ValueError):
    """An array that does not fit the target; raised to the caller as a plain ValueError."""


class _CheckedDeserializer(chainer_npz.NpzDeserializer):
    """NpzDeserializer that checks an array's size against the value before reading it."""

    def __getitem__(self, key: str) -> _CheckedDeserializer:
        return _CheckedDeserializer(self.npz, self.path + key.strip('/') + '/',
                                    strict=self.strict)

    def __call__(self, key: str, value: Value) -> Value:
        self.npz.check_fits(self.path + key.lstrip('/'), value)
        return super().__call__(key, value)


def _expected(link: Serializable, prefix: str) -> dict[str, Value]:
    """What loading ``link`` under ``prefix`` reads: key to the value it is loaded into.

    Only for a Link, whose saving and loading visit the same keys; a Trainer's saving
    needs a started Trainer, so a Trainer's own keys are read as it asks for them.
    """
    expected: dict[str, Value] = {}
    link.serialize(_KeyRecorder(expected, prefix))
    return expected


def shown_keys(keys: Iterable[str]) -> str:
    """The first eight of ``keys`` in order, quoted, and how many more there are."""
    keys = sorted(keys)
    shown = ', '.join(repr(key) for key in keys[:8])
    return shown + (' and {} more'.format(len(keys) - 8) if len(keys) > 8 else '')


def _prefix_hint(path: str, expected: list[str], held: list[str], prefix: str) -> str:
    """How to load the file when it holds the link's names under one prefix more or less.

    A file saved from an ``L.Classifier`` holds its predictor's arrays under
    ``predictor/``; a file saved from the predictor alone lacks that prefix. Either way
    every name the link needs is there but for one prefix, which the message names.
    """
    held_set = set(held)
    names = [key[len(prefix):] for key in expected]
    if not names:
        return ''
    # The file holds the link under a prefix: 'predictor/W' for the link's 'W'.
    first = names[0]
    for key in sorted(held):
        if key.endswith('/' + first):
            outer = key[:len(key) - len(first)]
            if all(outer + name in held_set for name in names):
                return ('. These are the model\'s names under {!r}: the file was saved from '
                        'a model that holds this one there (as an L.Classifier holds its '
                        'predictor). Load them with load_model_from_snapshot({!r}, model, '
                        'key={!r}), or chainer.serializers.load_npz(..., path={!r})'.format(
                            outer, path, outer, outer))
    # The link holds the file's model as a child: the link's 'predictor/W' for 'W'.
    child = first.split('/', 1)[0] + '/'
    if '/' in first and all(name.startswith(child) and prefix + name[len(child):] in held_set
                            for name in names):
        return ('. The file holds what the model has under {!r} alone: load it into that '
                'part, load_model({!r}, model.{})'.format(child, path, child.rstrip('/')))
    return ''


def _check_link(mapping: _ReadAheadArrays, expected: dict[str, Value], prefix: str,
                strict: bool) -> list[str]:
    """Checks every array a link needs against the file before any is loaded: none missing,
    each of the value's shape and kind, and (``strict``) no array under ``prefix`` that the
    link lacks. Reads the needed arrays ahead, so that loading them can no longer fail
    half-way.

    Returns:
        list: The keys under ``prefix`` that the link lacks (empty when ``strict``).
    """
    archive = mapping.archive
    missing = [key for key in expected if key not in archive]
    if missing:
        raise KeyError('{!r} has no array {} needed by the {}; it holds {}{}'.format(
            archive.path, shown_keys(missing), mapping.what, shown_keys(archive.shapes),
            _prefix_hint(archive.path, list(expected), list(archive.shapes), prefix)))
    # In key order, so that the same file and model always name the same array (Chainer
    # visits a link's parameters in the order of string hashing).
    for key in sorted(expected):
        mapping.check_fits(key, expected[key])
    unused = [key for key in archive.shapes if key.startswith(prefix) and key not in expected]
    if unused and strict:
        raise ValueError('{!r} holds arrays the {} does not have: {}; it was saved from another '
                         'architecture (load it with strict=False to take the arrays the {} '
                         'has)'.format(archive.path, mapping.what, shown_keys(unused),
                                       mapping.what))
    for key in expected:
        mapping.arrays[key] = archive[key]
    return unused


def _check_trainer(mapping: _ReadAheadArrays, trainer: Trainer) -> None:
    """Checks the models of a snapshot, and their optimizers' per-parameter states, against
    ``trainer``'s before anything is loaded, strictly: a snapshot of another architecture
    changes no parameter."""
    # A StandardUpdater (and Chainer's other updaters) saves each optimizer's target under
    # updater/model:<name>/ and its states under updater/optimizer:<name>/<parameter>/.
    optimizers: dict[str, Any] = getattr(trainer.updater, 'get_all_optimizers', dict)()
    for name, optimizer in optimizers.items():
        target = getattr(optimizer, 'target', None)
        if not isinstance(target, chainer.Link):
            continue
        model_prefix = 'updater/model:{}/'.format(name)
        _check_link(mapping, _expected(target, model_prefix), model_prefix, strict=True)
        prefix = 'updater/optimizer:{}/'.format(name)
        params = dict(target.namedparams())
        for key, shape in mapping.archive.shapes.items():
            head, _, _state = key[len(prefix) - 1:].rpartition('/')
            param = params.get(head) if key.startswith(prefix) else None
            if param is None or param.array is None or not shape:
                continue
            if tuple(shape) != tuple(param.shape):
                raise Mismatch(
                    '{!r}: array {!r} has shape {}, which is not the shape {} of the '
                    'parameter {!r} it belongs to: the snapshot is of another architecture'
                    .format(mapping.archive.path, key, tuple(shape), tuple(param.shape),
                            head))


def _model_prefixes(keys: Iterable[str]) -> list[str]:
    prefixes: set[str] = set()
    for key in keys:
        head, sep, _ = key.partition('model:')
        if sep:
            name = key[len(head) + len(sep):].split('/', 1)[0]
            prefixes.add(head + sep + name + '/')
    return sorted(prefixes)


def checked_load(path: str, target: Serializable, prefix: str, what: str,
                  strict: bool) -> list[str]:
    """Checks ``path`` against ``target`` and loads it; the unused keys (see _check_link)."""
    unused: list[str] = []
    with _safe_npz.open_archive(path) as archive:
        if prefix and not any(key.startswith(prefix) for key in archive.shapes):
            raise KeyError('{!r} has no arrays under {!r} needed by the {}; the models it holds '
                           'are under {}'.format(path, prefix, what,
                                                 _model_prefixes(archive.shapes)
                                                 or 'no "model:" key'))
        mapping = _ReadAheadArrays(archive, what)
        if isinstance(target, chainer.Link):
            unused = _check_link(mapping, _expected(target, prefix), prefix, strict)
        elif isinstance(target, Trainer):
            _check_trainer(mapping, target)
        deserializer = _CheckedDeserializer(mapping, path=prefix, strict=True)
        try:
            deserializer.load(target)
        except KeyError as error:
            raise KeyError('{!r} has no array {} needed by the {}'.format(
                path, error, what)) from error
        except (_safe_npz.UnreadableFile, Mismatch):
            raise
        except (ValueError, TypeError) as error:
            raise type(error)('{!r}: array {!r} does not fit the {}: {}'.format(
                path, mapping.last_key, what, error)) from error
    return unused

