"""The files of an experiment's folder: snapshots, models, run state, settings."""
import numbers
import os
import re
import stat

from researchutils.chainer.training import json_values, train_utils

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


def _newest(folder, pattern, rank=None):
    if not os.path.isdir(folder):
        return None
    found = [(int(m.group(1)), name) for name in os.listdir(folder)
             for m in [pattern.match(name)]
             if m and (rank is None or int(m.group(2)) == rank)
             and stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode)]
    return os.path.join(folder, max(found)[1]) if found else None


def latest_snapshot(folder):
    """The path of the newest ``snapshot_epoch_<n>`` in ``folder``, or None."""
    return _newest(folder, _SNAPSHOT)


def resume_snapshot(folder, comm):
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
    epochs = comm.mpi_comm.allgather(None if own is None else int(
        _RANK_SNAPSHOT.match(os.path.basename(own)).group(1)))
    if (epochs[0] is not None and len(set(epochs)) == 1
            and (shared is None or epochs[0] >= snapshot_epoch(shared))):
        return own
    return shared


def snapshot_epoch(path):
    """The epoch in the name of the snapshot ``path`` (from :func:`latest_snapshot`)."""
    return int(_SNAPSHOT.match(os.path.basename(path)).group(1))


def write_run_state(folder, epoch):
    """Records in ``folder`` that the run finished after ``epoch`` epochs."""
    train_utils.atomic_write_text(os.path.join(folder, STATE_FILE), json_values.dumps_json(
        {'finished': True, 'epoch': epoch}))


def read_run_state(folder):
    """What ``run_state.json`` in ``folder`` says, checked; None when there is none.

    The file is trusted only when it says what happened: a dict of exactly
    ``finished`` (a bool) and ``epoch`` (the epoch the run stopped at, a
    non-negative int), and a finished run's epoch is not older than the newest
    snapshot beside it.

    Returns:
        dict or None: ``{"finished": bool, "epoch": int}``.

    Raises:
        ValueError: The file says something else, naming it and what to do.
    """
    path = os.path.join(folder, STATE_FILE)
    if not os.path.lexists(path):
        return None
    state = json_values.load_json(path)
    if not (isinstance(state, dict) and set(state) == {'finished', 'epoch'}
            and isinstance(state['finished'], bool)
            and isinstance(state['epoch'], numbers.Integral)
            and not isinstance(state['epoch'], bool) and state['epoch'] >= 0):
        raise ValueError('{} must hold {{"finished": true or false, "epoch": <the epoch the run '
                         'stopped at>}}, but it holds {!r}: it is not trusted. Delete it to '
                         'resume from the last snapshot'.format(path, state))
    snapshot = latest_snapshot(folder)
    if state['finished'] and snapshot is not None and snapshot_epoch(snapshot) > state['epoch']:
        raise ValueError('{} says the run finished at epoch {}, but {} is newer: the file is '
                         'not trusted. Delete it to resume from that snapshot'.format(
                             path, state['epoch'], snapshot))
    return state
