"""Reading npz files without ever unpickling: the reader under the ``load_*`` functions of npz.

:func:`open_archive` opens a file as an :class:`Archive`, which reads every member's header at
once (so a pickled object array anywhere in the file is refused before anything is loaded) and
each array only when asked for, with pickling refused. The one pickle accepted is the
``numpy.asarray(None)`` that Chainer writes for a None value, recognised by
:func:`is_chainers_none` without running it (the unpickler it uses holds no shared state).
Only regular files are opened, only stored and deflate members read, only boolean, numeric and
single-string arrays accepted, and each member must be exactly as long as its header says, so
reading an array never takes more memory than its header declares (which the loaders check
against the target before reading).

Tests: ``tests/chainer/serializers/test_safe_npz.py`` and ``test_npz.py``.
"""
from __future__ import annotations

import errno
import functools
import io
import math
import os
import pickle
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, NoReturn, SupportsIndex, TypeVar

import numpy
from numpy.typing import NDArray

# Errors numpy and zipfile raise for a file that is not a complete npz archive.
_CORRUPT_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError)
_Result = TypeVar('_Result')
#: An array's shape and dtype as its .npy header gives them.
_Header = tuple[tuple[int, ...], numpy.dtype[Any]]


def nbytes(shape: Iterable[SupportsIndex], dtype: numpy.dtype[Any]) -> int:
    """The bytes of an array of ``shape`` and ``dtype``, in exact integers."""
    return math.prod(int(n) for n in shape) * dtype.itemsize


class UnreadableFile(ValueError):
    """A file that cannot be loaded (corrupt, or holding a pickle); the message names it."""


class _RecordedCall(object):
    """Stands for a call a pickle asks for; it records the call instead of making it."""

    def __init__(self, name: str, *args: object) -> None:
        self.name = name
        self.args = args
        self.state: object = None

    def __setstate__(self, state: object) -> None:
        self.state = state


_NDARRAY = object()
# What a pickle may name, and what it gets instead: records, never the real callables. A new
# record maker per lookup, so a pickle's BUILD can change nothing shared.
_NONE_PICKLE_GLOBALS = {
    ('numpy.core.multiarray', '_reconstruct'): 'array',
    ('numpy._core.multiarray', '_reconstruct'): 'array',
    ('numpy', 'ndarray'): None,
    ('numpy', 'dtype'): 'dtype',
    ('_codecs', 'encode'): 'encode',  # protocol 2 writes bytes as _codecs.encode(str, 'latin1')
}
# NumPy's pickle of numpy.asarray(None) is at most a few hundred bytes.
_MAX_NONE_PICKLE = 1024
# The most bytes an array may have when the target's own size says nothing: a lazy parameter
# (None until loaded), a number, a string (the LogReport's log). Raise it for larger ones.
MAX_UNSIZED_BYTES = 512 * 2 ** 20
# Array kinds read: booleans, numbers, and (shape () only) strings; 'O' only Chainer's None.
_NUMERIC_KINDS = 'biufc'
_STRING_KINDS = 'US'


class _ChainerNoneUnpickler(pickle.Unpickler):
    """Reads the pickle of ``numpy.asarray(None)`` as records of calls, running none of them."""

    def find_class(self, module: str, name: str) -> object:
        try:
            record = _NONE_PICKLE_GLOBALS[module, name]
        except KeyError:
            raise pickle.UnpicklingError('the pickle names {}.{}'.format(module, name)) from None
        return _NDARRAY if record is None else functools.partial(_RecordedCall, record)

    def persistent_load(self, pid: object) -> NoReturn:
        raise pickle.UnpicklingError('the pickle holds a persistent id')


def _is_bytes(value: object, expected: bytes) -> bool:
    if isinstance(value, _RecordedCall):  # protocol 2
        return value.name == 'encode' and value.args == (expected.decode('latin1'), 'latin1')
    return value == expected


def is_chainers_none(payload: bytes) -> bool:
    """Whether ``payload`` is exactly the pickle NumPy writes for ``numpy.asarray(None)``.

    Chainer's DictionarySerializer saves a None value (a lazy parameter not yet
    initialized, an empty optimizer state) that way.
    """
    if len(payload) > _MAX_NONE_PICKLE:
        return False
    try:
        array = _ChainerNoneUnpickler(io.BytesIO(payload)).load()
        if not (isinstance(array, _RecordedCall) and array.name == 'array'
                and len(array.args) == 3 and array.args[:2] == (_NDARRAY, (0,))
                and _is_bytes(array.args[2], b'b') and isinstance(array.state, tuple)
                and len(array.state) == 5):
            return False
        version, shape, dtype, fortran_order, items = array.state
        return (version == 1 and shape == () and fortran_order is False and items == [None]
                and isinstance(dtype, _RecordedCall) and dtype.name == 'dtype'
                and dtype.args == ('O8', False, True)
                and dtype.state == (3, '|', None, None, None, -1, -1, 63))
    except Exception:
        return False


class Archive(object):
    """The arrays of an npz file, each read only when asked for, never unpickled.

    Opening reads every member's header, so a pickled object array anywhere in
    the file is refused before anything is loaded; only Chainer's pickled None
    is accepted, and read as ``numpy.asarray(None)`` without unpickling.
    """

    def __init__(self, path: str, file: BinaryIO | None = None) -> None:
        self.path = path
        self._file = file  # closed with the archive
        self._zip = zipfile.ZipFile(path if file is None else file)
        try:
            self.shapes: dict[str, tuple[int, ...] | None] = {}
            self.dtypes: dict[str, numpy.dtype[Any] | None] = {}
            for info in self._zip.infolist():
                if info.filename.endswith('.npy'):
                    key = info.filename[:-len('.npy')]
                    self._check_member(info, key)
                    self.shapes[key], self.dtypes[key] = self._guarded(
                        key, self._read_header, info, key)
        except BaseException:
            self._zip.close()
            raise

    def _check_member(self, info: zipfile.ZipInfo, key: str) -> None:
        # zipfile reads a bzip2 or lzma member whole on its first read, and raises
        # RuntimeError / NotImplementedError for an encrypted or unknown one.
        if info.flag_bits & 0x1:
            raise UnreadableFile('{!r} is not a readable npz file: array {!r} is encrypted'
                                 .format(self.path, key))
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnreadableFile('{!r} is not a readable npz file: array {!r} is compressed with '
                                 'method {}; only stored and deflate members (what NumPy and '
                                 'Chainer write) are read'.format(self.path, key,
                                                                  info.compress_type))

    def close(self) -> None:
        self._zip.close()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __contains__(self, key: object) -> bool:
        return key in self.shapes

    def __getitem__(self, key: str) -> NDArray[Any]:
        if key not in self.shapes:
            raise KeyError(key)
        if self.shapes[key] is None:
            return numpy.asarray(None)
        return self._guarded(key, self._read_array, key)

    def _guarded(self, key: str, read: Callable[..., _Result], *args: object) -> _Result:
        try:
            return read(*args)
        except UnreadableFile:
            raise
        except _CORRUPT_ERRORS as error:
            raise UnreadableFile(
                '{!r} is not a readable npz file (truncated or corrupt): array {!r}: {}: {}'
                .format(self.path, key, type(error).__name__, error)) from error

    def _read_header(self, info: zipfile.ZipInfo,
                     key: str) -> _Header | tuple[None, None]:
        """The shape and dtype of array ``key``, or (None, None) for Chainer's None.

        Refuses dtypes other than booleans, numbers and scalar strings, and a member whose
        size is not what its header says, so reading it can never take more memory than
        its header declares.
        """
        # NumPy 1.26's stubs leave numpy.lib.format's readers unannotated (NumPy 2's
        # annotate them), hence the ignores here and in _read_array.
        with self._zip.open(info) as member:
            version = numpy.lib.format.read_magic(member)  # type: ignore[no-untyped-call]
            if version == (1, 0):
                shape, _, dtype = numpy.lib.format.read_array_header_1_0(  # type: ignore[no-untyped-call]
                    member)
            elif version == (2, 0):
                shape, _, dtype = numpy.lib.format.read_array_header_2_0(  # type: ignore[no-untyped-call]
                    member)
            else:
                raise ValueError('.npy format version {} is not supported'.format(version))
            if dtype.hasobject:
                if dtype == numpy.dtype(object) and shape == () and is_chainers_none(
                        member.read(_MAX_NONE_PICKLE + 1)):
                    return None, None
                raise UnreadableFile(
                    '{!r} holds an object array under the key {!r}: it could only be read by '
                    'unpickling, which can run any code, so researchutils refuses it (only the '
                    'None values Chainer writes are read); load only what you trust with '
                    'numpy.load(..., allow_pickle=True)'.format(self.path, key))
            if dtype.subdtype is not None or dtype.fields is not None or not (
                    dtype.kind in _NUMERIC_KINDS or (dtype.kind in _STRING_KINDS
                                                     and shape == ())):
                raise UnreadableFile(
                    '{!r}: array {!r} has the dtype {!r}; only boolean and numeric arrays and '
                    'single strings are read'.format(self.path, key, dtype.str))
            expected = member.tell() + nbytes(shape, dtype)
        if info.file_size != expected:
            raise UnreadableFile(
                '{!r}: array {!r} has {} bytes, but its header (shape {}, dtype {}) says {}'
                .format(self.path, key, info.file_size, shape, dtype.str, expected))
        return shape, dtype

    def _read_array(self, key: str) -> NDArray[Any]:
        with self._zip.open(key + '.npy') as member:
            return numpy.lib.format.read_array(  # type: ignore[no-untyped-call]
                member, allow_pickle=False)


def open_archive(path: str) -> Archive:
    """Open ``path`` as an :class:`Archive`; an error that names ``path`` if it cannot be.

    Raises:
        IsADirectoryError: ``path`` is a folder.
        ValueError: ``path`` is not a complete zip archive, or a member is corrupt, or holds a
            pickled object array other than Chainer's None (:class:`UnreadableFile`).

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), 'arrays.npz')
        >>> np.savez(path, w=np.ones(3), nothing=np.asarray(None))
        >>> with open_archive(path) as archive:
        ...     archive.shapes['w'], archive['w'].tolist(), archive['nothing'].item()
        ((3,), [1.0, 1.0, 1.0], None)
    """
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, '{!r} is a folder, not an npz file'.format(path))
    # Opened without blocking, so a FIFO or a device is refused instead of waited on.
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0))
    file = os.fdopen(fd, 'rb')
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError('{!r} is not a regular file, so it is not read as an npz file'
                             .format(path))
        if not zipfile.is_zipfile(file):
            raise ValueError('{!r} is not a readable npz file: it is not a complete zip archive '
                             '(truncated, corrupt, or not written by save_npz)'.format(path))
        try:
            return Archive(path, file)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            raise ValueError('{!r} is not a readable npz file (truncated or corrupt): {}: {}'
                             .format(path, type(error).__name__, error)) from error
    except BaseException:
        file.close()
        raise
