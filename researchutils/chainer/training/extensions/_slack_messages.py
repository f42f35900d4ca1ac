"""What SlackReport says: the texts of its messages, each within Slack's length limit.

Every function returns the texts of one message: a title line and a code
block, split into as many texts as ``limit`` (characters per text) asks, a
line too long for one text trimmed with an ellipsis. Only the standard
library is used, and nothing here raises for a value it cannot show: a
table cell falls back to ``'?'``.

Titles and lines hold what comes from the run (metric names and values,
exception messages, tracebacks, paths, the command line), which may hold
``<!channel>``, ``<!here>`` or ``<@U0123ABCD>``: Slack would notify. So
``_split``, which every text passes through, escapes ``&``, ``<`` and ``>``
in all of them (Slack's rule), after the table is laid out and before
lengths are counted; the formatting added here (the code fences, the emoji
codes of the titles) holds none of these characters and stays as it is.
"""
from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

__all__ = ['end_texts', 'error_texts', 'location', 'preempted_texts', 'start_texts',
           'table_texts']

_FENCE = '```'
# Room taken by the opening and closing fences of a code block and their newlines.
_FENCE_CHARS = 2 * len(_FENCE) + 2
_FIRST_COLUMNS = ('epoch', 'iteration')
_LAST_COLUMNS = ('elapsed_time',)


def location(comm: Any = None) -> str:
    """Where the run is: ``'on HOST'``, with ``'(rank R of N)'`` under ChainerMN.

    Example:
        >>> location().startswith('on ')
        True
    """
    host = socket.gethostname()
    if comm is None:
        return 'on {}'.format(host)
    return 'on {} (rank {} of {})'.format(host, comm.rank, comm.size)


def start_texts(where: str, start_iteration: int, out: str, limit: int) -> list[str]:
    """The run's first message: started, or resumed at ``start_iteration`` when above 0.

    Its code block names the host, the process id, the command line and the
    output folder ``out``.

    Example:
        >>> start_texts('on gpu1', 0, 'result', 3900)[0].split('\\n')[0]
        ':rocket: Training started on gpu1'
    """
    if start_iteration:
        title = ':arrows_counterclockwise: Training resumed at iteration {} {}'.format(
            start_iteration, where)
    else:
        title = ':rocket: Training started {}'.format(where)
    lines = ['host:    {}'.format(socket.gethostname()),
             'pid:     {}'.format(os.getpid()),
             'command: {}'.format(' '.join([sys.executable] + sys.argv)),
             'out:     {}'.format(os.path.abspath(out))]
    return _split(title, lines, limit)


def error_texts(where: str, iteration: int, error: BaseException, tb: TracebackType | None,
                limit: int) -> list[str]:
    """The exception ``error`` (raised at ``iteration``): its type, message and traceback.

    Example:
        >>> error_texts('on gpu1', 7, KeyError('x'), None, 3900)[0].split('\\n')[0]
        ":x: Training failed at iteration 7 on gpu1: KeyError: 'x'"
    """
    title = ':x: Training failed at iteration {} {}: {}: {}'.format(
        iteration, where, type(error).__name__, error)
    lines = ''.join(traceback.format_exception(type(error), error, tb)).rstrip().split('\n')
    return _split(title, lines, limit)


def end_texts(iteration: int, epoch: int, elapsed_time: float, out: str,
              interrupt: BaseException | None, limit: int) -> list[str]:
    """The run's last message: finished, or interrupted by ``interrupt`` (not None).

    Example:
        >>> end_texts(8, 2, 1.25, 'result', None, 3900)[0].split('\\n')[0]
        ':white_check_mark: Training finished at iteration 8 (epoch 2, 1.2 s)'
    """
    where = 'at iteration {} (epoch {}, {:.1f} s)'.format(iteration, epoch, elapsed_time)
    if interrupt is not None:
        title = ':warning: Training interrupted ({}) {}'.format(type(interrupt).__name__, where)
    else:
        title = ':white_check_mark: Training finished {}'.format(where)
    return _split(title, [os.path.abspath(out)], limit)


def preempted_texts(iteration: int, epoch: int, elapsed_time: float, signal_name: str,
                    snapshot: str, exit_status: int | str | None, limit: int) -> list[str]:
    """The last message of a run that a signal stopped after writing ``snapshot``.

    Example:
        >>> preempted_texts(8, 2, 1.25, 'SIGTERM', 'result/snapshot_iter_8', 75,
        ...                 3900)[0].split('\\n')[0]
        ':double_vertical_bar: Training preempted by SIGTERM at iteration 8 (epoch 2, 1.2 s)'
    """
    title = ':double_vertical_bar: Training preempted by {} at iteration {} (epoch {}, ' \
        '{:.1f} s)'.format(signal_name, iteration, epoch, elapsed_time)
    return _split(title, ['it resumes from {} when run again (exit status {})'.format(
        os.path.abspath(snapshot), exit_status)], limit)


def table_texts(entries: Sequence[str] | None, rows: Sequence[Mapping[str, object]],
                limit: int) -> list[str]:
    """LogReport ``rows`` as an aligned table of ``entries``; its header heads every text.

    ``entries`` None shows every key of the rows: epoch and iteration first,
    elapsed_time last, the others sorted. A key missing from a row is a blank
    cell.

    Example:
        >>> print(table_texts(['iteration', 'main/loss'],
        ...                   [{'iteration': 1, 'main/loss': 0.5}], 3900)[0])
        ```
        iteration  main/loss
        1          0.5
        ```
    """
    if entries is None:
        entries = _infer_entries(rows)
    cells = [[_cell(row[entry]) if entry in row else '' for entry in entries] for row in rows]
    widths = [max([len(entry)] + [len(line[i]) for line in cells])
              for i, entry in enumerate(entries)]
    lines = ['  '.join(text.ljust(width) for text, width in zip(line, widths)).rstrip()
             for line in [list(entries)] + cells]
    return _split('', lines, limit, repeated_lines=1)


def _infer_entries(rows: Iterable[Mapping[str, object]]) -> list[str]:
    keys: set[str] = set()
    for row in rows:
        keys.update(row.keys())
    first = [key for key in _FIRST_COLUMNS if key in keys]
    last = [key for key in _LAST_COLUMNS if key in keys]
    return first + sorted(keys.difference(first, last)) + last


def _cell(value: object) -> str:
    if isinstance(value, int):  # bool included
        return str(value)
    try:
        # Whatever was reported is tried; what float() refuses is caught below.
        return '{:.6g}'.format(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    try:
        return str(value)
    except Exception:
        # A value that cannot show itself must not cost the rest of its row.
        return '?'


def _escape(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` as entities."""
    return text.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')


def _fit(text: str, limit: int) -> str:
    """``text`` escaped, trimmed with an ellipsis to ``limit`` characters escaped.

    The cut falls between the characters of ``text``, never inside an entity.
    """
    escaped = _escape(text)
    if len(escaped) <= limit:
        return escaped
    kept = []
    used = 1  # the ellipsis
    for character in text:
        character = _escape(character)
        used += len(character)
        if used > limit:
            break
        kept.append(character)
    return ''.join(kept) + '\u2026'


def _split(title: str, lines: Sequence[str], limit: int, repeated_lines: int = 0) -> list[str]:
    """Splits ``title`` + a code block of ``lines`` into texts of at most ``limit`` chars.

    ``title`` and ``lines`` are escaped (the one place this happens). The
    first ``repeated_lines`` lines (a table header) head every block; a line
    too long for one text is trimmed.
    """
    title = _fit(title, limit // 2) if title else ''
    head = [_fit(line, limit // 3) for line in lines[:repeated_lines]]
    body = lines[repeated_lines:] or ([] if head else [''])
    texts: list[str] = []
    current: list[str] = []

    def room(prefix: str) -> int:
        used = len(prefix) + _FENCE_CHARS + sum(len(line) + 1 for line in head)
        return limit - used

    def render(prefix: str, block: list[str]) -> str:
        return prefix + _FENCE + '\n' + '\n'.join(head + block) + '\n' + _FENCE

    prefix = title + '\n' if title else ''
    for line in body:
        # A line that does not fit beside the others starts the next text (untitled); one
        # longer than a whole text is trimmed. A text may be exactly ``limit`` long.
        if current and len(render(prefix, current + [_escape(line)])) > limit:
            texts.append(render(prefix, current))
            prefix, current = '', []
        current.append(_fit(line, max(1, room(prefix))))
    texts.append(render(prefix, current))
    return texts
