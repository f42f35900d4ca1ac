"""The files of an experiment's folder: snapshots, models, run state, settings."""
import numbers
import os
import re
import stat

from chainer.serializers import npz as chainer_npz

from researchutils import _files
from researchutils.chainer.training import json_values, train_utils

SNAPSHOT_NAME = 'snapshot_epoch_{.updater.epoch}'
STATE_FILE = 'run_state.json'
BEST_MODEL = 'best_model.npz'
FINAL_MODEL = 'final_model.npz'
SETTINGS_FILE = 'experiment.json'
_SNAPSHOT = re.compile(r'^snapshot_epoch_([0-9]+)$')


def replace_model(path, model):
    """Writes ``model`` to the npz file ``path`` atomically, replacing what was there.

    The same file as ``serializers.save_model``'s, through the same atomic
    writer; but the best and final models are meant to be replaced, which
    ``save_model`` never does.
    """
    _files.write_atomically(path, lambda file: chainer_npz.save_npz(file, model))


def latest_snapshot(folder):
    """The path of the newest ``snapshot_epoch_<n>`` in ``folder``, or None."""
    if not os.path.isdir(folder):
        return None
    found = [(int(m.group(1)), name) for name in os.listdir(folder)
             for m in [_SNAPSHOT.match(name)]
             if m and stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode)]
    return os.path.join(folder, max(found)[1]) if found else None


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
