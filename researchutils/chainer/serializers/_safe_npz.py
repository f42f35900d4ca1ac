"""Reading npz files without ever unpickling: the reader under the ``load_*`` functions of npz.

:func:`open_archive` opens a file as an :class:`Archive`, which reads every member's header at
once (so a pickled object array anywhere in the file is refused before anything is loaded) and
each array only when asked for, with pickling refused. The one pickle accepted is the
``numpy.asarray(None)`` that Chainer writes for a None value, recognised by
:func:`is_chainers_none` without running it.

Tests: ``tests/chainer/serializers/test_safe_npz.py``.
"""
import errno
import functools
import io
import os
import pickle
import zipfile
import zlib

import numpy

# Errors numpy and zipfile raise for a file that is not a complete npz archive.
_CORRUPT_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError)


class UnreadableFile(ValueError):
    """A file that cannot be loaded (corrupt, or holding a pickle); the message names it."""


class _RecordedCall(object):
    """Stands for a call a pickle asks for; it records the call instead of making it."""

    def __init__(self, name, *args):
        self.name = name
        self.args = args
        self.state = None

    def __setstate__(self, state):
        self.state = state


_NDARRAY = object()
# What a pickle may name, and what it gets instead: records, never the real callables.
_NONE_PICKLE_GLOBALS = {
    ('numpy.core.multiarray', '_reconstruct'): functools.partial(_RecordedCall, 'array'),
    ('numpy._core.multiarray', '_reconstruct'): functools.partial(_RecordedCall, 'array'),
    ('numpy', 'ndarray'): _NDARRAY,
    ('numpy', 'dtype'): functools.partial(_RecordedCall, 'dtype'),
}
# NumPy's pickle of numpy.asarray(None) is at most a few hundred bytes.
_MAX_NONE_PICKLE = 1024


class _ChainerNoneUnpickler(pickle.Unpickler):
    """Reads the pickle of ``numpy.asarray(None)`` as records of calls, running none of them."""

    def find_class(self, module, name):
        try:
            return _NONE_PICKLE_GLOBALS[module, name]
        except KeyError:
            raise pickle.UnpicklingError('the pickle names {}.{}'.format(module, name)) from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError('the pickle holds a persistent id')


def is_chainers_none(payload):
    """Whether ``payload`` is exactly the pickle NumPy writes for ``numpy.asarray(None)``.

    Chainer's DictionarySerializer saves a None value (a lazy parameter not yet
    initialized, an empty optimizer state) that way.
    """
    if len(payload) > _MAX_NONE_PICKLE:
        return False
    try:
        array = _ChainerNoneUnpickler(io.BytesIO(payload)).load()
        if not (isinstance(array, _RecordedCall) and array.name == 'array'
                and array.args == (_NDARRAY, (0,), b'b') and isinstance(array.state, tuple)
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

    def __init__(self, path):
        self.path = path
        self._zip = zipfile.ZipFile(path)
        try:
            self.shapes = {}
            for info in self._zip.infolist():
                if info.filename.endswith('.npy'):
                    key = info.filename[:-len('.npy')]
                    self.shapes[key] = self._guarded(key, self._read_header, info, key)
        except BaseException:
            self._zip.close()
            raise

    def close(self):
        self._zip.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __contains__(self, key):
        return key in self.shapes

    def __getitem__(self, key):
        if key not in self.shapes:
            raise KeyError(key)
        if self.shapes[key] is None:
            return numpy.asarray(None)
        return self._guarded(key, self._read_array, key)

    def _guarded(self, key, read, *args):
        try:
            return read(*args)
        except UnreadableFile:
            raise
        except _CORRUPT_ERRORS as error:
            raise UnreadableFile(
                '{!r} is not a readable npz file (truncated or corrupt): array {!r}: {}: {}'
                .format(self.path, key, type(error).__name__, error)) from error

    def _read_header(self, info, key):
        """The shape of array ``key``, or None for Chainer's None."""
        with self._zip.open(info) as member:
            version = numpy.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = numpy.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, _, dtype = numpy.lib.format.read_array_header_2_0(member)
            else:
                raise ValueError('.npy format version {} is not supported'.format(version))
            if not dtype.hasobject:
                return shape
            if dtype == numpy.dtype(object) and shape == () and is_chainers_none(
                    member.read(_MAX_NONE_PICKLE + 1)):
                return None
        raise UnreadableFile('{!r} holds an object array under the key {!r}: it could only be '
                             'read by unpickling, which can run any code, so researchutils '
                             'refuses it (only the None values Chainer writes are read); load '
                             'only what you trust with numpy.load(..., allow_pickle=True)'
                             .format(self.path, key))

    def _read_array(self, key):
        with self._zip.open(key + '.npy') as member:
            return numpy.lib.format.read_array(member, allow_pickle=False)


def open_archive(path):
    """Open ``path`` as an :class:`Archive`; an error that names ``path`` if it cannot be.

    Raises:
        IsADirectoryError: ``path`` is a directory.
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
        raise IsADirectoryError(errno.EISDIR, '{!r} is a directory, not an npz file'.format(path))
    if not zipfile.is_zipfile(path):
        raise ValueError('{!r} is not a readable npz file: it is not a complete zip archive '
                         '(truncated, corrupt, or not written by save_npz)'.format(path))
    try:
        return Archive(path)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise ValueError('{!r} is not a readable npz file (truncated or corrupt): {}: {}'.format(
            path, type(error).__name__, error)) from error
