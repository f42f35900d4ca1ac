"""Files and folders of a research run: search, text, pickles, one output folder per run.

Standard library only. Every write is atomic: the data goes to a temporary file in
the same folder, which replaces the target only once complete, so a crash or a full
disk never leaves a partial file.
"""
from __future__ import annotations

import argparse
import collections.abc
import datetime
import json
import os
import pathlib
import pickle
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from researchutils._checks import check_path, check_str
from researchutils._errors import add_note
from researchutils._files import write_atomically, write_text

__all__ = ['search_all_files_under', 'file_exists', 'create_dir_if_not_exist',
           'write_text_to_file', 'read_text_from_file', 'save_pickle', 'load_pickle',
           'prepare_output_dir']


class _NotADirectory(RuntimeError, ValueError):
    """A path that should be a folder is something else.

    A RuntimeError, as in the original researchutils, and a ValueError, as bad
    arguments are everywhere else in researchutils.
    """


def search_all_files_under(pathstr: str | os.PathLike[str],
                           exts: str | Iterable[str] | None = None) -> list[pathlib.Path]:
    """Lists the files in a folder and all its subfolders, optionally by extension.

    Symbolic links to files are listed; symbolic links to folders are not
    followed, so a link loop cannot make the search endless.

    Args:
        pathstr (str or os.PathLike): The folder to search.
        exts (str or list of str): Extensions to keep, each with its dot, such as
            ``['.txt', '.md']``; ``'.tar.gz'`` works too. A file is kept when its
            name ends with one of them (case-sensitive). None keeps every file.

    Returns:
        list of pathlib.Path: The files, sorted, each starting with ``pathstr``.

    Raises:
        TypeError: ``pathstr`` is not a str or an ``os.PathLike``, or ``exts`` is
            not a str or a list of them.
        ValueError: ``pathstr`` does not exist, is not a folder or holds a NUL
            byte, or an extension does not start with a dot.
        OSError: A subfolder cannot be read.

    Example:

        >>> import pathlib, tempfile
        >>> from researchutils.files import search_all_files_under
        >>> data = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ['a.txt', 'sub/b.txt', 'sub/c.md']:
        ...     (data / name).parent.mkdir(parents=True, exist_ok=True)
        ...     (data / name).touch()
        >>> [path.relative_to(data).as_posix()
        ...  for path in search_all_files_under(data, exts=['.txt'])]
        ['a.txt', 'sub/b.txt']
    """
    # '' is the working folder, as pathlib (and so the original) takes it.
    root = pathlib.Path(check_path(pathstr, 'pathstr', allow_empty=True))
    if not root.exists():
        raise ValueError('pathstr {!r} does not exist'.format(str(pathstr)))
    if not root.is_dir():
        raise ValueError('pathstr {!r} is not a folder'.format(str(pathstr)))
    suffixes = _extensions(exts)
    found: list[pathlib.Path] = []

    def fail(error: OSError) -> NoReturn:
        raise error

    for folder, _, names in os.walk(root, onerror=fail):
        for name in names:
            if suffixes is None or any(name.endswith(s) and len(name) > len(s)
                                       for s in suffixes):
                found.append(pathlib.Path(folder, name))
    return sorted(found)


def _extensions(exts: str | Iterable[str] | None) -> tuple[str, ...] | None:
    if exts is None:
        return None
    if isinstance(exts, str):
        exts = [exts]
    if isinstance(exts, (bytes, dict)) or not isinstance(exts, collections.abc.Iterable):
        raise TypeError('exts must be an extension such as ".txt", a list of them or None, '
                        'got {!r}'.format(exts))
    exts = list(exts)
    for ext in exts:
        if not isinstance(ext, str):
            raise TypeError('exts must be extensions (str) with their dot, such as [".txt"], '
                            'got {!r}'.format(ext))
        if not ext.startswith('.') or len(ext) < 2:
            raise ValueError('exts must be extensions with their dot, such as [".txt"], '
                             'got {!r}'.format(ext))
    return tuple(exts)


def file_exists(path: str | os.PathLike[str]) -> bool:
    """Tells whether a file or folder exists at ``path``.

    Args:
        path (str or os.PathLike): The path to check.

    Returns:
        bool: True when something (a file or a folder) is there.

    Raises:
        TypeError: ``path`` is not a str or an ``os.PathLike`` (an int would be
            taken as a file descriptor).
        ValueError: ``path`` holds a NUL byte. (The empty path is no file: False.)

    Example:

        >>> from researchutils.files import file_exists
        >>> file_exists('no/such/file.txt')
        False
    """
    return os.path.exists(check_path(path, 'path', allow_empty=True))


def create_dir_if_not_exist(outdir: str | os.PathLike[str]) -> None:
    """Creates a folder and its missing parents; an existing folder is left as it is.

    Safe when several processes create the same folder at once.

    Args:
        outdir (str or os.PathLike): The folder.

    Raises:
        RuntimeError: Something other than a folder is at ``outdir`` (the error is
            also a ValueError).
        TypeError: ``outdir`` is not a str or an ``os.PathLike``.
        ValueError: ``outdir`` is empty or holds a NUL byte.

    Example:

        >>> import os, tempfile
        >>> from researchutils.files import create_dir_if_not_exist
        >>> outdir = os.path.join(tempfile.mkdtemp(), 'results', 'run')
        >>> create_dir_if_not_exist(outdir)
        >>> create_dir_if_not_exist(outdir)
        >>> os.path.isdir(outdir)
        True
    """
    _make_folder(check_path(outdir, 'outdir'), 'outdir')


def _make_folder(path: str, name: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise _NotADirectory('{} {!r} exists and is not a directory'.format(
            name, path)) from None


def write_text_to_file(file_path: str | os.PathLike[str], data: str) -> None:
    """Writes text to a file as UTF-8, atomically, replacing the file if there is one.

    The text is written as it is: line endings are not translated, so
    :func:`read_text_from_file` gives back exactly ``data``.

    Args:
        file_path (str or os.PathLike): The file; its folder must exist.
        data (str): The text.

    Raises:
        TypeError: ``data`` is not a str, or ``file_path`` is not a str or an
            ``os.PathLike``.
        ValueError: ``file_path`` is empty or holds a NUL byte.
        FileNotFoundError: The folder of ``file_path`` does not exist.

    Example:

        >>> import os, tempfile
        >>> from researchutils.files import read_text_from_file, write_text_to_file
        >>> path = os.path.join(tempfile.mkdtemp(), 'notes.txt')
        >>> write_text_to_file(path, 'lr=0.1\\n')
        >>> read_text_from_file(path)
        'lr=0.1\\n'
    """
    file_path = check_path(file_path, 'file_path')
    if not isinstance(data, str):
        raise TypeError('data must be a str, got {}'.format(type(data).__name__))
    _check_folder(file_path)
    write_text(file_path, data)


def read_text_from_file(file_path: str | os.PathLike[str]) -> str:
    """Reads a whole file as UTF-8 text, line endings untouched.

    Args:
        file_path (str or os.PathLike): The file.

    Returns:
        str: Its text.

    Raises:
        TypeError: ``file_path`` is not a str or an ``os.PathLike`` (an int would
            be taken as a file descriptor: 0 is standard input).
        ValueError: ``file_path`` is empty or holds a NUL byte.
        UnicodeDecodeError: The file is not UTF-8 (Latin-1, say); the error
            carries a note naming the file.

    Example:

        >>> import os, tempfile
        >>> from researchutils.files import read_text_from_file, write_text_to_file
        >>> path = os.path.join(tempfile.mkdtemp(), 'hello.txt')
        >>> write_text_to_file(path, 'hello')
        >>> read_text_from_file(path)
        'hello'
    """
    file_path = check_path(file_path, 'file_path')
    with open(file_path, 'r', encoding='utf-8', newline='') as f:
        try:
            return f.read()
        except UnicodeDecodeError as error:
            add_note(error, 'while reading the text file {!r} as UTF-8'.format(
                os.fspath(file_path)))
            raise


def save_pickle(file_path: str | os.PathLike[str], data: object) -> None:
    """Pickles ``data`` into a file, atomically, replacing the file if there is one.

    When pickling fails (a lambda, an open file), the previous file, if any, stays
    as it was and nothing else is left behind.

    Args:
        file_path (str or os.PathLike): The file; its folder must exist.
        data: Anything ``pickle`` can write.

    Raises:
        TypeError: ``file_path`` is not a str or an ``os.PathLike``.
        ValueError: ``file_path`` is empty or holds a NUL byte.
        FileNotFoundError: The folder of ``file_path`` does not exist.

    Example:

        >>> import os, tempfile
        >>> from researchutils.files import load_pickle, save_pickle
        >>> path = os.path.join(tempfile.mkdtemp(), 'history.pkl')
        >>> save_pickle(path, {'loss': [0.9, 0.5]})
        >>> load_pickle(path)
        {'loss': [0.9, 0.5]}
    """
    file_path = check_path(file_path, 'file_path')
    _check_folder(file_path)
    write_atomically(file_path, lambda f: pickle.dump(data, f))


def load_pickle(file_path: str | os.PathLike[str]) -> Any:
    """Loads what :func:`save_pickle` wrote. Loading a pickle runs code from the file.

    Only load files that you wrote yourself or fully trust: unpickling can call any
    function with any arguments, so a crafted file can do anything your account
    can. For data from others use a format that holds data only (JSON, npz
    read with ``allow_pickle=False``).

    As in the original researchutils, strings pickled by Python 2 are read as
    ``bytes`` (``encoding='bytes'``).

    Args:
        file_path (str or os.PathLike): The file.

    Returns:
        The unpickled object.

    Raises:
        TypeError: ``file_path`` is not a str or an ``os.PathLike``.
        ValueError: ``file_path`` is empty or holds a NUL byte.
        pickle.UnpicklingError, EOFError: The file is not a complete pickle; the
            error carries a note naming the file.

    Example:

        >>> import os, tempfile
        >>> from researchutils.files import load_pickle, save_pickle
        >>> path = os.path.join(tempfile.mkdtemp(), 'scores.pkl')
        >>> save_pickle(path, [1, 2, 3])
        >>> load_pickle(path)
        [1, 2, 3]
    """
    file_path = check_path(file_path, 'file_path')
    with open(file_path, 'rb') as f:
        try:
            return pickle.load(f, encoding='bytes')
        except Exception as error:
            add_note(error, 'while loading the pickle {!r}'.format(os.fspath(file_path)))
            raise


def _check_folder(file_path: str) -> None:
    folder = os.path.dirname(os.path.abspath(file_path))
    if not os.path.isdir(folder):
        raise FileNotFoundError('the folder {!r} of file_path {!r} does not exist'.format(
            folder, file_path))


def prepare_output_dir(base_dir: str | os.PathLike[str],
                       args: argparse.Namespace | Mapping[str, object] | None,
                       time_format: str = '%Y-%m-%d-%H%M%S') -> str:
    """Creates a new folder for one run, named by the time, holding its arguments and command.

    The folder is ``base_dir/<now formatted with time_format>``; when that name is
    taken (another run started in the same second), ``-1``, ``-2``, ... is
    appended. Each call gets a folder of its own, also across processes, because
    taking a name is one ``mkdir`` that fails if the name exists.

    The folder holds ``args.txt``, the arguments as JSON (values JSON cannot hold,
    such as paths, are written with ``str``), and ``command.txt``, the command line
    (``sys.argv``) quoted so that it can be pasted into a shell: UTF-8, except for the
    bytes of an argument that is not (a file name in Latin-1), which are written as the
    shell gave them. When writing them fails, the new folder is removed again.

    Args:
        base_dir (str or os.PathLike): The folder for all runs; created if missing
            ('' is the working folder, as in the original).
        args (argparse.Namespace or dict): The run's arguments.
        time_format (str): A ``strftime`` format for the folder's name, without
            path separators.

    Returns:
        str: The new folder.

    Raises:
        TypeError: ``args`` is neither a Namespace nor a mapping (nor None),
            ``base_dir`` is not a str or an ``os.PathLike``, or ``time_format`` is
            not a str.
        ValueError: ``time_format`` holds a NUL byte or gives an empty name or one
            with a separator; ``base_dir`` holds a NUL byte, or is a file (the
            error is also a RuntimeError).

    Example:

        >>> import argparse, json, os, tempfile
        >>> from researchutils.files import prepare_output_dir, read_text_from_file
        >>> runs = os.path.join(tempfile.mkdtemp(), 'runs')
        >>> args = argparse.Namespace(lr=0.1, epochs=20)
        >>> first = prepare_output_dir(runs, args)
        >>> second = prepare_output_dir(runs, args)     # same second, another folder
        >>> first != second
        True
        >>> sorted(os.listdir(first))
        ['args.txt', 'command.txt']
        >>> json.loads(read_text_from_file(os.path.join(first, 'args.txt')))
        {'lr': 0.1, 'epochs': 20}
    """
    base_dir = check_path(base_dir, 'base_dir', allow_empty=True)
    if isinstance(args, argparse.Namespace):
        args = vars(args)
    elif isinstance(args, collections.abc.Mapping):
        args = dict(args)
    elif args is not None:
        raise TypeError('args must be an argparse.Namespace or a dict, got {}'.format(
            type(args).__name__))
    check_str(time_format, 'time_format')
    if '\0' in time_format:
        raise ValueError('time_format must not hold a NUL byte, got {!r}'.format(time_format))
    name = datetime.datetime.now().strftime(time_format)
    if name in ('', '.', '..') or os.sep in name or (os.altsep and os.altsep in name):
        raise ValueError('time_format {!r} gives the folder name {!r}: it must be a name '
                         'without path separators'.format(time_format, name))
    args_text = json.dumps(args, default=str)
    # An argument the file system's encoding could not decode holds surrogates (PEP 383):
    # its own bytes go back into the file, so the command runs again as it was.
    command_bytes = shlex.join(sys.argv).encode('utf-8', 'surrogateescape')
    if base_dir:
        _make_folder(base_dir, 'base_dir')
    outdir = _new_folder(base_dir, name)
    try:
        write_text_to_file(os.path.join(outdir, 'args.txt'), args_text)
        write_atomically(os.path.join(outdir, 'command.txt'),
                         lambda file: file.write(command_bytes))
    except BaseException:
        shutil.rmtree(outdir, ignore_errors=True)
        raise
    return outdir


def _new_folder(base_dir: str, name: str) -> str:
    attempt = 0
    while True:
        candidate = os.path.join(base_dir, name if attempt == 0 else
                                 '{}-{}'.format(name, attempt))
        try:
            os.mkdir(candidate)
        except FileExistsError:
            attempt += 1
            continue
        return candidate
