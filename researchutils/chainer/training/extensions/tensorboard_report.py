"""TensorBoardReport: a run's LogReport values as TensorBoard scalars, written in the background.

The extension takes the rows a LogReport added (``_tracking.LogRows``) and queues them;
a ``_background.BackgroundWriter`` thread writes them with tensorboardX, so the training
loop never waits on the disk. The event file is opened on the training thread at the first
report, so a folder that cannot be written is an error there, naming it. The last step
written is part of the Trainer's snapshot: a resumed run opens its writer with
``purge_step`` just past it, and TensorBoard hides what an earlier try wrote beyond the
resume point, so every step shows once. tensorboardX is imported when a run starts.
Tests: tests/chainer/training/extensions/test_tensorboard_report.py.
"""
from __future__ import annotations

import logging
import os
import re
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import chainer
from chainer.training import extension
from chainer.training.extensions import log_report as log_report_module

from researchutils._checks import check_comm, check_path, check_positive_int, check_timeout
from researchutils.chainer.training._ranks import is_rank_zero
from researchutils.chainer.training.extensions import _tracking
from researchutils.chainer.training.extensions._background import BackgroundWriter

if TYPE_CHECKING:
    import tensorboardX

__all__ = ['TensorBoardReport']

logger = logging.getLogger(__name__)
_DEFAULT_LOGDIR = 'tensorboard'
# The characters tensorboardX keeps in a tag (it makes the others '_', and drops leading '/').
_TAG_CHARACTERS = re.compile(r'[^-/\w.]')


def _tensorboard_tag(name: str) -> str:
    """``name`` as tensorboardX writes a tag: ``acc@1`` is ``acc_1``, ``/a`` is ``a``."""
    return _TAG_CHARACTERS.sub('_', name).lstrip('/')


def _summary_writer_class() -> type[tensorboardX.SummaryWriter]:
    try:
        import tensorboardX
    except ImportError as error:
        raise ImportError('TensorBoardReport needs tensorboardX: pip install '
                          'researchutils[tensorboard]') from error
    return tensorboardX.SummaryWriter


class _Writer(BackgroundWriter[Any]):
    """Writes queued rows (``(step, {tag: value})`` lists) and hyper-parameters to one
    SummaryWriter; the first error is kept for the training thread to raise."""

    def __init__(self, summary_writer: tensorboardX.SummaryWriter, folder: str,
                 queue_size: int) -> None:
        super().__init__('TensorBoardReport', queue_size)
        self.summary_writer = summary_writer
        self.folder = folder
        self.error: OSError | None = None

    def write(self, item: Any) -> None:
        if self.error is not None:
            return
        kind, content = item
        try:
            if kind == 'hparams':
                from tensorboardX.summary import hparams
                file_writer = self.summary_writer.file_writer
                for summary in hparams(content, {}):
                    file_writer.add_summary(summary)
            else:
                for step, values in content:
                    for tag, value in values.items():
                        self.summary_writer.add_scalar(tag, value, step)
            self.summary_writer.flush()
        except OSError as error:
            self.error = error
            return
        self.credit(1)


class TensorBoardReport(extension.Extension):
    """Trainer extension writing what LogReport observes as TensorBoard scalars.

    At each trigger, the rows the LogReport added since the last call are
    queued, each value at its row's iteration (or epoch) as its step, and a
    daemon thread writes them with tensorboardX; the run's hyper-parameters
    are written once, for TensorBoard's HParams page. Everything queued is
    written before the run ends (``finalize`` waits up to ``flush_timeout``
    seconds), also when it ends by an exception or a preemption signal.

    The event file is opened at the first report, on the training thread: a
    folder that cannot be made or written is an :class:`OSError` there, naming
    the folder; a write that fails later (a full disk) raises at the next
    report. The last step written and the rows taken are saved in the
    Trainer's snapshot, and a run resumed from it writes with tensorboardX's
    ``purge_step`` just past that step, so TensorBoard shows each step once,
    whatever an earlier try wrote beyond the snapshot. A run started afresh
    in a folder that holds an earlier run's events hides them the same way
    (from step 0), as Chainer's LogReport replaces the log of a fresh run.
    Under ChainerMN (``comm``) only rank 0 writes. The tutorial
    (docs/tutorials/tracking.rst) shows it at work.

    Args:
        logdir (str or os.PathLike): The folder of the event files; a relative
            path is under the trainer's ``out``.
        entries (list of str): LogReport keys to write; None writes every
            number of each row (but ``epoch``, ``iteration`` and
            ``elapsed_time``).
        parameters: The run's hyper-parameters: a
            :class:`~researchutils.chainer.training.Parameters`, a dict (nested
            dicts are flattened to ``"model/n_units"``) or None.
        log_report (str or LogReport): Name of the trainer's LogReport, or a
            LogReport to drive (as PrintReport does).
        step (str): ``'iteration'`` or ``'epoch'``: the step of each value.
        comm: A ChainerMN communicator, or None.
        queue_size (int): Reports the queue holds; when it is full, the rows
            wait for the next report.
        flush_timeout (float): Seconds ``finalize`` waits for the queue to
            empty.

    Raises:
        ImportError: tensorboardX is missing (``pip install
            researchutils[tensorboard]``), when the run starts.

    Example:
        >>> from chainer.training import extensions
        >>> from researchutils.chainer.training.extensions import TensorBoardReport
        >>> trainer.extend(extensions.LogReport())  # doctest: +SKIP
        >>> trainer.extend(TensorBoardReport(parameters={'lr': 0.01}))  # doctest: +SKIP
    """

    trigger = 1, 'epoch'
    default_name = 'TensorBoardReport'

    def __init__(self, logdir: str | os.PathLike[str] = _DEFAULT_LOGDIR,
                 entries: Sequence[str] | None = None, parameters: object = None,
                 log_report: str | log_report_module.LogReport = 'LogReport', *,
                 step: str = 'iteration', comm: Any = None, queue_size: int = 64,
                 flush_timeout: float = 30.0) -> None:
        self._logdir = check_path(logdir, 'logdir')
        self._rows = _tracking.LogRows(_tracking.check_log_report(log_report),
                                       _tracking.check_entries(entries),
                                       _tracking.check_step(step))
        self._parameters = _tracking.flat_hyperparameters(parameters)
        # Two keys that tensorboardX would write as one tag are kept apart.
        self._tag = _tracking.DistinctNames(_tensorboard_tag, None, logger, 'TensorBoardReport',
                                            ('TensorBoard', 'scalar'))
        self._comm = check_comm(comm)
        self._queue_size = check_positive_int(queue_size, 'queue_size')
        self._flush_timeout = check_timeout(flush_timeout, 'flush_timeout')
        self._trainer: chainer.training.Trainer | None = None
        self._start_run()

    def _start_run(self) -> None:
        self._writer: _Writer | None = None
        self._last_step = -1  # the last step queued; -1: none
        self._resumed = False
        self._pending: list[tuple[int, dict[str, float]]] = []
        self._finalized = False
        self._rows.taken = 0

    @property
    def logdir(self) -> str | None:
        """The folder of the event files (str), known once the run started; else None."""
        return self._writer.folder if self._writer is not None else None

    def initialize(self, trainer: chainer.training.Trainer) -> None:
        """Checks the LogReport and tensorboardX; a second run after ``finalize`` starts
        afresh (the folds of a k-fold)."""
        if self._finalized:
            self._start_run()
        self._trainer = trainer
        self._rows.check(trainer, 'TensorBoardReport')
        if is_rank_zero(self._comm):
            _summary_writer_class()

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        """Queues the rows LogReport added since the last call (rank 0)."""
        if not is_rank_zero(self._comm):
            return
        writer = self._open(trainer)
        if writer.error is not None:
            raise OSError('TensorBoardReport could not write its events in {}: {}'.format(
                writer.folder, writer.error)) from writer.error
        self._queue_rows(trainer, bounded=True)

    def _open(self, trainer: chainer.training.Trainer) -> _Writer:
        """The run's writer, made at the first report: the event file opens here."""
        if self._writer is not None:
            return self._writer
        folder = os.path.join(trainer.out, self._logdir)
        summary_writer_class = _summary_writer_class()
        try:
            os.makedirs(folder, exist_ok=True)
            # Resumed: hide what was written past the snapshot. Fresh: hide any earlier run.
            # tensorboardX names a file by the second and the host: a second try in the
            # same second would replace the first one's file. TensorBoard reads a folder's
            # files in the order of their names, so the suffix (nanoseconds) keeps them in
            # the order they were written.
            summary_writer = summary_writer_class(
                folder, purge_step=self._last_step + 1 if self._resumed else 0,
                filename_suffix='.{}'.format(time.time_ns()))
        except OSError as error:
            raise type(error)(error.errno, 'TensorBoardReport cannot write its event files in '
                              '{}: {}'.format(folder, error.strerror or error)) from error
        self._writer = _Writer(summary_writer, folder, self._queue_size)
        if self._parameters and not self._resumed:
            self._writer.offer(('hparams', dict(self._parameters)), bounded=False)
        return self._writer

    def _queue_rows(self, trainer: chainer.training.Trainer, bounded: bool) -> None:
        assert self._writer is not None
        self._pending += [(step, {self._tag(key): value for key, value in values.items()})
                          for step, values in self._rows.new(trainer) if step > self._last_step]
        if self._pending and self._writer.offer(('scalars', self._pending), bounded=bounded):
            self._last_step = self._pending[-1][0]
            self._pending = []

    def finalize(self) -> None:
        """Writes what is left and waits up to ``flush_timeout`` s for the writer."""
        if self._finalized or self._trainer is None:
            return
        self._finalized = True
        if not is_rank_zero(self._comm):
            return
        try:
            writer = self._open(self._trainer)
        except OSError as error:
            # Raised at the first report already, or the run ended before one: finalize
            # must not raise, or the other extensions' finalize would not run.
            warnings.warn(str(error), RuntimeWarning)
            return
        if writer.error is None:
            self._queue_rows(self._trainer, bounded=False)
        unwritten = writer.close(self._flush_timeout)
        writer.summary_writer.close()
        if writer.error is not None or unwritten:
            warnings.warn('TensorBoardReport: {} report(s) could not be written in {}{}'.format(
                unwritten, writer.folder, ': {}'.format(writer.error) if writer.error else
                ' within flush_timeout={} s'.format(self._flush_timeout)), RuntimeWarning)

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        """Saves the last step written and the LogReport rows taken."""
        if isinstance(serializer, chainer.Deserializer):
            if self._finalized:
                self._start_run()
            self._resumed = True
        else:
            # Rows still waiting for room in the queue are read again after a resume.
            self._rows.taken -= len(self._pending)
            self._pending = []
        self._last_step = int(serializer('_last_step', self._last_step))
        self._rows.serialize(serializer)
