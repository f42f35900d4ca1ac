"""Atomic file writes, shared by every module that writes files (standard library only).

A file is written to a temporary file in its own folder, flushed to disk and only then
published under its name, so a crash or a full disk never leaves a partial file there,
and any failure removes the temporary file.
"""
import os
import tempfile


def open_temporary(folder, name):
    """Opens a new temporary file for ``name`` in ``folder``, for binary writing.

    Returns:
        tuple: ``(file, path)`` of the temporary file.
    """
    handle, path = tempfile.mkstemp(dir=folder, prefix='.' + name + '.', suffix='.tmp')
    return os.fdopen(handle, 'wb'), path


def write_atomically(path, write, overwrite=True):
    """Writes ``path`` whole or not at all; its folder must exist.

    Args:
        path (str): The file to write.
        write (callable): ``write(file)`` fills a binary file object.
        overwrite (bool): Replace an existing file. With False an existing ``path`` is
            never replaced: the finished file is published with a hard link, which
            fails atomically when the name is taken (file systems without hard links
            fall back to a check right before ``os.replace``).

    Raises:
        FileExistsError: ``overwrite`` is False and ``path`` exists.
        OSError: The file could not be written; nothing is left behind.
    """
    folder, name = os.path.split(os.path.abspath(path))
    file, temporary = open_temporary(folder, name)
    try:
        with file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        if overwrite:
            os.replace(temporary, path)
        else:
            _publish_new(temporary, path)
    except BaseException:
        _remove_if_present(temporary)
        raise


def _publish_new(temporary, path):
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.replace(temporary, path)
        return
    os.remove(temporary)


def _remove_if_present(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
