"""Atomic file writes, shared by every module that writes files (standard library only).

A file is written to a temporary file in its own folder, flushed to disk and only then
published under its name, so a crash or a full disk never leaves a partial file there,
and any failure removes the temporary file. A new file's mode follows the process umask
and a replaced file keeps its mode, as with ``open(path, 'wb')``.

Nothing can clean up during a hard kill (SIGKILL, a power cut): the writer's temporary
file ``.<name>.<12 hex digits>.tmp`` stays beside the file. The writer holds an exclusive
``flock`` on its temporary file from its creation until it is published, so the next
write of the same name removes the temporaries whose writers are gone (their lock is
free) and never a live writer's; a writer whose new temporary file was removed before it
locked it (a sweeper took the free lock first) makes another.
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Callable
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # not POSIX: temporaries of dead writers are then left as they are
    fcntl = None  # type: ignore[assignment]

# The flags tempfile.mkstemp uses, but created with mode 0o666 so that the process umask
# decides the final mode, as for a file opened with open(path, 'wb') (chainer's save_npz).
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0)
                 | getattr(os, 'O_CLOEXEC', 0) | getattr(os, 'O_BINARY', 0))
_NAME_ATTEMPTS = 100


def _temporary_name(name: str) -> re.Pattern[str]:
    return re.compile(r'\.{}\.[0-9a-f]{{12}}\.tmp'.format(re.escape(name)))


def open_temporary(folder: str, name: str) -> tuple[BinaryIO, str]:
    """Opens a new temporary file for ``name`` in ``folder``, for binary writing, locked
    (``flock``) for as long as it stays open.

    Its mode is 0o666 less the process umask, like any file the process creates.

    Returns:
        tuple: ``(file, path)`` of the temporary file.
    """
    for _ in range(_NAME_ATTEMPTS):
        path = os.path.join(folder, '.{}.{}.tmp'.format(name, secrets.token_hex(6)))
        try:
            handle = os.open(path, _CREATE_FLAGS, 0o666)
        except FileExistsError:
            continue
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if os.fstat(handle).st_nlink == 0:
                # A sweeper took the lock between our open and our flock, and removed the
                # file: it was ours, and alive. Make another.
                os.close(handle)
                continue
        return os.fdopen(handle, 'wb'), path
    raise FileExistsError(errno.EEXIST, 'no free temporary file name for {!r} in {!r}'.format(
        name, folder))


def remove_dead_temporaries(folder: str, name: str) -> list[str]:
    """Removes the temporary files of ``name`` in ``folder`` whose writers are gone.

    A writer holds the lock of its temporary file until it publishes it, so a temporary
    whose lock is free was left by a writer killed outright; a live writer's is kept.

    Returns:
        list: The paths removed.
    """
    if fcntl is None:
        return []
    pattern = _temporary_name(name)
    try:
        names = [entry for entry in os.listdir(folder) if pattern.fullmatch(entry)]
    except OSError:
        return []
    removed = []
    for entry in names:
        path = os.path.join(folder, entry)
        try:
            handle = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0)
                             | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_CLOEXEC', 0))
        except OSError:
            continue  # gone meanwhile, or not a file we may open
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(handle)
            continue  # a live writer holds it
        try:
            if stat.S_ISREG(os.fstat(handle).st_mode) and os.path.samestat(
                    os.fstat(handle), os.lstat(path)):
                os.remove(path)
                removed.append(path)
        except OSError:
            pass
        finally:
            os.close(handle)
    return removed


def write_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], object],
                     overwrite: bool = True) -> None:
    """Writes ``path`` whole or not at all; its folder must exist.

    Args:
        path (str): The file to write.
        write (callable): ``write(file)`` fills a binary file object.
        overwrite (bool): Replace an existing file, keeping its mode (a new file's
            mode follows the umask). With False an existing ``path`` is
            never replaced: the finished file is published with a hard link, which
            fails atomically when the name is taken (file systems without hard links
            fall back to a check right before ``os.replace``).

    Raises:
        FileExistsError: ``overwrite`` is False and ``path`` exists.
        OSError: The file could not be written; nothing is left behind (but what a hard
            kill leaves: the temporary file, which the next write of ``path`` removes).
    """
    folder, name = os.path.split(os.path.abspath(path))
    remove_dead_temporaries(folder, name)
    file, temporary = open_temporary(folder, name)
    try:
        # Closed (its lock released) only once published: a sweeper never takes it.
        with file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
            if overwrite:
                _keep_mode(path, temporary)
                os.replace(temporary, path)
            else:
                _publish_new(temporary, path)
    except BaseException:
        _remove_if_present(temporary)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes the str ``text`` to ``path`` as UTF-8, whole or not at all, line endings as given.

    The one atomic text writer: :func:`researchutils.files.write_text_to_file` and
    :func:`researchutils.chainer.training.train_utils.atomic_write_text` are this, with their
    own argument checks (the folder must exist, or is made).
    """
    data = text.encode('utf-8')
    write_atomically(path, lambda file: file.write(data))


def _keep_mode(path: str | os.PathLike[str], temporary: str) -> None:
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    os.chmod(temporary, mode)


def _publish_new(temporary: str, path: str | os.PathLike[str]) -> None:
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


def _remove_if_present(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
