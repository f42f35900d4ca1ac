"""Task timelines: one horizontal bar per task, from its start to its end time.

Needs matplotlib (``pip install researchutils[plot]``). Where there is no display,
the finished chart is saved instead of shown (see :func:`draw_task`).
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

from researchutils import _figures
from researchutils._checks import check_bool, check_str
from researchutils._errors import add_note
from researchutils._typing import SavePath

if TYPE_CHECKING:
    from matplotlib.text import Text
    from matplotlib.typing import ColorType

_figures.import_matplotlib('researchutils.task.plotter')

__all__ = ['draw_task']


def draw_task(id: float, start_time: float, end_time: float, color: ColorType, task_name: str,
              title: str, line_width: float = 40, block: bool = True, *,
              save_path: SavePath = None) -> str | None:
    """Draws one task as a bar on the current chart, labeled with its name, and shows the chart.

    Several tasks make one timeline: draw each with ``block=False`` and the last
    with ``block=True`` (the default), which shows the chart and waits until its
    window is closed. The bars go into matplotlib's current figure, as in the
    original researchutils.

    Where there is no display (matplotlib's Agg backend, as on a server), the
    chart is finished by the call with ``block=True``: it is saved to
    ``save_path``, or else to a new ``tasks.png`` in the current folder
    (``tasks-1.png``, ... when taken; a ``UserWarning`` gives the path), and
    closed, so the next task starts a new chart. Calls with ``block=False`` only
    draw.

    Args:
        id (float): The task's row: the bar's height on the y axis.
        start_time (float): Where the bar starts on the x axis.
        end_time (float): Where it ends; not before ``start_time``.
        color: A matplotlib color (``'red'``, ``'#1f77b4'``, ``(0, 0, 1)``).
        task_name (str): The label in the middle of the bar.
        title (str): The chart's title.
        line_width (float): The bar's thickness, in points.
        block (bool): Show the chart and wait until its window is closed; False
            shows it without waiting and keeps drawing into it.
        save_path (str): Also save the chart, with the tasks drawn so far, to this
            file (``.png``, ``.pdf``, ``.svg``, ...), replacing it.

    Returns:
        str or None: The file saved, or None.

    Raises:
        ValueError: ``end_time`` is before ``start_time``, ``color`` is not a color,
            ``line_width`` is not positive, or matplotlib cannot draw ``task_name``
            or ``title`` (mathtext such as ``'$x^$'``); the chart is then left as
            it was before the call.
        TypeError: A position or time is not a real number, ``task_name`` or
            ``title`` is not a str, or ``block`` is not a bool.

    Example:

        >>> import os, tempfile
        >>> from researchutils.task import plotter
        >>> path = os.path.join(tempfile.mkdtemp(), 'jobs.png')
        >>> plotter.draw_task(0, 0.0, 3.5, 'tab:blue', 'download', 'jobs', block=False)
        >>> plotter.draw_task(1, 2.0, 6.0, 'tab:orange', 'train', 'jobs',
        ...                   save_path=path) == path
        True
    """
    for name, value in (('id', id), ('start_time', start_time), ('end_time', end_time),
                        ('line_width', line_width)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value):
            raise TypeError('{} must be a finite real number, got {!r}'.format(name, value))
    task_name = check_str(task_name, 'task_name')
    title = check_str(title, 'title')
    block = check_bool(block, 'block')
    if end_time < start_time:
        raise ValueError('end_time ({!r}) is before start_time ({!r})'.format(
            end_time, start_time))
    if line_width <= 0:
        raise ValueError('line_width must be positive, got {!r}'.format(line_width))
    from matplotlib.colors import is_color_like
    if not is_color_like(color):
        raise ValueError('color {!r} is not a matplotlib color'.format(color))
    save_path = _figures.check_save_path('save_path', save_path, _figures.figure_extensions())
    plt = _figures.pyplot()
    had_figure = bool(plt.get_fignums())
    axes = plt.gca()
    figure = axes.figure
    previous_title = axes.get_title()
    bar = axes.hlines(id, start_time, end_time, colors=color, lw=line_width)
    label = axes.text((start_time + end_time) / 2.0, id, task_name, ha='center', va='center')
    axes.set_title(title)
    try:
        for name, text in (('task_name', label), ('title', axes.title)):
            _check_renders(name, text)
    except BaseException:
        # The chart is shared with later calls: a text that cannot be drawn must
        # not stay in it, or every later draw_task fails on it.
        bar.remove()
        label.remove()
        axes.set_title(previous_title)
        if not had_figure:
            plt.close(figure)
        raise
    saved = _figures.save_figure(figure, save_path, 'tasks.png') if save_path else None
    if _figures.has_display():
        plt.show(block=block)
    elif block:
        if saved is None:
            saved = _figures.save_figure(figure, True, 'tasks.png')
            _figures.warn_saved_without_display('task chart', saved)
        plt.close(figure)
    return saved


def _check_renders(name: str, text: Text) -> None:
    """Lays ``text`` out now: matplotlib parses mathtext (``$...$``) only when drawing."""
    try:
        text.get_window_extent()
    except ValueError as error:
        raise ValueError('{} {!r} cannot be drawn by matplotlib: {}'.format(
            name, text.get_text(), error)) from error
    except Exception as error:  # LaTeX (text.usetex) failing, say: its own type
        add_note(error, 'while drawing {} {!r}'.format(name, text.get_text()))
        raise
