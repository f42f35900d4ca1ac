"""PreemptionSnapshot: on SIGTERM / SIGUSR1, snapshot at the end of the iteration and stop.

A cluster (SLURM, Kubernetes) stops a job with a signal and kills it a little later. With
this extension on a Trainer, the signal handler only sets a flag; at the end of the
iteration in progress the extension writes one snapshot, atomically, that Chainer's own
``extensions.snapshot(autoload=True)`` loads on the next start, and stops the run by
raising :class:`Preempted` (a ``SystemExit``), so that every extension's and the
updater's ``finalize`` runs and the process exits with status 75 (``os.EX_TEMPFAIL``).

The snapshot also holds NumPy's and Python's global random states, cached Gaussians
included (:mod:`researchutils._numpy_random`), which Chainer's snapshot does not keep, so
that a resumed run draws what an uninterrupted one draws. The handlers are installed and
put back by ``_signal_handlers``; ``requeue=True`` asks SLURM through ``_slurm_requeue``.
Worker processes of our iterators leave these signals to this process, even when a
cluster signals every process of the job (:mod:`researchutils._process_worker`).

Under ChainerMN (``comm``) the ranks agree at every ``check_interval``-th iteration, with
one allgather of the flag, whether any of them was signalled, so that a signal delivered to
one rank stops every rank at the same iteration; each rank writes a snapshot of its own.

Tests: tests/chainer/training/extensions/test_preemption_snapshot.py (real signals, in
this process and in training subprocesses), test_preemption_snapshot_group.py (the whole
process group, workers included), test_preemption_snapshot_handlers.py,
test_preemption_snapshot_slurm.py (a real SLURM: scancel, time limit, --signal) and
test_preemption_snapshot_mpi.py (``mpiexec -n 2``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

import chainer
from chainer import serializer as serializer_module
from chainer.training import extension

from researchutils import _files
from researchutils._checks import (
    check_bool,
    check_file_name,
    check_positive_float,
    check_positive_int,
)
from researchutils._numpy_random import (
    empty_global_random_states,
    get_global_random_states,
    set_global_random_states,
)
from researchutils.chainer.training.extensions._signal_handlers import (
    InstalledHandlers,
    check_signals,
    signal_name,
)
from researchutils.chainer.training.extensions._slurm_requeue import requeue_slurm_job

if TYPE_CHECKING:
    import numpy.typing

_DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
_DEFAULT_FILENAME = 'snapshot_iter_{.updater.iteration}'
# Under ChainerMN every rank writes a snapshot of its own (its iterator, its random states).
_DEFAULT_RANK_FILENAME = 'snapshot_iter_{.updater.iteration}_rank{rank}'


class Preempted(SystemExit):
    """Raised out of ``Trainer.run()`` once :class:`PreemptionSnapshot` has saved the run.

    A ``SystemExit`` whose code is :attr:`EXIT_STATUS`, 75 (``os.EX_TEMPFAIL``,
    "temporary failure, try again"): it passes
    through ``except Exception`` (the Trainer then calls no ``on_error`` and prints no
    traceback, but runs every ``finalize``), and a script that does not catch it exits
    with status 75 and no traceback.

    Attributes:
        iteration (int): The last iteration done; the snapshot holds the state after it.
        signal_number (int): The signal that asked the run to stop.
        path (str): The snapshot written.

    Example:
        >>> issubclass(Preempted, SystemExit)
        True
        >>> Preempted(12, signal.SIGTERM, 'result/snapshot_iter_12').code
        75
    """

    #: The exit status of a process that stopped with a snapshot written.
    EXIT_STATUS = 75

    def __init__(self, iteration: int, signal_number: int, path: str) -> None:
        super(Preempted, self).__init__(self.EXIT_STATUS)
        self.iteration = iteration
        self.signal_number = signal_number
        self.path = path

    @property
    def signal_name(self) -> str:
        """str: The signal's name (``'SIGTERM'``), or ``'signal N'`` for one without."""
        return signal_name(self.signal_number)

    def __str__(self) -> str:
        return ('preempted by {} after iteration {}: the snapshot {!r} resumes the run '
                '(exit status {})'.format(self.signal_name, self.iteration, self.path,
                                          self.EXIT_STATUS))


def _uses_gpu(trainer: chainer.training.Trainer) -> bool:
    return any(isinstance(optimizer.target.device, chainer.backend.GpuDevice)
               for optimizer in trainer.updater.get_all_optimizers().values())


class PreemptionSnapshot(extension.Extension):
    """Snapshots the run and stops it when the cluster signals that it will end the job.

    At ``initialize`` it installs a handler for each of ``signals``; the handler only
    notes the signal (nothing else runs in it, so a training iteration costs what it
    did). At the end of the iteration in progress, after every other extension of that
    iteration (its priority is below that of Chainer's ``snapshot``), it

    1. writes the Trainer, as ``extensions.snapshot`` does (``save_npz``), to
       ``trainer.out/filename``: a temporary file in the same folder, flushed, then
       renamed over the name, so a SIGKILL during the write leaves the previous
       snapshot whole and no partial one; a second signal during the write is only
       noted;
    2. with ``requeue=True`` under SLURM, runs ``scontrol requeue $SLURM_JOB_ID``;
    3. raises :class:`Preempted`, a ``SystemExit``: the Trainer runs every extension's
       ``finalize`` (closing worker processes and threads) and the updater's, and the
       process exits with status :attr:`Preempted.EXIT_STATUS` (75).

    Run the same script again: ``extensions.snapshot(autoload=True)`` with the same
    ``filename`` loads the newest snapshot, this one. The snapshot holds, under this
    extension's keys, NumPy's global random state (``numpy.random``) and Python's
    (``random``), as they were at the end of the iteration; they are set back when the
    Trainer is loaded and again at this extension's ``initialize``, the last one, so a
    resumed run draws exactly what an uninterrupted one draws. A snapshot without them
    (written by a Trainer without this extension) loads with a warning and leaves the
    random states as they are. CuPy's generator state cannot be saved (CuPy has no
    ``get_state``; cuRAND keeps it on the device): a run whose model is on a GPU gets a
    warning when the snapshot is written, and its GPU draws (dropout, ``cupy.random``)
    after resuming differ from an uninterrupted run's.

    ``finalize`` puts back the handlers that were there before, as they were (a handler
    set outside Python, for which ``signal.getsignal`` gives None, included: its C-level
    action is saved and restored); the next run installs its own afresh. The first of
    several signals names the stop. A signal noted when no iteration follows (the run
    reached its end) is raised again once they are back, so it has its usual effect at
    once (by default the process ends); if the run ends with
    an exception instead, that exception goes on and the signal gets a warning. If the
    snapshot cannot be written (a full disk), the ``OSError`` stops the run and no
    partial file is left.

    Handlers can be installed only from the main thread: a Trainer run in another
    thread gets a ``RuntimeWarning`` saying so, and the extension then does nothing.

    Under ChainerMN, give the communicator: a cluster may signal only one rank (SLURM's
    ``--signal=B:`` reaches the batch shell's process), and a rank that stopped alone
    would leave the others waiting in their next collective call forever. At every
    ``check_interval``-th iteration the ranks exchange their flags (one ``allgather``
    of an int through ``comm.mpi_comm``: tens of microseconds, see
    ``benchmarks/README.md``); when any rank was signalled, every rank writes its own
    snapshot at that same iteration (``filename`` holds ``{rank}``: the weights are
    the same on every rank, but each rank's iterator position and random states are
    its own) and raises :class:`Preempted`. Give each rank's
    ``extensions.snapshot(autoload=True)`` the same per-rank ``filename`` (the default
    ``'snapshot_iter_{.updater.iteration}_rank{rank}'``, formatted with
    ``rank=comm.rank``), and the ranks resume from their own snapshots.

    Args:
        signals (iterable of int): The signals that stop the run; by default SIGTERM
            (sent by SLURM's ``scancel`` and at the time limit, and by Kubernetes) and
            SIGUSR1 (``#SBATCH --signal=B:USR1@120`` sends it before the time limit).
        filename (str or None): The snapshot's file name in ``trainer.out``, formatted
            with the trainer (and ``rank``, the ChainerMN rank, 0 without ``comm``); the
            same as the ``filename`` of your ``extensions.snapshot`` so that its
            ``autoload`` finds it. None: ``'snapshot_iter_{.updater.iteration}'``, and
            ``'snapshot_iter_{.updater.iteration}_rank{rank}'`` with ``comm``. With a
            ``comm`` of several ranks it must hold ``{rank}``.
        requeue (bool): After writing the snapshot, put the SLURM job back in the
            queue with ``scontrol requeue $SLURM_JOB_ID``. A failure (no
            ``SLURM_JOB_ID``, no ``scontrol``, a refusal) is a warning: the snapshot
            is written, and the exit status is still 75.
        requeue_timeout (float): Seconds to wait for ``scontrol``.
        comm: A ChainerMN communicator (with ``rank``, ``size`` and ``mpi_comm``): the
            ranks agree on stopping, and only rank 0 requeues. None: this process alone.
        check_interval (int): With ``comm``, the ranks agree every this many
            iterations (a signal then stops the run up to ``check_interval - 1``
            iterations later); 1, the default, agrees at every iteration.

    Attributes:
        signal_number (int or None): The first signal noted in the current run.

    Raises:
        TypeError, ValueError: An argument is wrong (named in the message): a
            ``filename`` that is empty, ``'.'``, ``'..'`` or holds a path separator
            (it is one file in ``trainer.out``), for instance.
        Preempted: From ``Trainer.run()``, after the snapshot is written.

    Example:
        >>> from chainer.training import extensions
        >>> trainer.extend(extensions.snapshot(autoload=True))  # doctest: +SKIP
        >>> trainer.extend(PreemptionSnapshot())  # doctest: +SKIP
        >>> trainer.run()  # a SIGTERM: snapshot_iter_N written, exit status 75  # doctest: +SKIP
        >>> PreemptionSnapshot.priority < -100  # after Chainer's snapshot (-100)
        True
    """

    priority = -1000

    def __init__(self, signals: Iterable[int] = _DEFAULT_SIGNALS, filename: str | None = None,
                 requeue: bool = False, requeue_timeout: float = 60., comm: Any = None,
                 check_interval: int = 1) -> None:
        self.signals = check_signals(signals)
        if comm is not None and not (isinstance(getattr(comm, 'rank', None), int)
                                     and isinstance(getattr(comm, 'size', None), int)
                                     and hasattr(comm, 'mpi_comm')):
            raise TypeError('comm must be a ChainerMN communicator (with int rank and size '
                            'and mpi_comm), got {!r}'.format(comm))
        if filename is None:
            filename = _DEFAULT_FILENAME if comm is None else _DEFAULT_RANK_FILENAME
        if not isinstance(filename, str):
            raise TypeError('filename must be a str (a format of the trainer, such as '
                            "'snapshot_iter_{{.updater.iteration}}'), got {!r}".format(filename))
        # A file in trainer.out, where extensions.snapshot(autoload=True) looks.
        check_file_name(filename, 'filename')
        if comm is not None and comm.size > 1 and '{rank}' not in filename:
            raise ValueError('filename {!r} has no {{rank}}: under ChainerMN each of the {} '
                             'ranks writes a snapshot of its own, so the names must '
                             'differ'.format(filename, comm.size))
        self.filename = filename
        self.requeue = check_bool(requeue, 'requeue')
        self.requeue_timeout = check_positive_float(requeue_timeout, 'requeue_timeout')
        self.check_interval = check_positive_int(check_interval, 'check_interval')
        self._comm = comm
        self._agreed_signal: int | None = None
        self.signal_number: int | None = None
        self._handlers = InstalledHandlers()
        self._loaded_random_states: dict[str, numpy.typing.NDArray[Any]] | None = None
        self._preempted = False

    def trigger(self, trainer: chainer.training.Trainer) -> bool:
        """True once a signal was noted (on any rank, under ChainerMN): only then it runs.

        With ``comm`` every rank calls it at every iteration, and at every
        ``check_interval``-th one it is a collective call: each rank passes its flag.
        """
        if self._comm is None:
            self._agreed_signal = self.signal_number
        elif trainer.updater.iteration % self.check_interval == 0:
            # The smallest signal number noted on any rank, None for none: alike on all.
            noted = [number for number in self._comm.mpi_comm.allgather(
                int(self.signal_number or 0)) if number]
            self._agreed_signal = min(noted) if noted else None
        return self._agreed_signal is not None

    def _note(self, signal_number: int, frame: FrameType | None) -> None:
        if self.signal_number is None:
            self.signal_number = signal_number

    def initialize(self, trainer: chainer.training.Trainer) -> None:
        # One extension may serve several runs in turn (as in a k-fold loop).
        self.signal_number = None
        self._agreed_signal = None
        self._preempted = False
        if threading.current_thread() is not threading.main_thread():
            warnings.warn(
                'PreemptionSnapshot cannot install handlers for {}: the Trainer runs in '
                'thread {!r}, and Python lets only the main thread handle signals; this run '
                'will not snapshot when the cluster stops it'.format(
                    ', '.join(signal_name(number) for number in self.signals),
                    threading.current_thread().name),
                RuntimeWarning, stacklevel=2)
        else:
            self._handlers.install(self.signals, self._note)
        if self._loaded_random_states is not None:
            # Again, last of all initializers, in case one drew since the snapshot loaded.
            set_global_random_states(self._loaded_random_states)
            self._loaded_random_states = None

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        signal_number = self._agreed_signal
        if signal_number is None:
            return
        rank = 0 if self._comm is None else self._comm.rank
        path = os.path.join(trainer.out, self.filename.format(trainer, rank=rank))
        if _uses_gpu(trainer):
            warnings.warn('the model is on a GPU: CuPy\'s random generator state cannot be '
                          'saved, so GPU draws (dropout, cupy.random) after resuming from {!r} '
                          'will differ from an uninterrupted run\'s'.format(path),
                          RuntimeWarning, stacklevel=2)
        _files.write_atomically(
            path, lambda file: chainer.serializers.save_npz(file, trainer))
        self._preempted = True
        iteration = trainer.updater.iteration
        sys.stderr.write('PreemptionSnapshot: {} received; the state after iteration {} is '
                         'in {!r}; stopping with exit status {}\n'.format(
                             signal_name(signal_number), iteration, path,
                             Preempted.EXIT_STATUS))
        sys.stderr.flush()
        if self.requeue and rank == 0:
            requeue_slurm_job(self.requeue_timeout)
        raise Preempted(iteration, signal_number, path)

    def finalize(self) -> None:
        self._handlers.restore()
        if self.signal_number is None or self._preempted:
            return
        # Chainer calls finalize in a finally block: an exception in flight ends the run.
        ending = sys.exc_info()[1]
        if ending is not None:
            warnings.warn('PreemptionSnapshot: {} arrived, but the run ends with {!r} before '
                          'any snapshot was written for it'.format(
                              signal_name(self.signal_number), ending), RuntimeWarning)
        else:
            # The run reached its end before an iteration could act on the signal:
            # nothing is left to save, so the signal takes its usual effect now.
            signal.raise_signal(self.signal_number)

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        if isinstance(serializer, serializer_module.Serializer):
            for key, value in get_global_random_states().items():
                serializer(key, value)
            return
        states = empty_global_random_states()
        try:
            for key, value in states.items():
                serializer(key, value)
        except KeyError:
            warnings.warn('the snapshot holds no random states (it was written without '
                          'PreemptionSnapshot): NumPy\'s and Python\'s global random states '
                          'are left as they are, so the resumed run is not an exact '
                          'continuation', RuntimeWarning)
            return
        set_global_random_states(states)
        self._loaded_random_states = states
