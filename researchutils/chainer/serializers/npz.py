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
import os
import warnings
from typing import TypeVar

from chainer.serializers import npz as chainer_npz
from chainer.training import Trainer

from researchutils import _files
from researchutils._checks import check_bool, check_path
from researchutils.chainer.serializers import _load_checks
from researchutils.chainer.serializers._load_checks import Serializable as _Serializable

__all__ = ['save_model', 'load_model', 'load_snapshot', 'load_model_from_snapshot']


#: The model a load function loads into, and returns.
_Target = TypeVar('_Target', bound=_Serializable)


def _check_path(path: object) -> str:
    return check_path(path, 'path')


def _check_serializable(value: object, name: str) -> None:
    if not callable(getattr(value, 'serialize', None)):
        raise TypeError('{} must be a Chainer Link (an object with a serialize method), '
                        'got {!r}'.format(name, value))


def save_model(path: str | os.PathLike[str], model: _Serializable,
               compression: bool = True, *, overwrite: bool = False) -> None:
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
        ValueError: ``path`` already exists (and ``overwrite`` is False; the
            message says so), or is a folder.
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
    if os.path.isdir(path):
        raise ValueError('path {!r} is a folder; save_model writes one file: give the path of '
                         'a file, such as {!r}'.format(path, os.path.join(path, 'model.npz')))
    if not overwrite and os.path.lexists(path):
        raise ValueError('path {!r} already exists; save_model never overwrites a file: pass '
                         'overwrite=True to replace it'.format(path))
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


def _deserialize(path: str, target: _Serializable, prefix: str, what: str,
                 strict: bool = True, stacklevel: int = 3) -> None:
    """Loads ``path`` into ``target`` once every check has passed; warns (naming them) of the
    arrays under ``prefix`` that a link lacks, when not ``strict``, as a warning of the frame
    ``stacklevel`` levels up (the public function's caller)."""
    try:
        unused = _load_checks.checked_load(path, target, prefix, what, strict)
    except _load_checks.Mismatch as error:
        raise ValueError(*error.args) from None
    if unused:
        warnings.warn('{!r} holds arrays the {} does not have, left unused: {}; load with '
                      'strict=True to refuse such a file'.format(
                          path, what, _load_checks.shown_keys(unused)), stacklevel=stacklevel)


def _load_into(path: str | os.PathLike[str], target: _Target, what: str,
               strict: bool) -> _Target:
    # '' is a file that does not exist, as it was for the original (a script's default
    # of '' for "no file to load").
    path = check_path(path, 'path', allow_empty=True)
    if not path or not os.path.exists(path):
        warnings.warn('{} file {!r} does not exist; the {} is left unchanged'.format(
            what, path, what), stacklevel=3)
        return target
    _deserialize(path, target, '', what, strict, stacklevel=4)
    return target


def load_model(path: str | os.PathLike[str], model: _Target, *,
               strict: bool = False) -> _Target:
    """Loads a model's parameters from an npz file, in place, and returns the model.

    A missing file (or the empty path ``''``) leaves the model unchanged, warns
    once naming the path, and still returns the model, so a script can start
    fresh or continue.

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
        IsADirectoryError: ``path`` is a folder.

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
