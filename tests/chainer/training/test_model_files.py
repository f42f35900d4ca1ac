"""The files of an experiment's folder: snapshots, models, run state."""
import os
import stat

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import _model_files
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment


class CountUpdates(chainer.training.Extension):
    """Counts iterations and remembers the epoch training resumed from."""

    trigger = (1, 'iteration')

    def __init__(self):
        self.updates = 0
        self.first_epoch = None

    def initialize(self, trainer):
        self.first_epoch = trainer.updater.epoch

    def __call__(self, trainer):
        self.updates += 1


def test_resume_loads_the_newest_snapshot_and_trains_only_the_missing_epochs(tmp_path):
    train, val = tasks.make_managers(n_train=64, batch_size=32)  # 2 iterations per epoch
    first = experiment(tmp_path, tasks.make_params(num_epochs=4))
    first.run(train, val)
    snapshots = sorted(n for n in os.listdir(first.output_dir) if n.startswith('snapshot'))
    assert snapshots == ['snapshot_epoch_3', 'snapshot_epoch_4']  # two kept
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    counter = CountUpdates()
    experiment(tmp_path, tasks.make_params(num_epochs=6), extensions=[counter]).run(train, val)
    assert counter.first_epoch == 4
    assert counter.updates == 2 * 2


@pytest.mark.parametrize('umask', [0o022, 0o077])
def test_every_file_the_experiment_writes_follows_the_umask(tmp_path, umask):
    params = tasks.make_params(num_epochs=1, variable={'model': {'num_hidden': [4]}})
    exp = experiment(tmp_path, params, val_score_key='MSE')
    previous = os.umask(umask)
    try:
        exp.save()
        exp.grid_search(*tasks.make_managers(n_train=64))
    finally:
        os.umask(previous)
    names = ['experiment.json', 'grid_search.json', 'grid_0/run_state.json',
             'grid_0/best_model.npz', 'grid_0/final_model.npz', 'grid_0/snapshot_epoch_1']
    modes = {name: stat.S_IMODE(os.stat(os.path.join(exp.output_dir, name)).st_mode)
             for name in names}
    assert modes == {name: 0o666 & ~umask for name in names}


def test_latest_snapshot_is_the_highest_epoch_by_number_not_by_name(tmp_path):
    for name in ('snapshot_epoch_9', 'snapshot_epoch_10', 'snapshot_epoch_2.tmp', 'log'):
        (tmp_path / name).write_bytes(b'')
    assert _model_files.latest_snapshot(str(tmp_path)) == str(tmp_path / 'snapshot_epoch_10')


def test_latest_snapshot_of_a_missing_or_empty_folder_is_none(tmp_path):
    assert _model_files.latest_snapshot(str(tmp_path / 'missing')) is None
    assert _model_files.latest_snapshot(str(tmp_path)) is None


def test_replace_model_replaces_an_existing_file_with_the_new_weights(tmp_path):
    path = str(tmp_path / 'best_model.npz')
    first, second = tasks.Regressor(), tasks.Regressor()
    _model_files.replace_model(path, first)
    _model_files.replace_model(path, second)
    with np.load(path) as saved:
        np.testing.assert_array_equal(saved['fc1/W'], second.fc1.W.array)
