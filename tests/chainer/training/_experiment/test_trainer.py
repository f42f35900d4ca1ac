"""The Trainer a ChainerExperiment builds: snapshots, scheduler, reports, user extensions."""
import os
import sys
import types

import chainer
import pytest
from chainer.training import extensions as chainer_extensions

from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training._experiment.trainer import shard
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment, read_log


class CountCalls(chainer.training.Extension):
    trigger = (1, 'epoch')

    def __init__(self):
        self.calls = 0

    def __call__(self, trainer):
        self.calls += 1


def test_checkpoints_every_checkpoint_freq_epochs(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=4), checkpoint_freq=2)
    exp.run(*tasks.make_managers())
    snapshots = sorted(n for n in os.listdir(exp.output_dir) if n.startswith('snapshot'))
    assert snapshots == ['snapshot_epoch_2', 'snapshot_epoch_4']


def test_lr_scheduler_extension_is_applied_every_epoch(tmp_path):
    params = tasks.make_params(num_epochs=3, optimizer_cls=chainer.optimizers.SGD,
                               optimizer_params={'lr': 0.1},
                               lr_sched_cls=chainer_extensions.ExponentialShift,
                               lr_sched_params={'attr': 'lr', 'rate': 0.5})
    exp = experiment(tmp_path, params, extensions=[chainer_extensions.observe_lr()])
    exp.run(*tasks.make_managers())
    rates = [entry['lr'] for entry in read_log(exp)]
    assert rates == pytest.approx([0.1, 0.05, 0.025])
    assert exp.trainer.updater.get_optimizer('main').lr == pytest.approx(0.0125)


def test_log_and_png_plots_are_written(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2))
    exp.run(*tasks.make_managers())
    for name in ('loss.png', 'metrics.png'):
        with open(os.path.join(exp.output_dir, name), 'rb') as stream:
            assert stream.read(8) == b'\x89PNG\r\n\x1a\n'


@pytest.mark.parametrize('terminal', [True, False])
def test_progress_bar_only_when_output_is_a_terminal(tmp_path, monkeypatch, terminal):
    monkeypatch.setattr(sys.stdout, 'isatty', lambda: terminal)
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    exp.run(*tasks.make_managers(n_train=64))
    assert ('ProgressBar' in exp.trainer._extensions) is terminal


def test_user_extensions_run_with_their_triggers(tmp_path):
    every_epoch, every_iteration = CountCalls(), CountCalls()
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2),
                     extensions=[every_epoch, (every_iteration, (1, 'iteration'))])
    exp.run(*tasks.make_managers(n_train=64, batch_size=32))
    assert (every_epoch.calls, every_iteration.calls) == (2, 4)


def _write_unfinished(exp):
    # As a run stopped after its first epoch leaves the folder: a snapshot, no finished state.
    with open(os.path.join(exp.output_dir, 'run_state.json'), 'w') as stream:
        stream.write('{"finished": false, "epoch": 1}')


@pytest.mark.parametrize('optimizer_cls', [chainer.optimizers.SGD, chainer.optimizers.Adam])
def test_a_resume_with_another_architecture_is_refused_saying_so(tmp_path, optimizer_cls):
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    params = {'optimizer_cls': optimizer_cls, 'optimizer_params': {}}
    first = experiment(tmp_path, tasks.make_params({'num_hidden': 1}, num_epochs=1, **params))
    first.run(train, val)
    _write_unfinished(first)
    second = experiment(tmp_path, tasks.make_params({'num_hidden': 8}, num_epochs=3, **params))
    with pytest.raises(ValueError) as raised:
        second.run(train, val)
    message = str(raised.value)
    assert 'snapshot_epoch_1' in message and "'updater/model:main/fc" in message
    assert '(1,' in message or ', 1)' in message, message
    note = '\n'.join(getattr(raised.value, '__notes__', []))
    if sys.version_info >= (3, 11):
        assert 'holds a run' in note and 'another model' in note
        assert 'another name or save_path' in note and first.output_dir in note
    # Nothing trained and nothing written over: the first run's files are as they were.
    assert [entry['epoch'] for entry in read_log(first)] == [1]


def test_a_finished_run_of_another_architecture_is_refused_not_broadcast(tmp_path):
    train, val = tasks.make_managers(n_train=64, batch_size=32)
    experiment(tmp_path, tasks.make_params({'num_hidden': 1}, num_epochs=1)).run(train, val)
    second = experiment(tmp_path, tasks.make_params({'num_hidden': 8}, num_epochs=1))
    with pytest.raises(ValueError, match=r"final_model\.npz.*'fc1/W'.*is not the shape \(8, "):
        second.run(train, val)


def _shards(n_examples, n_ranks, pad):
    """The example indices of each rank's shard of a dataset of ``n_examples``. The shard
    needs only a communicator's size and rank: the real one is tested under mpiexec
    (test_experiment_mpi.py)."""
    manager = DataManager([{'index': i} for i in range(n_examples)], 2)
    return [[example['index'] for example in shard(
        manager, types.SimpleNamespace(size=n_ranks, rank=rank), pad=pad).dataset]
        for rank in range(n_ranks)]


@pytest.mark.parametrize('n_examples, n_ranks', [(10, 3), (11, 4), (13, 2), (12, 3)])
def test_padded_shards_cover_every_example_and_are_equally_long(n_examples, n_ranks):
    shards = _shards(n_examples, n_ranks, pad=True)
    assert sorted(set(i for part in shards for i in part)) == list(range(n_examples))
    assert {len(part) for part in shards} == {-(-n_examples // n_ranks)}


@pytest.mark.parametrize('n_examples, n_ranks', [(10, 3), (11, 4), (13, 2)])
def test_unpadded_shards_split_the_examples_without_repeating_one(n_examples, n_ranks):
    shards = _shards(n_examples, n_ranks, pad=False)
    assert sorted(i for part in shards for i in part) == list(range(n_examples))
