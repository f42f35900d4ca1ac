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
from researchutils._checks import check_bool, check_path
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
    return check_path(path, 'path')


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
    a full disk never leaves a partial file at ``path``; a failed write leaves no
    temporary file beside it either, and the one a hard kill (SIGKILL) leaves is
    removed by the next save to ``path`` (never a live writer's). Missing parent
    folders are created. An existing file is never
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
    compression = check_bool(compression, 'compression')
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
    except OSError as error:
        # A FileExistsError is the path made meanwhile only when it now exists; otherwise
        # no name was free for the temporary file, an OSError like any other of the folder.
        if isinstance(error, FileExistsError) and not overwrite and os.path.lexists(path):
            raise ValueError('path {!r} was created by someone else while the model was '
                             'being saved; save_model never overwrites a file'.format(
                                 path)) from None
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
            raise _Mismatch('{!r}: array {!r} has shape {} and dtype {}, which '
                                           '{}'.format(self.archive.path, key, shape,
                                                       dtype.str, problem))


class _Mismatch(ValueError):
    """An array that does not fit the target; raised to the caller as a plain ValueError."""


class _CheckedDeserializer(chainer_npz.NpzDeserializer):
    """NpzDeserializer that checks an array's size against the value before reading it."""

    def __getitem__(self, key: str) -> _CheckedDeserializer:
        return _CheckedDeserializer(self.npz, self.path + key.strip('/') + '/',
                                    strict=self.strict)

    def __call__(self, key: str, value: _Value) -> _Value:
        self.npz.check_fits(self.path + key.lstrip('/'), value)
        return super().__call__(key, value)


def _expected(link: _Serializable, prefix: str) -> dict[str, _Value]:
    """What loading ``link`` under ``prefix`` reads: key to the value it is loaded into.

    Only for a Link, whose saving and loading visit the same keys; a Trainer's saving
    needs a started Trainer, so a Trainer's own keys are read as it asks for them.
    """
    expected: dict[str, _Value] = {}
    link.serialize(_KeyRecorder(expected, prefix))
    return expected


def _keys(keys: Iterable[str]) -> str:
    keys = sorted(keys)
    shown = ', '.join(repr(key) for key in keys[:8])
    return shown + (' and {} more'.format(len(keys) - 8) if len(keys) > 8 else '')


def _check_link(mapping: _ReadAheadArrays, expected: dict[str, _Value], prefix: str,
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
        raise KeyError('{!r} has no array {} needed by the {}'.format(
            archive.path, _keys(missing), mapping.what))
    # In key order, so that the same file and model always name the same array (Chainer
    # visits a link's parameters in the order of string hashing).
    for key in sorted(expected):
        mapping.check_fits(key, expected[key])
    unused = [key for key in archive.shapes if key.startswith(prefix) and key not in expected]
    if unused and strict:
        raise ValueError('{!r} holds arrays the {} does not have: {}; it was saved from another '
                         'architecture (load it with strict=False to take the arrays the {} '
                         'has)'.format(archive.path, mapping.what, _keys(unused), mapping.what))
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
                raise _Mismatch(
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


def _deserialize(path: str, target: _Serializable, prefix: str, what: str,
                 strict: bool = True, stacklevel: int = 3) -> None:
    """Loads ``path`` into ``target`` once every check has passed; warns (naming them) of the
    arrays under ``prefix`` that a link lacks, when not ``strict``, as a warning of the frame
    ``stacklevel`` levels up (the public function's caller)."""
    try:
        unused = _checked_load(path, target, prefix, what, strict)
    except _Mismatch as error:
        raise ValueError(*error.args) from None
    if unused:
        warnings.warn('{!r} holds arrays the {} does not have, left unused: {}; load with '
                      'strict=True to refuse such a file'.format(path, what, _keys(unused)),
                      stacklevel=stacklevel)


def _checked_load(path: str, target: _Serializable, prefix: str, what: str,
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
        except (_safe_npz.UnreadableFile, _Mismatch):
            raise
        except (ValueError, TypeError) as error:
            raise type(error)('{!r}: array {!r} does not fit the {}: {}'.format(
                path, mapping.last_key, what, error)) from error
    return unused


def _load_into(path: str | os.PathLike[str], target: _Target, what: str,
               strict: bool) -> _Target:
    path = _check_path(path)
    if not os.path.exists(path):
        warnings.warn('{} file {!r} does not exist; the {} is left unchanged'.format(
            what, path, what), stacklevel=3)
        return target
    _deserialize(path, target, '', what, strict, stacklevel=4)
    return target


def load_model(path: str | os.PathLike[str], model: _Target, *,
               strict: bool = False) -> _Target:
    """Loads a model's parameters from an npz file, in place, and returns the model.

    A missing file leaves the model unchanged, warns once naming the path, and
    still returns the model, so a script can start fresh or continue.

    Args:
        path (str or os.PathLike): File written by :func:`save_model` or
            :func:`chainer.serializers.save_npz`.
        model (chainer.Link): Model to load into.
        strict (bool): Refuse a file holding arrays the model does not have.
            By default they are left unused and named in a warning, so that a
            part of a larger model (a pretrained encoder) can be loaded.

    Returns:
        chainer.Link: ``model``.

    Raises:
        ValueError: The file is truncated or corrupt, holds a pickled object
            array, an array's shape is not exactly the model's (the message
            names the file, the array and both shapes) or its dtype does not
            cast to the model's, or (``strict``) it holds arrays the model
            lacks.
        KeyError: The file lacks an array the model needs; the message names
            the file and the array.
        IsADirectoryError: ``path`` is a directory.

    Every check is made before the first parameter is written: a refused
    load leaves the model as it was.

    Example:
        >>> import chainer.links as L
        >>> model = load_model('model.npz', L.Linear(3, 2))  # doctest: +SKIP
        >>> model.W.shape  # doctest: +SKIP
        (2, 3)
    """
    _check_serializable(model, 'model')
    strict = check_bool(strict, 'strict')
    return _load_into(path, model, 'model', strict)


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
            object array; the message names it and the array. The updater's
            models (and their optimizers' states) are checked first, strictly,
            so a snapshot of another architecture changes no parameter; the
            rest is read as the trainer asks for it, so after another error the
            trainer may be partly loaded: build a new one.
        KeyError: The snapshot lacks a value the trainer needs.

    Example:
        >>> trainer = load_snapshot('result/snapshot_iter_100', trainer)  # doctest: +SKIP
        >>> trainer.run()  # doctest: +SKIP
    """
    if not isinstance(trainer, Trainer):
        raise TypeError('trainer must be a chainer.training.Trainer, got {!r}'.format(trainer))
    return _load_into(path, trainer, 'trainer', strict=True)


def load_model_from_snapshot(path: str | os.PathLike[str], model: _Target,
                             key: str = 'updater/model:main/', *,
                             strict: bool = False) -> _Target:
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
        strict (bool): Refuse a snapshot holding arrays under ``key`` that the
            model does not have (by default a warning names them).

    Returns:
        chainer.Link: ``model``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        KeyError: No arrays under ``key``, or one the model needs is
            missing; the message lists the model prefixes the file holds.
        ValueError: The file is truncated or corrupt, holds a pickled object
            array, an array's shape is not exactly the model's, or
            (``strict``) it holds arrays under ``key`` the model lacks. Every
            check is made before the first parameter is written.

    Example:
        >>> model = load_model_from_snapshot(
        ...     'result/snapshot_iter_100', L.Classifier(MLP()))  # doctest: +SKIP
    """
    path = _check_path(path)
    _check_serializable(model, 'model')
    if not isinstance(key, str):
        raise TypeError('key must be a str, got {!r}'.format(key))
    strict = check_bool(strict, 'strict')
    if key and not key.endswith('/'):
        key += '/'
    if not os.path.exists(path):
        raise FileNotFoundError('snapshot {!r} does not exist'.format(path))
    _deserialize(path, model, key, 'model', strict)
    return model
