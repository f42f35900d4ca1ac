"""A loaded experiment runs no code its files choose, and writes only in its own folder."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from researchutils.chainer.training import ChainerExperiment
from tests.chainer.training import tasks


class MakesMarkerWhenUnpickled(object):
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def saved_experiment(tmp_path, edit):
    exp = ChainerExperiment(tasks.make_params(num_epochs=1), tasks.Regressor, name='exp',
                            save_path=str(tmp_path / 'runs'), seed=0)
    path = exp.save()
    with open(path) as stream:
        saved = json.load(stream)
    edit(saved)
    with open(path, 'w') as stream:
        json.dump(saved, stream)
    return exp.output_dir


def test_a_snapshot_extension_with_autoload_as_scheduler_is_refused(tmp_path):
    # Chainer's _Snapshot(autoload=True) would unpickle a planted file in the folder.
    def plant(saved):
        training = saved['params']['fixed_params']['training']
        training['lr_sched_cls'] = {'__object__': 'chainer.training.extensions._snapshot:_Snapshot'}
        training['lr_sched_params'] = {'autoload': True, 'filename': 'pwn{.updater.epoch}'}

    folder = saved_experiment(tmp_path, plant)
    marker = str(tmp_path / 'code_ran')
    with open(os.path.join(folder, 'pwn_payload'), 'wb') as stream:
        np.savez(stream, **{'updater/iterator:main/epoch': np.array(
            [MakesMarkerWhenUnpickled(marker)], dtype=object)})
    with pytest.raises(ValueError, match=r"lr_sched_cls.*_Snapshot"):
        ChainerExperiment.load(folder).run(*tasks.make_managers(n_train=64))
    assert not os.path.exists(marker)


def test_a_loaded_experiment_writes_in_the_folder_it_was_loaded_from(tmp_path):
    elsewhere = tmp_path / 'victim'

    def move(saved):
        saved['save_path'], saved['name'] = str(elsewhere), 'home'

    folder = saved_experiment(tmp_path, move)
    loaded = ChainerExperiment.load(folder)
    assert loaded.output_dir == os.path.abspath(folder)
    loaded.run(*tasks.make_managers(n_train=64))
    assert not elsewhere.exists()
    assert os.path.exists(os.path.join(folder, 'final_model.npz'))


@pytest.mark.parametrize('name', ['../..', '..', 'a/b', '/etc', '', 3])
def test_a_loaded_experiment_ignores_the_name_and_save_path_in_its_file(tmp_path, name):
    # A grid-search or k-fold run saved under "exp/grid_0" loads as well as a crafted "../..".
    folder = saved_experiment(
        tmp_path, lambda saved: saved.update(name=name, save_path='/somewhere/else'))
    loaded = ChainerExperiment.load(folder)
    assert os.path.realpath(loaded.output_dir) == os.path.realpath(folder)


def test_a_loaded_model_class_must_be_a_network(tmp_path):
    folder = saved_experiment(
        tmp_path, lambda saved: saved.update(model_cls='chainer.links.connection.linear:Linear'))
    with pytest.raises(ValueError, match=r"model_cls.*Linear.*closure and prepare_batch"):
        ChainerExperiment.load(folder)


def test_a_model_class_of_a_library_does_not_trust_the_library(tmp_path):
    # A network class defined in researchutils would otherwise trust all of researchutils.
    def plant(saved):
        saved['model_cls'] = ('researchutils.chainer.models.abstract_network:'
                              'AbstractChainerNetwork')
        saved['params']['fixed_params']['training']['losses'] = {
            'L': {'__object__': 'researchutils.chainer.serializers.npz:load_model'}}

    folder = saved_experiment(tmp_path, plant)
    with pytest.raises(ValueError, match=r"losses/L.*load_model"):
        ChainerExperiment.load(folder)


def test_a_fifo_named_like_a_snapshot_is_not_resumed_from(tmp_path):
    exp = ChainerExperiment(tasks.make_params(num_epochs=1), tasks.Regressor, name='exp',
                            save_path=str(tmp_path), seed=0)
    os.makedirs(exp.output_dir)
    os.mkfifo(os.path.join(exp.output_dir, 'snapshot_epoch_9'))
    open(os.path.join(exp.output_dir, 'snapshot_epoch_\u0669'), 'w').close()  # Arabic 9
    exp.run(*tasks.make_managers(n_train=64))
    with open(os.path.join(exp.output_dir, 'log')) as stream:
        assert [entry['epoch'] for entry in json.load(stream)] == [1]


SAME_SCRIPT = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})
    from researchutils.chainer.training import ChainerExperiment
    from tests.chainer.training import tasks

    class Net(tasks.Regressor):
        pass

    exp = ChainerExperiment(tasks.make_params(num_epochs=1), Net, name='exp',
                            save_path={folder!r}, seed=0)
    exp.save()
    print(ChainerExperiment.load(exp.output_dir, allowed_modules=['tests']).model_cls is Net)
''')


def test_a_model_class_of_the_running_script_loads_in_that_script(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    result = subprocess.run(
        [sys.executable, '-c', SAME_SCRIPT.format(root=root, folder=str(tmp_path))],
        capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == 'True', result.stderr


def test_a_model_class_missing_from_the_running_script_is_refused(tmp_path):
    folder = saved_experiment(tmp_path, lambda saved: saved.update(model_cls='__main__:Net'))
    with pytest.raises(ValueError, match=r"model_cls.*'__main__:Net'"):
        ChainerExperiment.load(folder)
