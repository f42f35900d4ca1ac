"""Checks of text: strings, paths, file names, choices among strings, lists of strings.

Standard library only. Tests: ``tests/test_checks.py``.
"""
import os
from collections.abc import Iterable, Sequence
from typing import Literal, overload

from researchutils._checks.wording import none_or


@overload
def check_str(value: object, name: str, *, allow_empty: bool = True,
              allow_none: Literal[False] = False) -> str: ...
@overload
def check_str(value: object, name: str, *, allow_empty: bool = True,
              allow_none: bool) -> str | None: ...
def check_str(value: object, name: str, *, allow_empty: bool = True,
              allow_none: bool = False) -> str | None:
    """Returns ``value``, a str (non-empty unless ``allow_empty``).

    Raises:
        TypeError: ``value`` is not a str (bytes included).
        ValueError: ``value`` is empty and ``allow_empty`` is False.

    Example:
        >>> check_str('val/loss', 'monitor', allow_empty=False)
        'val/loss'
        >>> check_str(5, 'title')
        Traceback (most recent call last):
        ...
        TypeError: title must be a str, got 5
    """
    if value is None and allow_none:
        return None
    kind = 'a str' if allow_empty else 'a non-empty str'
    message = '{} must be {}, got {!r}'.format(name, none_or(allow_none, kind), value)
    if not isinstance(value, str):
        raise TypeError(message)
    if not value and not allow_empty:
        raise ValueError(message)
    return value


@overload
def check_path(value: object, name: str, *, allow_none: Literal[False] = False,
               allow_empty: bool = False) -> str: ...
@overload
def check_path(value: object, name: str, *, allow_none: bool,
               allow_empty: bool = False) -> str | None: ...
def check_path(value: object, name: str, *, allow_none: bool = False,
               allow_empty: bool = False) -> str | None:
    """Returns a path given as a ``str`` or an ``os.PathLike`` as a str.

    Integers (which ``open`` would take as a file descriptor, ``True`` being
    standard output), bytes and NUL bytes are refused, the same on every Python.
    The empty str is refused unless ``allow_empty``: at the original
    researchutils' paths, where it was a path that does not exist
    (``load_model('', model)``) or the working folder, it is taken as such.

    Raises:
        TypeError: ``value`` is neither a str nor an ``os.PathLike`` giving a str.
        ValueError: ``value`` holds a NUL byte, or is empty (unless ``allow_empty``).

    Example:
        >>> check_path('runs/model.npz', 'path')
        'runs/model.npz'
        >>> check_path(1, 'file_path')
        Traceback (most recent call last):
        ...
        TypeError: file_path must be a path (a str or an os.PathLike), got 1
        >>> check_path('a\\0b', 'path')
        Traceback (most recent call last):
        ...
        ValueError: path must not hold a NUL byte, got 'a\\x00b'
    """
    if value is None and allow_none:
        return None
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        raise TypeError('{} must be a path ({}), got {!r}'.format(
            name, none_or(allow_none, 'a str or an os.PathLike'), value))
    if '\0' in path:
        raise ValueError('{} must not hold a NUL byte, got {!r}'.format(name, path))
    if not path and not allow_empty:
        raise ValueError('{} must be a path, got an empty str'.format(name))
    return path


def check_file_name(value: object, name: str) -> str:
    """Returns ``value``, the name of one file or folder: no separator, not '.' or '..'.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is empty, '.', '..', or holds a path separator or a NUL byte.

    Example:
        >>> check_file_name('exp', 'name')
        'exp'
        >>> check_file_name('..', 'name')  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: name must be one file or folder name (...), got '..'
    """
    text = check_str(value, name)
    separators = [sep for sep in (os.sep, os.altsep, '/') if sep]
    if text in ('', '.', '..') or '\0' in text or any(sep in text for sep in separators):
        raise ValueError("{} must be one file or folder name (not empty, '.' or '..', no path "
                         "separator or NUL byte), got {!r}".format(name, text))
    return text


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """Returns ``value``, one of the strings ``choices``.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is not one of ``choices``.

    Example:
        >>> check_choice('max', 'mode', ('auto', 'min', 'max'))
        'max'
        >>> check_choice('best', 'mode', ('auto', 'min', 'max'))
        Traceback (most recent call last):
        ...
        ValueError: mode must be one of 'auto', 'min', 'max', got 'best'
    """
    message = '{} must be one of {}, got {!r}'.format(
        name, ', '.join(repr(choice) for choice in choices), value)
    if not isinstance(value, str):
        raise TypeError(message)
    if value not in choices:
        raise ValueError(message)
    return value


def check_str_list(value: object, name: str, *, allow_empty: bool = True) -> list[str]:
    """Returns ``value``, a list, tuple or other iterable of str (not a str itself), as a list.

    Raises:
        TypeError: ``value`` is a str, not iterable, or holds something else than a str.
        ValueError: ``value`` is empty and ``allow_empty`` is False.

    Example:
        >>> check_str_list(('epoch', 'main/loss'), 'entries')
        ['epoch', 'main/loss']
        >>> check_str_list(5, 'entries')
        Traceback (most recent call last):
        ...
        TypeError: entries must be a list of str, got 5
    """
    message = '{} must be a list of str, got {!r}'.format(name, value)
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise TypeError(message)
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError('{} must be a list of str, got {!r} in {!r}'.format(
                name, item, value))
    if not items and not allow_empty:
        raise ValueError('{} must not be empty, got {!r}'.format(name, value))
    return items
