"""save() never rewrites the record of a run that has started, nor writes into a held folder.

Real runs of the task's experiment (tests/chainer/training/tasks.py): one finished, one
preempted (a snapshot and no run_state.json), and one held by another process that is paused
mid-run (tests/support/preemptible_experiment.py). After each refused save the folder's files
are byte for byte what they were.
"""
import json
import os

import pytest

from researchutils.chainer.training import ChainerExperiment
from researchutils.chainer.training._experiment import saving
from researchutils.chainer.training._ownership import OWNER_FILE, FolderInUseError
from tests.chainer.training import tasks
from tests.support import preemptible_experiment
from tests.support.preemptible_training import touch, wait_for
from tests.support.processes import no_process_left  # noqa: F401 (fixture)


def _files(folder):
    """Every file below ``folder`` and its bytes; a live owner's claim without its heartbeat,
    which its own thread renews."""
    found = {}
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, 'rb') as stream:
                data = stream.read()
            if name == OWNER_FILE:
                data = {key: value for key, value in json.loads(data).items()
                        if key != 'heartbeat'}
            found[os.path.relpath(path, folder)] = data
    return found


def _saved(experiment):
    with open(os.path.join(experiment.output_dir, 'experiment.json')) as stream:
        return json.load(stream)


@pytest.fixture
def finished(tmp_path):
    """A saved experiment whose two-epoch run finished in tmp_path/exp."""
    experiment = tasks.experiment(tmp_path, tasks.make_params(num_epochs=2),
                                  key_mapping={'x': 'data'})
    experiment.save()
    experiment.run(*tasks.make_managers(n_train=64, n_val=32))
    return experiment


def _other(tmp_path, **model):
    return tasks.experiment(tmp_path, tasks.make_params(model, num_epochs=2),
                            key_mapping={'x': 'label'})


def test_a_save_of_other_settings_over_a_finished_run_is_refused_before_writing(
        finished, tmp_path):
    before = _files(finished.output_dir)
    with pytest.raises(ValueError) as refused:
        _other(tmp_path, num_hidden=30).save()
    message = str(refused.value)
    assert 'params/fixed_params/model/num_hidden: (not set) -> 30' in message
    assert 'key_mapping/x: "data" -> "label"' in message
    assert 'run_state.json is there' in message
    assert 'give the experiment another name or save_path' in message
    assert 'ChainerExperiment.load({!r})'.format(finished.output_dir) in message
    assert _files(finished.output_dir) == before
    assert _saved(finished)['key_mapping'] == {'x': 'data'}


def test_the_refused_folder_still_loads_and_returns_its_run(finished, tmp_path):
    with pytest.raises(ValueError):
        _other(tmp_path, num_hidden=30).save()
    train, val = tasks.make_managers(n_train=64, n_val=32)
    model = ChainerExperiment.load(finished.output_dir).run(train, val)
    assert model.fc1.W.shape == (16, tasks.NUM_INPUTS)


def test_a_save_of_the_same_settings_over_a_finished_run_writes_the_same_file(finished):
    before = _files(finished.output_dir)
    finished.save()
    assert _files(finished.output_dir) == before


def test_a_save_into_a_folder_where_no_run_started_rewrites_its_file(tmp_path):
    tasks.experiment(tmp_path, tasks.make_params(num_epochs=2)).save()
    changed = _other(tmp_path, num_hidden=30)
    changed.save()
    assert _saved(changed)['params']['fixed_params']['model'] == {'num_hidden': 30}


def test_a_preempted_run_left_only_a_snapshot_and_its_record_is_kept(tmp_path):
    experiment = tasks.experiment(tmp_path, tasks.make_params(num_epochs=2))
    experiment.save()
    experiment.run(*tasks.make_managers(n_train=64, n_val=32))
    for name in ('run_state.json', 'final_model.npz'):
        os.remove(os.path.join(experiment.output_dir, name))
    before = _files(experiment.output_dir)
    with pytest.raises(ValueError, match=r'snapshot_epoch_2 is there'):
        _other(tmp_path, num_hidden=30).save()
    assert _files(experiment.output_dir) == before


@pytest.mark.slow(reason='a training process paused while this one saves')
@pytest.mark.timeout(600)
@pytest.mark.usefixtures('no_process_left')
def test_a_save_into_a_folder_another_process_runs_in_is_refused_naming_the_owner(tmp_path):
    out = str(tmp_path)
    owner = preemptible_experiment.start(out, 'run', '--pause-at', 'exp', '4')
    try:
        wait_for(os.path.join(out, 'paused'), timeout=preemptible_experiment.PROCESS_TIMEOUT)
        same = tasks.experiment(tmp_path)  # in the owner's folder, tmp_path/exp
        before = _files(same.output_dir)
        with pytest.raises(FolderInUseError, match=r'pid {}'.format(owner.pid)):
            same.save()
        assert _files(same.output_dir) == before
        assert 'experiment.json' not in before
    finally:
        touch(os.path.join(out, 'go'))
        status, stderr = preemptible_experiment.finish(owner)
    assert status == 0, stderr


def test_started_run_names_the_file_that_shows_it(tmp_path):
    assert saving.started_run(str(tmp_path)) is None
    (tmp_path / 'experiment.json').write_text('{}')
    assert saving.started_run(str(tmp_path)) is None
    (tmp_path / 'best_model.npz').write_bytes(b'')
    assert saving.started_run(str(tmp_path)) == str(tmp_path / 'best_model.npz')
    (tmp_path / 'final_model.npz').write_bytes(b'')
    assert saving.started_run(str(tmp_path)) == str(tmp_path / 'final_model.npz')
    (tmp_path / 'snapshot_epoch_3').write_bytes(b'')
    assert saving.started_run(str(tmp_path)) == str(tmp_path / 'snapshot_epoch_3')
    (tmp_path / 'run_state.json').write_text('{}')
    assert saving.started_run(str(tmp_path)) == str(tmp_path / 'run_state.json')


def test_differences_name_each_changed_key_path_and_both_values():
    saved = {'a': 1, 'b': {'c': [1, 2], 'd': 'x'}, 'gone': True}
    new = {'a': 1.0, 'b': {'c': [1, 3], 'd': 'x'}, 'added': None}
    assert list(saving.differences(saved, new)) == [
        'a: 1 -> 1.0', 'b/c: [1, 2] -> [1, 3]', 'gone: true -> (not set)',
        'added: (not set) -> null']
    assert list(saving.differences(saved, saved)) == []
    assert list(saving.differences([1], {'a': 1})) == ['(the whole file): [1] -> {"a": 1}']
