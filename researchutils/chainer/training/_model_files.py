"""The files of an experiment's folder: snapshots, models, run state, settings."""
import json
import os
import re
import stat

from chainer.serializers import npz as chainer_npz

from researchutils import _files

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


def read_json(path):
    """The JSON data in the file ``path``."""
    with open(path, encoding='utf-8') as stream:
        return json.load(stream)
