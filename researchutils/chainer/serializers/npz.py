"""Save and load models and Trainer snapshots as npz, safely.

:func:`save_model` never overwrites and writes atomically; the ``load_*``
functions return what they loaded into, and turn a corrupt file or a model
that does not match the file into an error that names the file.

Loading never unpickles, so a file from a stranger cannot run code: arrays are
read with pickling refused, only the arrays the target needs are read, and a
file holding a pickled object array is refused (the None values Chainer itself
writes are recognised without unpickling).
"""
from __future__ import annotations

import errno
import numbers
import os
import warnings
from collections.abc import Iterable
from typing import Any, Protocol, TypeAlias, TypeVar

import chainer
import numpy
from chainer import serializer as chainer_serializer
from chainer.serializers import npz as chainer_npz
from chainer.training import Trainer
from numpy.typing import NDArray

from researchutils import _files
from researchutils._checks import check_bool
from researchutils._typing import Array, Variable
from researchutils.chainer.serializers import _safe_npz

__all__ = ['save_model', 'load_model', 'load_snapshot', 'load_model_from_snapshot']


class _Serializable(Protocol):
    """What these functions save and load: a Chainer Link, or any object with Chainer's
    serialize protocol (a Link is Any to mypy, so it always is one)."""

    def serialize(self, serializer: Any, /) -> object: ...


#: The model a load function loads into, and returns.
_Target = TypeVar('_Target', bound=_Serializable)
#: A value Chainer's serialize protocol passes: an array, a Variable, a number, a string,
#: or None for a lazy parameter not yet initialized.
_Value: TypeAlias = Array | Variable | numbers.Number | str | bytes | None


def _check_path(path: object) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError('path must be a str or os.PathLike, got {!r}'.format(path))
    return os.fspath(path)


def _check_serializable(value: object, name: str) -> None:
    if not callable(getattr(value, 'serialize', None)):
        raise TypeError('{} must be a Chainer Link (an object with a serialize method), '
                        'got {!r}'.format(name, value))


def save_model(path: str | os.PathLike[str], model: _Serializable, compression: bool = True,
               *, overwrite: bool = False) -> None:
    """Saves a model's parameters and persistent values to a new npz file.

    The file is first written to a temporary file in the same folder, flushed
    to disk and then moved to ``path`` (a hard link made only if the name is still
    free, then the temporary name removed), so a crash or
    a full disk never leaves a partial file at ``path``, nor a temporary file
    beside it. Missing parent folders are created. An existing file is never
    overwritten, unless ``overwrite`` says so: then the complete new file
    replaces it in one step (``os.replace``), keeping its mode, so a reader
    sees the old model or the new one, never a mix (the best model a
    :class:`~researchutils.chainer.training.extensions.BestModelSaver` keeps).

    Args:
        path (str or os.PathLike): File to create; it must not exist yet
            (unless ``overwrite``).
        model (chainer.Link): Model (or any object with Chainer's serialize
            protocol) whose parameters are saved.
        compression (bool): If ``True``, the arrays are zip-compressed.
        overwrite (bool): Replace the file at ``path`` if there is one.

    Raises:
        ValueError: ``path`` already exists (and ``overwrite`` is False).
        NotADirectoryError: A parent of ``path`` is a file; the message names
            ``path`` and that file.
        OSError: The file could not be written (for instance, the disk is
            full); ``path`` names it and nothing is left behind.

    Example:
        >>> import os, tempfile
        >>> import chainer.links as L
        >>> path = os.path.join(tempfile.mkdtemp(), 'models', 'linear.npz')
        >>> save_model(path, L.Linear(3, 2))
        >>> model = load_model(path, L.Linear(3, 2))
        >>> model.W.shape
        (2, 3)
    """
    path = _check_path(path)
    _check_serializable(model, 'model')
    overwrite = check_bool(overwrite, 'overwrite')
    if not overwrite and os.path.lexists(path):
        raise ValueError('path {!r} already exists; save_model never overwrites a file'
                         .format(path))
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise _folder_error(path, folder, error) from error
    try:
        _files.write_atomically(
            path, lambda file: chainer_npz.save_npz(file, model, compression=compression),
            overwrite=overwrite)
    except FileExistsError:
        raise ValueError('path {!r} was created by someone else while the model was being '
                         'saved; save_model never overwrites a file'.format(path)) from None
    except OSError as error:
        raise OSError(error.errno, 'could not save the model to {!r}: {}'.format(
            path, error.strerror or error)) from error


def _folder_error(path: str, folder: str, error: OSError) -> OSError:
    """The error of a save whose folder could not be made or written, naming ``path``."""
    if isinstance(error, (FileExistsError, NotADirectoryError)):
        # makedirs met a file where a folder of the path should be.
        blocking = folder
        while not os.path.exists(blocking) and os.path.dirname(blocking) != blocking:
            blocking = os.path.dirname(blocking)
        return NotADirectoryError(errno.ENOTDIR, 'could not save the model to {!r}: {!r} is a '
                                  'file, not a folder'.format(path, blocking))
    return OSError(error.errno, 'could not save the model to {!r}: its folder {!r} cannot be '
                   'created: {}'.format(path, folder, error.strerror or error))


class _KeyRecorder(chainer_serializer.Serializer):
    """Collects what a target would save (key to current value), copying nothing."""

    def __init__(self, found: dict[str, _Value], path: str) -> None:
        self.found = found
        self.path = path

    def __getitem__(self, key: str) -> _KeyRecorder:
        return _KeyRecorder(self.found, self.path + key.strip('/') + '/')

    def __call__(self, key: str, value: _Value) -> _Value:
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

    def check_fits(self, key: str, value: _Value) -> None:
        """Refuses, from its header, an array that cannot fit ``value``, before reading it.

        NpzDeserializer copies an array into the current value (broadcasting), so one
        with more elements can never fit, nor can a non-numeric one, and a number takes
        a shape () array. Where the value says nothing of the size (None: a lazy
        parameter; a string), at most ``_safe_npz.MAX_UNSIZED_BYTES`` are read. A
        refused array is not even decompressed.
        """
        shape = self.archive.shapes.get(key)
        dtype = self.archive.dtypes.get(key)
        if shape is None or dtype is None:  # not in the file, or Chainer's None (both None)
            return
        if isinstance(value, chainer.Variable):
            value = value.array
        problem = None
        if value is None or isinstance(value, (str, bytes)) or not isinstance(
                value, numbers.Number) and getattr(value, 'size', None) is None:
            if _safe_npz.nbytes(shape, dtype) > _safe_npz.MAX_UNSIZED_BYTES:
                problem = 'holds more than MAX_UNSIZED_BYTES = {} bytes'.format(
                    _safe_npz.MAX_UNSIZED_BYTES)
        elif isinstance(value, numbers.Number):
            if shape != ():
                problem = 'does not fit the single number the {} holds there'.format(self.what)
        elif dtype.kind not in 'biufc':
            problem = 'is not numeric, so it does not fit the {}\'s array'.format(self.what)
        elif numpy.prod(shape, dtype=float) > value.size:
            problem = 'does not fit the {}\'s {}'.format(self.what, value.shape)
        if problem is not None:
            raise _safe_npz.UnreadableFile('{!r}: array {!r} has shape {} and dtype {}, which '
                                           '{}'.format(self.archive.path, key, shape,
                                                       dtype.str, problem))


class _CheckedDeserializer(chainer_npz.NpzDeserializer):
    """NpzDeserializer that checks an array's size against the value before reading it."""

    def __getitem__(self, key: str) -> _CheckedDeserializer:
        return _CheckedDeserializer(self.npz, self.path + key.strip('/') + '/',
                                    strict=self.strict)

    def __call__(self, key: str, value: _Value) -> _Value:
        self.npz.check_fits(self.path + key.lstrip('/'), value)
        return super().__call__(key, value)


def _read_ahead(mapping: _ReadAheadArrays, link: _Serializable, prefix: str) -> None:
    """Reads every array ``link`` needs before any is loaded, so a bad one changes nothing.

    Only for a Link, whose saving and loading visit the same keys; a Trainer's saving
    needs a started Trainer, so a Trainer's arrays are read as it asks for them.
    """
    expected: dict[str, _Value] = {}
    link.serialize(_KeyRecorder(expected, prefix))
    for key, value in expected.items():
        if key in mapping.archive:
            mapping.check_fits(key, value)
            mapping.arrays[key] = mapping.archive[key]


def _model_prefixes(keys: Iterable[str]) -> list[str]:
    prefixes: set[str] = set()
    for key in keys:
        head, sep, _ = key.partition('model:')
        if sep:
            name = key[len(head) + len(sep):].split('/', 1)[0]
            prefixes.add(head + sep + name + '/')
    return sorted(prefixes)


def _deserialize(path: str, target: _Serializable, prefix: str, what: str) -> None:
    with _safe_npz.open_archive(path) as archive:
        if prefix and not any(key.startswith(prefix) for key in archive.shapes):
            raise KeyError('{!r} has no arrays under {!r} needed by the {}; the models it holds '
                           'are under {}'.format(path, prefix, what,
                                                 _model_prefixes(archive.shapes)
                                                 or 'no "model:" key'))
        mapping = _ReadAheadArrays(archive, what)
        if isinstance(target, chainer.Link):
            _read_ahead(mapping, target, prefix)
        deserializer = _CheckedDeserializer(mapping, path=prefix, strict=True)
        try:
            deserializer.load(target)
        except KeyError as error:
            raise KeyError('{!r} has no array {} needed by the {}'.format(
                path, error, what)) from error
        except _safe_npz.UnreadableFile:
            raise
        except (ValueError, TypeError) as error:
            raise type(error)('{!r}: array {!r} does not fit the {}: {}'.format(
                path, mapping.last_key, what, error)) from error


def _load_into(path: str | os.PathLike[str], target: _Target, what: str) -> _Target:
    path = _check_path(path)
    if not os.path.exists(path):
        warnings.warn('{} file {!r} does not exist; the {} is left unchanged'.format(
            what, path, what), stacklevel=3)
        return target
    _deserialize(path, target, '', what)
    return target


def load_model(path: str | os.PathLike[str], model: _Target) -> _Target:
    """Loads a model's parameters from an npz file, in place, and returns the model.

    A missing file leaves the model unchanged, warns once naming the path, and
    still returns the model, so a script can start fresh or continue.

    Args:
        path (str or os.PathLike): File written by :func:`save_model` or
            :func:`chainer.serializers.save_npz`.
        model (chainer.Link): Model to load into.

    Returns:
        chainer.Link: ``model``.

    Raises:
        ValueError: The file is truncated or corrupt, holds a pickled object
            array, or an array has the wrong shape for the model; the message
            names the file and the array. The model is then left unchanged.
        KeyError: The file lacks an array the model needs; the message names
            the file and the array.
        IsADirectoryError: ``path`` is a directory.

    Example:
        >>> import chainer.links as L
        >>> model = load_model('model.npz', L.Linear(3, 2))  # doctest: +SKIP
        >>> model.W.shape  # doctest: +SKIP
        (2, 3)
    """
    _check_serializable(model, 'model')
    return _load_into(path, model, 'model')


def load_snapshot(path: str | os.PathLike[str], trainer: Trainer) -> Trainer:
    """Loads a Trainer snapshot in place and returns the trainer.

    The snapshot is one written by :func:`chainer.training.extensions.snapshot`.
    A missing file leaves the trainer unchanged and warns once, as
    :func:`load_model` does.

    Args:
        path (str or os.PathLike): Snapshot file.
        trainer (chainer.training.Trainer): Trainer to resume.

    Returns:
        chainer.training.Trainer: ``trainer``.

    Raises:
        ValueError: The file is truncated or corrupt, or holds a pickled
            object array; the message names it and the array. Arrays are read
            as the trainer asks for them, so after this error the trainer may
            be partly loaded: build a new one.
        KeyError: The snapshot lacks a value the trainer needs.

    Example:
        >>> trainer = load_snapshot('result/snapshot_iter_100', trainer)  # doctest: +SKIP
        >>> trainer.run()  # doctest: +SKIP
    """
    if not isinstance(trainer, Trainer):
        raise TypeError('trainer must be a chainer.training.Trainer, got {!r}'.format(trainer))
    return _load_into(path, trainer, 'trainer')


def load_model_from_snapshot(path: str | os.PathLike[str], model: _Target,
                             key: str = 'updater/model:main/') -> _Target:
    """Loads a model's weights out of a Trainer snapshot and returns the model.

    A Trainer snapshot stores the model of the updater's optimizer ``main``
    under ``updater/model:main/``; this reads just those arrays into
    ``model``. Unlike :func:`load_model`, a missing file is an error, since
    the weights are what the caller asked for.

    Args:
        path (str or os.PathLike): Snapshot file.
        model (chainer.Link): Model to load into; the same architecture as
            the trainer's model (for a classifier wrapped in
            ``L.Classifier``, pass the wrapper or use
            ``key='updater/model:main/predictor/'``).
        key (str): Prefix of the model's arrays in the snapshot.

    Returns:
        chainer.Link: ``model``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        KeyError: No arrays under ``key``, or one the model needs is
            missing; the message lists the model prefixes the file holds.
        ValueError: The file is truncated or corrupt, holds a pickled object
            array, or an array has the wrong shape.

    Example:
        >>> model = load_model_from_snapshot(
        ...     'result/snapshot_iter_100', L.Classifier(MLP()))  # doctest: +SKIP
    """
    path = _check_path(path)
    _check_serializable(model, 'model')
    if not isinstance(key, str):
        raise TypeError('key must be a str, got {!r}'.format(key))
    if key and not key.endswith('/'):
        key += '/'
    if not os.path.exists(path):
        raise FileNotFoundError('snapshot {!r} does not exist'.format(path))
    _deserialize(path, model, key, 'model')
    return model
