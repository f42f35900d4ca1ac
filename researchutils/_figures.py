"""Showing or saving matplotlib figures, shared by image.viewer and task.plotter.

Importing this module imports nothing beyond the standard library; matplotlib is
imported by the functions that need it.

Where there is a display (matplotlib's backend opens windows, or draws inline in a
notebook), figures are shown. Without one (matplotlib falls back to its Agg backend
on a machine without a display, or the user chose Agg, PDF, SVG, ...), showing
would do nothing, so a figure nobody asked to save is saved into the current
folder under a name that is not yet taken, and a warning says where.
"""
from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Sequence
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Literal

from researchutils._checks import check_path
from researchutils._files import write_atomically

if TYPE_CHECKING:
    from matplotlib.animation import AbstractMovieWriter, Animation
    from matplotlib.figure import Figure

EXTRA = 'pip install researchutils[plot]'


def import_matplotlib(user: str) -> ModuleType:
    """Returns the matplotlib module, or raises an ImportError naming the extra."""
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError('{} needs matplotlib: {}'.format(user, EXTRA)) from error
    return matplotlib


def pyplot() -> ModuleType:
    import matplotlib.pyplot as plt
    return plt


def has_display() -> bool:
    """True when matplotlib's backend shows figures (a window or a notebook's output)."""
    import matplotlib
    pyplot()
    return matplotlib.get_backend().lower() not in _non_interactive_backends()


def _non_interactive_backends() -> set[str]:
    try:
        from matplotlib.backends import BackendFilter, backend_registry
    except ImportError:  # matplotlib < 3.9
        from matplotlib.rcsetup import non_interactive_bk
        return {name.lower() for name in non_interactive_bk}
    return {name.lower() for name in backend_registry.list_builtin(BackendFilter.NON_INTERACTIVE)}


def check_save_path(name: str, value: object, extensions: Sequence[str]
                    ) -> str | bool | None:
    """Checks a save option: False/None (do not save), True (default name) or a path."""
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError('{} must be True, False or a file path, got {!r}'.format(name, value))
    path = check_path(value, name)
    if os.path.splitext(path)[1].lower() not in extensions:
        raise ValueError('{} must be a file name ending with {}, got {!r}'.format(
            name, ' or '.join(extensions), path))
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError('the folder {!r} of {}={!r} does not exist'.format(
            folder, name, path))
    return path


def figure_extensions() -> tuple[str, ...]:
    """The file extensions matplotlib can save a figure as (``.png``, ``.pdf``, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase
    return tuple('.' + extension for extension in FigureCanvasBase.get_supported_filetypes())


def save_figure(figure: Figure, path: str | Literal[True], default_name: str) -> str:
    """Saves a figure in the format its file name says; ``path`` as in :func:`publish`."""
    name = default_name if path is True else path
    buffer = io.BytesIO()
    figure.savefig(buffer, format=os.path.splitext(name)[1][1:].lower())
    return publish(buffer.getvalue(), path, default_name)


def animation_bytes(animation: Animation, file_format: str, writer: AbstractMovieWriter
                    ) -> bytes:
    """Renders an animation through a writer that needs a file name, and returns the file."""
    folder = tempfile.mkdtemp(prefix='researchutils-animation-')
    try:
        path = os.path.join(folder, 'animation.' + file_format)
        animation.save(path, writer=writer)
        with open(path, 'rb') as f:
            return f.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish(data: bytes, path: str | Literal[True], default_name: str) -> str:
    """Writes ``data`` to ``path`` (replacing it), or with ``path`` True under a new name.

    A new name is ``default_name`` in the current folder, or ``stem-1.ext``,
    ``stem-2.ext``, ... when it is taken; an existing file is never replaced.

    Returns:
        str: The path written.
    """
    if path is not True:
        write_atomically(path, lambda f: f.write(data))
        return path
    stem, extension = os.path.splitext(default_name)
    attempt = 0
    while True:
        candidate = default_name if attempt == 0 else '{}-{}{}'.format(stem, attempt, extension)
        try:
            write_atomically(candidate, lambda f: f.write(data), overwrite=False)
        except FileExistsError:
            attempt += 1
            continue
        return candidate


def warn_saved_without_display(what: str, path: str) -> None:
    import matplotlib
    warnings.warn('no display (matplotlib backend {!r}), so the {} was saved to {!r} instead of '
                  'shown'.format(matplotlib.get_backend(), what, os.path.abspath(path)),
                  stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The stacklevel of the first caller outside researchutils, seen from our caller."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
