"""The files of an experiment's folder: their names, and which snapshot or model to take.

Only regular files count: a folder, a FIFO or a symbolic link named like a snapshot or a
model is never resumed from nor returned. Tests:
``tests/chainer/training/_experiment/test_files.py``.
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator, Mapping
from typing import Any

from researchutils._errors import add_note

SNAPSHOT_NAME = 'snapshot_epoch_{.updater.epoch}'
# Under ChainerMN a preempted run leaves one snapshot per rank (its iterator, its random
# states), named with the epochs finished, as the epoch-end snapshots rank 0 writes.
RANK_SNAPSHOT_NAME = SNAPSHOT_NAME + '_rank{rank}'
STATE_FILE = 'run_state.json'
BEST_MODEL = 'best_model.npz'
FINAL_MODEL = 'final_model.npz'
SETTINGS_FILE = 'experiment.json'
_SNAPSHOT = re.compile(r'^snapshot_epoch_([0-9]+)$')
_RANK_SNAPSHOT = re.compile(r'^snapshot_epoch_([0-9]+)_rank([0-9]+)$')


def _is_regular_file(path: str) -> bool:
    """Whether ``path`` itself (not what a link names) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _newest(folder: str, pattern: re.Pattern[str], rank: int | None = None) -> str | None:
    if not os.path.isdir(folder):
        return None
    found = [(int(m.group(1)), name) for name in os.listdir(folder)
             for m in [pattern.match(name)]
             if m and (rank is None or int(m.group(2)) == rank)
             and _is_regular_file(os.path.join(folder, name))]
    return os.path.join(folder, max(found)[1]) if found else None


def latest_snapshot(folder: str) -> str | None:
    """The path of the newest ``snapshot_epoch_<n>`` in ``folder``, or None."""
    return _newest(folder, _SNAPSHOT)


def resume_snapshot(folder: str, comm: Any) -> str | None:
    """The snapshot this process resumes from: the newest of ``folder``, or None.

    Without ChainerMN, :func:`latest_snapshot`. Under ChainerMN the ranks of a
    preempted run each left ``snapshot_epoch_<n>_rank<r>``: each rank takes its own
    when every rank has one of the same ``n``, not older than the newest epoch-end
    snapshot (they hold the same iteration, at least as new); otherwise every rank
    takes rank 0's epoch-end snapshot. A collective call under ChainerMN.
    """
    shared = latest_snapshot(folder)
    if comm is None:
        return shared
    own = _newest(folder, _RANK_SNAPSHOT, comm.rank)
    own_epoch = None if own is None else _epoch_in_name(_RANK_SNAPSHOT, own)
    epochs = comm.mpi_comm.allgather(own_epoch)
    if (epochs[0] is not None and len(set(epochs)) == 1
            and (shared is None or epochs[0] >= snapshot_epoch(shared))):
        return own
    return shared


def snapshot_epoch(path: str) -> int:
    """The epoch in the name of the snapshot ``path`` (from :func:`latest_snapshot`)."""
    return _epoch_in_name(_SNAPSHOT, path)


def _epoch_in_name(pattern: re.Pattern[str], path: str) -> int:
    """The epoch in the name of ``path``, a snapshot that :func:`_newest` found by ``pattern``."""
    match = pattern.match(os.path.basename(path))
    assert match is not None, path  # found by this very pattern
    return int(match.group(1))


def model_path(folder: str, scored: bool,
               finished_state: Mapping[str, object] | None = None) -> str:
    """The model file a run in ``folder`` returns: the best model when ``scored`` (and there is
    one), else the final model.

    Args:
        folder (str): The experiment's folder.
        scored (bool): The run chose a best model by its validation score.
        finished_state (dict or None): What ``run_state.json`` says of a run that finished
            earlier: its model must be there, never an untrained one returned instead.

    Raises:
        FileNotFoundError: The finished run's model file is missing or not a regular file (a
            symbolic link, a folder); the message says how to train again.
    """
    best = os.path.join(folder, BEST_MODEL)
    final = os.path.join(folder, FINAL_MODEL)
    if finished_state is not None:
        path = best if scored else final
        if not _is_regular_file(path):
            snapshot = latest_snapshot(folder)
            raise FileNotFoundError(
                '{} says the run finished at epoch {}, but its model {} is missing or not a '
                'regular file, so there is no trained model to return. Delete {} to train '
                'again: the run resumes from {}'.format(
                    STATE_FILE, finished_state['epoch'], path, os.path.join(folder, STATE_FILE),
                    snapshot or 'the start (there is no snapshot)'))
        return path
    if scored and _is_regular_file(best):
        return best
    return final


@contextlib.contextmanager
def refused_resume(folder: str, path: str) -> Iterator[None]:
    """Says, on an error loading ``path`` (a snapshot or model of the run in ``folder``), that
    the folder holds a run this experiment cannot take up, and how to start a new one."""
    try:
        yield
    except (KeyError, ValueError) as error:
        add_note(error, 'The experiment folder {} holds a run that this experiment cannot take '
                        'up from {}: a run of another model (its architecture differs), or a '
                        'damaged file. To train this model, start a new run: give the '
                        'experiment another name or save_path, or delete {}'.format(
                            folder, os.path.basename(path), folder))
        raise
