"""What a run prints on standard output: its progress, and a line when it does not start anew.

On a terminal a run shows Chainer's ProgressBar. Anywhere else (a SLURM job's log, ``nohup``,
a pipe) a bar shows nothing until the end, so the run prints one line per epoch instead,
with the values its LogReport holds (:class:`EpochLines`, PrintReport's table without the
terminal's erase codes). A run that returns a finished result or resumes from a snapshot
says so in one line (:func:`say`), and on a resume neither its lines nor the user's
PrintReport print again the epochs trained before the stop (:func:`skip_printed`). Only
rank 0 prints under ChainerMN. Tests: ``tests/chainer/training/_experiment/test_progress.py``.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import chainer
from chainer.training import extensions as chainer_extensions

from researchutils.chainer.training._ranks import is_rank_zero


def say(comm: Any, line: str) -> None:
    """Prints ``line`` on rank 0 (every process without ChainerMN), at once."""
    if is_rank_zero(comm):
        print(line, flush=True)


class EpochLines(chainer_extensions.PrintReport):
    """One line per LogReport row (per epoch), under a header line, as PrintReport prints
    them but with no terminal code: for a log file or a pipe.

    Args:
        entries (list of str): The LogReport keys shown, in columns.
        out: The stream written (and flushed after each line).
    """

    _header: str | None  # PrintReport's: written at the first call, then None
    _log_len: int  # PrintReport's: the rows printed

    def __init__(self, entries: list[str], out: Any) -> None:
        super().__init__(entries, out=out)

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        if self._header:
            self._out.write(self._header)
            self._header = None
        log = trainer.get_extension(self._log_report).log
        while self._log_len < len(log):
            self._print(log[self._log_len])
            self._log_len += 1


def progress_extension(entries: list[str]) -> chainer.training.Extension:
    """ProgressBar when standard output is a terminal, else :class:`EpochLines` of
    ``entries``."""
    if sys.stdout.isatty():
        return chainer_extensions.ProgressBar()
    return EpochLines(entries, sys.stdout)


def skip_printed(trainer: chainer.training.Trainer, extensions: Iterable[Any]) -> None:
    """After a resume, moves the cursor of each PrintReport of ``extensions`` (extensions
    or ``(extension, trigger)`` pairs) past the LogReport rows the snapshot brought back,
    which were printed before the stop."""
    for extension in extensions:
        extension = extension[0] if isinstance(extension, tuple) else extension
        if not isinstance(extension, chainer_extensions.PrintReport):
            continue
        # Chainer 7.8.1 (its last release) keeps the LogReport (or its name) and the
        # printed rows' count in these attributes and does not serialize the count.
        log_report = extension._log_report
        if isinstance(log_report, str):
            try:
                log_report = trainer.get_extension(log_report)
            except ValueError:
                continue  # no such LogReport: the PrintReport says so at its first call
        extension._log_len = len(log_report.log)
