"""run_state.json: written atomically when a run finishes, checked before it is believed."""
import errno
import json
import os
import subprocess
import sys

import pytest

from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment


def _write_state(exp, text):
    with open(os.path.join(exp.output_dir, 'run_state.json'), 'w') as stream:
        stream.write(text)


def test_a_state_saying_not_finished_beside_a_snapshot_resumes_and_trains(tmp_path):
    train, val = tasks.make_managers(n_train=64, batch_size=32)  # 2 iterations per epoch
    first = experiment(tmp_path, tasks.make_params(num_epochs=1),
                       extensions=[tasks.CountUpdates()])  # as the resumed run (its state)
    first.run(train, val)
    _write_state(first, '{"finished": false, "epoch": 1}')
    counter = tasks.CountUpdates()
    second = experiment(tmp_path, tasks.make_params(num_epochs=3), extensions=[counter])
    second.run(train, val)
    assert (counter.first_epoch, counter.updates) == (1, 2 * 2)
    assert [entry['epoch'] for entry in tasks.read_log(second)] == [1, 2, 3]
    with open(os.path.join(second.output_dir, 'run_state.json')) as stream:
        assert json.load(stream) == {'finished': True, 'epoch': 3, 'num_epochs': 3}


@pytest.mark.parametrize('text', [
    '{"finished": "yes", "epoch": 1}', '{"finished": true}', '{"finished": true, "epoch": -1}',
    '{"finished": true, "epoch": 1.5}', '{"finished": true, "epoch": true}', '[]',
    '{"finished": true, "epoch": 1, "comment": "done"}',
    '{"finished": true, "epoch": 1, "num_epochs": 0}',
    '{"finished": true, "epoch": 1, "num_epochs": "1"}',
    '{"finished": true, "epoch": 1, "num_epochs": true}'])
def test_a_state_that_does_not_say_what_happened_is_refused_naming_it(tmp_path, text):
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    first = experiment(tmp_path, tasks.make_params(num_epochs=1))
    first.run(train, val)
    _write_state(first, text)
    with pytest.raises(ValueError, match=r'run_state.json must hold .*not trusted') as info:
        experiment(tmp_path, tasks.make_params(num_epochs=1)).run(train, val)
    # The message names the file and what it holds.
    assert os.path.join(first.output_dir, 'run_state.json') in str(info.value)
    assert repr(json.loads(text)) in str(info.value)


def test_a_finished_state_older_than_the_newest_snapshot_is_refused(tmp_path):
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    first = experiment(tmp_path, tasks.make_params(num_epochs=2))
    first.run(train, val)
    _write_state(first, '{"finished": true, "epoch": 1}')
    with pytest.raises(ValueError, match=r"says the run finished at epoch 1, but "
                                         r".*snapshot_epoch_2 is newer") as info:
        experiment(tmp_path, tasks.make_params(num_epochs=2)).run(train, val)
    assert str(info.value).startswith(os.path.join(first.output_dir, 'run_state.json'))


@pytest.mark.parametrize('epoch, snapshots', [(0, []), (2, ['snapshot_epoch_2']),
                                              (3, ['snapshot_epoch_1', 'snapshot_epoch_3'])])
def test_a_finished_state_as_new_as_the_newest_snapshot_is_believed(tmp_path, epoch,
                                                                    snapshots):
    # Epoch 0: a run of no epoch at all (resumed at its end) finished; epoch n beside
    # snapshot_epoch_n: the usual end of a run.
    from researchutils.chainer.training._experiment import run_state
    for name in snapshots:
        (tmp_path / name).write_bytes(b'')
    (tmp_path / 'run_state.json').write_text(json.dumps({'finished': True, 'epoch': epoch}))
    assert run_state.read_run_state(str(tmp_path)) == {'finished': True, 'epoch': epoch}


@pytest.mark.parametrize('old_epoch', [1, None])
def test_a_write_that_fails_midway_leaves_the_old_state_or_none(tmp_path, old_epoch):
    # A real kernel refusal in a child process: past RLIMIT_FSIZE bytes every write fails
    # (EFBIG), here after the first 8 bytes of the new state were written.
    from researchutils.chainer.training._experiment import run_state
    if old_epoch is not None:
        run_state.write_run_state(str(tmp_path), old_epoch, old_epoch)
    before = sorted(os.listdir(str(tmp_path)))
    old_text = (tmp_path / 'run_state.json').read_text() if before else None
    code = ('import resource, sys\n'
            'from researchutils.chainer.training._experiment import run_state\n'
            'resource.setrlimit(resource.RLIMIT_FSIZE, (8, 8))\n'
            'try:\n'
            '    run_state.write_run_state(sys.argv[1], 123456, 123456)\n'
            'except OSError as error:\n'
            '    print("OSError", error.errno)\n')
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    assert out.split() == ['OSError', str(errno.EFBIG)]
    assert sorted(os.listdir(str(tmp_path))) == before  # no partial or temporary file
    if old_text is not None:
        assert (tmp_path / 'run_state.json').read_text() == old_text
        assert run_state.read_run_state(str(tmp_path)) == {'finished': True, 'epoch': 1,
                                                           'num_epochs': 1}


@pytest.mark.parametrize('finished', [True, False])
def test_a_state_of_epoch_zero_is_accepted(tmp_path, finished):
    # A run stopped (or an n_epochs that ended) before its first epoch ended says epoch 0.
    from researchutils.chainer.training._experiment import run_state
    (tmp_path / 'run_state.json').write_text(json.dumps({'finished': finished, 'epoch': 0}))
    assert run_state.read_run_state(str(tmp_path)) == {'finished': finished, 'epoch': 0}


def _finished_run(tmp_path, num_epochs):
    train, val = tasks.make_managers(n_train=64, batch_size=32)  # 2 iterations per epoch
    experiment(tmp_path, tasks.make_params(num_epochs=num_epochs),
               extensions=[tasks.CountUpdates()]).run(train, val)  # as the later runs (state)
    return train, val


@pytest.mark.parametrize('other', [3, 1])
def test_a_finished_run_is_never_returned_for_another_num_epochs(tmp_path, other):
    train, val = _finished_run(tmp_path, 2)
    folder = str(tmp_path / 'exp')
    before = {name: (tmp_path / 'exp' / name).read_bytes() for name in os.listdir(folder)}
    with pytest.raises(ValueError) as refused:
        experiment(tmp_path, tasks.make_params(num_epochs=other)).run(train, val)
    message = str(refused.value)
    assert ('{} holds a run that finished at epoch 2 of num_epochs 2, but this experiment '
            'asks for num_epochs {}'.format(folder, other)) in message
    assert 'Set num_epochs to 2 to get its model' in message
    assert 'delete {} to train on to {} epochs from the last snapshot ({})'.format(
        os.path.join(folder, 'run_state.json'), other,
        os.path.join(folder, 'snapshot_epoch_2')) in message
    assert 'another name or save_path' in message
    assert {name: (tmp_path / 'exp' / name).read_bytes()
            for name in os.listdir(folder)} == before


def test_a_finished_run_given_n_epochs_instead_is_compared_by_them(tmp_path):
    train, val = _finished_run(tmp_path, 2)
    with pytest.raises(ValueError, match=r'asks for num_epochs 3'):
        experiment(tmp_path, tasks.make_params(num_epochs=2), n_epochs=3).run(train, val)
    model = experiment(tmp_path, tasks.make_params(num_epochs=5), n_epochs=2).run(train, val)
    assert model.fc1.W.shape == (16, tasks.NUM_INPUTS)


def test_the_way_on_the_refusal_gives_trains_on_to_the_new_count(tmp_path):
    train, val = _finished_run(tmp_path, 2)
    os.remove(str(tmp_path / 'exp' / 'run_state.json'))
    counter = tasks.CountUpdates()
    experiment(tmp_path, tasks.make_params(num_epochs=3), extensions=[counter]).run(train, val)
    assert (counter.first_epoch, counter.updates) == (2, 2)
    assert [entry['epoch'] for entry in tasks.read_log(tmp_path / 'exp')] == [1, 2, 3]


def test_a_state_written_before_num_epochs_was_recorded_is_still_believed(tmp_path):
    train, val = _finished_run(tmp_path, 2)
    _write_state(experiment(tmp_path), '{"finished": true, "epoch": 2}')
    counter = tasks.CountUpdates()
    experiment(tmp_path, tasks.make_params(num_epochs=3), extensions=[counter]).run(train, val)
    assert counter.updates == 0
