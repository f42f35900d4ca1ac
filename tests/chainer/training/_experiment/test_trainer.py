"""The Trainer a ChainerExperiment builds: snapshots, scheduler, reports, user extensions."""
import os
import signal
import sys
import types

import chainer
import numpy as np
import pytest
from chainer.training import extensions as chainer_extensions

from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training import Parameters
from researchutils.chainer.training._experiment import files
from researchutils.chainer.training._experiment.trainer import shard
from researchutils.chainer.training.extensions import BestModelSaver, Preempted
from tests.chainer.training import tasks
from tests.chainer.training.tasks import (
    CountCalls,
    CountCallsOnEveryRank,
    experiment,
    read_log,
)
from tests.support.preemptible_training import signal_self_at


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


def _scripted(scores, **training):
    """Parameters whose validation score is ``scores``, one an epoch (one val batch)."""
    return tasks.make_params(val_metrics={'score': tasks.ScriptedScore(scores)}, **training)


@pytest.mark.parametrize('mode, epochs', [('lowest', [1, 2, 3, 4, 5]), ('highest', [1, 2, 3])])
def test_early_stopping_watches_the_val_score_in_the_experiment_s_mode(tmp_path, mode, epochs):
    # A score that falls every epoch: it improves for 'lowest', so the run trains every
    # epoch and stops at num_epochs; for 'highest' it stops after `patience` (2) epochs
    # without improving.
    params = _scripted([5., 4., 3., 2., 1.], num_epochs=5, early_stopping_patience=2)
    exp = experiment(tmp_path, params, val_score_key='score', val_score_mode=mode)
    exp.run(*tasks.make_managers(n_val=32))
    assert [entry['epoch'] for entry in read_log(exp)] == epochs


def test_n_epochs_of_the_experiment_stops_the_run_before_the_parameters_num_epochs(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=5), n_epochs=2)
    exp.run(*tasks.make_managers(n_train=64))
    assert [entry['epoch'] for entry in read_log(exp)] == [1, 2]


def test_an_optimizer_without_optimizer_params_is_made_with_its_defaults(tmp_path):
    training = {'batch_size': 32, 'num_epochs': 1, 'optimizer_cls': chainer.optimizers.SGD,
                'losses': {'MSE': chainer.functions.mean_squared_error}}
    exp = experiment(tmp_path, Parameters({'model': {}, 'training': training}))
    exp.run(*tasks.make_managers(n_train=64))
    assert exp.trainer.updater.get_optimizer('main').lr == chainer.optimizers.SGD().lr


@pytest.mark.parametrize('built', [{'main': 'optimizer'}, ['default']])
def test_an_optim_builder_without_a_default_optimizer_is_refused_naming_what_it_gave(
        tmp_path, built):
    def optim_builder(model, optimizer_cls, **optimizer_params):
        return {'main': optimizer_cls(**optimizer_params).setup(model)} if isinstance(
            built, dict) else list(built)

    exp = experiment(tmp_path, tasks.make_params(num_epochs=1), optim_builder=optim_builder)
    with pytest.raises(TypeError) as raised:
        exp.run(*tasks.make_managers(n_train=64))
    message = str(raised.value)
    assert 'optim_builder' in message and '"default"' in message
    assert ("'main'" in message) if isinstance(built, dict) else ("['default']" in message)


def test_without_validation_data_the_val_metrics_are_not_computed(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2))
    train, _ = tasks.make_managers(n_train=64)
    exp.run(train, None)
    log = read_log(exp)
    assert [entry['epoch'] for entry in log] == [1, 2]
    assert not [key for entry in log for key in entry if key.startswith('val/')]
    assert 'main/MSE' in log[-1]


@pytest.mark.parametrize('mode, best_epoch, best_value', [('lowest', 3, 1.), ('highest', 4, 4.)])
def test_the_best_model_is_that_of_the_best_val_score_in_the_experiment_s_mode(
        tmp_path, mode, best_epoch, best_value):
    # The best epoch is one of the two whose snapshots are kept, to compare the weights.
    params = _scripted([3., 2., 1., 4.], num_epochs=4)
    exp = experiment(tmp_path, params, val_score_key='score', val_score_mode=mode,
                     checkpoint_freq=1)
    exp.run(*tasks.make_managers(n_train=64, n_val=32))
    saver, = [entry.extension for entry in exp.trainer._extensions.values()
              if isinstance(entry.extension, BestModelSaver)]
    assert (saver.best_epoch, saver.best_value) == (best_epoch, best_value)
    # The epoch-end snapshots: the newest two are kept.
    assert sorted(n for n in os.listdir(exp.output_dir) if n.startswith('snapshot')) == [
        'snapshot_epoch_3', 'snapshot_epoch_4']
    best = np.load(os.path.join(exp.output_dir, files.BEST_MODEL))
    snapshot = np.load(os.path.join(exp.output_dir, 'snapshot_epoch_{}'.format(best_epoch)))
    for name in ('fc1/W', 'fc2/b'):
        np.testing.assert_array_equal(best[name], snapshot['updater/model:main/' + name])


def first_of(a, b):
    return float(np.mean(a))


@pytest.mark.parametrize('keys, key', [(None, 'pred'), ({'first': ('label', 'pred')}, 'label')])
def test_val_metric_keys_choose_what_each_val_metric_gets(tmp_path, keys, key):
    extra = {} if keys is None else {'val_metric_keys': keys}
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1, val_metrics={'first': first_of},
                                                 **extra))
    train, val = tasks.make_managers(n_train=64, n_val=32)
    exp.run(train, val)
    batch = next(iter(val))
    expected = (batch['label'] if key == 'label'
                else tasks.forward(exp.trainer.updater.get_optimizer('main').target,
                                   batch['data']))
    assert read_log(exp)[-1]['val/first'] == pytest.approx(float(np.mean(expected)), rel=1e-5)


class HalveLearningRate(chainer.training.Extension):
    """A scheduler made without arguments: halves SGD's lr each time it runs."""

    def __call__(self, trainer):
        trainer.updater.get_optimizer('main').lr /= 2


@pytest.mark.parametrize('trigger, n_halvings', [(None, 2), ((1, 'iteration'), 4)])
def test_a_scheduler_without_params_runs_every_epoch_or_on_its_trigger(
        tmp_path, trigger, n_halvings):
    extra = {} if trigger is None else {'lr_sched_trigger': trigger}
    params = tasks.make_params(num_epochs=2, optimizer_cls=chainer.optimizers.SGD,
                               optimizer_params={'lr': 0.1}, lr_sched_cls=HalveLearningRate,
                               **extra)
    exp = experiment(tmp_path, params)
    exp.run(*tasks.make_managers(n_train=64, batch_size=32))
    assert exp.trainer.updater.get_optimizer('main').lr == pytest.approx(0.1 / 2 ** n_halvings)


def test_a_scheduler_that_gives_no_extension_is_refused_naming_what_it_gave(tmp_path):
    params = tasks.make_params(num_epochs=1, lr_sched_cls=dict, lr_sched_params={'rate': 3})
    exp = experiment(tmp_path, params)
    with pytest.raises(TypeError) as raised:
        exp.run(*tasks.make_managers(n_train=64))
    assert 'lr_sched_cls' in str(raised.value) and "{'rate': 3}" in str(raised.value)


def test_an_extension_for_every_rank_runs_once_in_a_run_of_one_process_beside_the_others(
        tmp_path):
    own, paired, plain = CountCallsOnEveryRank(), CountCallsOnEveryRank(), CountCalls()
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2),
                     extensions=[own, (paired, (1, 'iteration')), plain])
    exp.run(*tasks.make_managers(n_train=64, batch_size=32))
    assert (own.calls, paired.calls, plain.calls) == (2, 4, 2)


def test_a_signal_mid_epoch_replaces_the_last_epoch_s_snapshot_and_the_run_resumes(tmp_path):
    def run(extensions=()):
        exp = experiment(tmp_path, tasks.make_params(num_epochs=3), extensions=list(extensions))
        exp.run(*tasks.make_managers(n_train=64, batch_size=32))
        return exp

    with pytest.raises(Preempted) as preempted:
        run([signal_self_at(3, signal.SIGUSR1)])
    assert preempted.value.iteration == 3
    folder = os.path.join(str(tmp_path), 'exp')
    assert sorted(n for n in os.listdir(folder) if n.startswith('snapshot')) == [
        'snapshot_epoch_1']
    assert int(np.load(os.path.join(folder, 'snapshot_epoch_1'))['updater/iteration']) == 3
    resumed = run()
    assert [entry['epoch'] for entry in read_log(resumed)] == [1, 2, 3]
    assert resumed.trainer.updater.iteration == 6


def _plotted(exp):
    """The keys of each PlotReport of the run's Trainer, by file name; each is plotted
    against the epoch."""
    reports = [entry.extension for entry in exp.trainer._extensions.values()
               if isinstance(entry.extension, chainer_extensions.PlotReport)]
    assert [report._x_key for report in reports] == ['epoch'] * len(reports)
    return {report._file_name: list(report._y_keys) for report in reports}


def test_train_metrics_are_reported_and_plotted_beside_the_val_metrics(tmp_path):
    params = tasks.make_params(num_epochs=2, train_metrics={
        'MAE': chainer.functions.mean_absolute_error})
    exp = experiment(tmp_path, params)
    exp.run(*tasks.make_managers(n_train=64, n_val=32))
    assert {'main/MSE', 'main/MAE', 'val/MSE'} <= set(read_log(exp)[-1])
    assert _plotted(exp) == {'loss.png': ['main/MSE'], 'metrics.png': ['main/MAE', 'val/MSE']}


def test_without_validation_data_only_the_train_metrics_are_plotted(tmp_path):
    params = tasks.make_params(num_epochs=1, train_metrics={
        'MAE': chainer.functions.mean_absolute_error})
    exp = experiment(tmp_path, params)
    exp.run(tasks.make_managers(n_train=64)[0], None)
    assert _plotted(exp) == {'loss.png': ['main/MSE'], 'metrics.png': ['main/MAE']}


def test_without_any_metric_only_the_losses_are_plotted(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=1))
    exp.run(tasks.make_managers(n_train=64)[0], None)
    assert _plotted(exp) == {'loss.png': ['main/MSE']}
    assert not os.path.exists(os.path.join(exp.output_dir, 'metrics.png'))


def test_tensorboard_gets_every_epoch_s_scores(tmp_path):
    accumulator = pytest.importorskip(
        'tensorboard.backend.event_processing.event_accumulator').EventAccumulator
    exp = experiment(tmp_path, tasks.make_params(num_epochs=3), tracking='tensorboard')
    exp.run(*tasks.make_managers(n_train=64, n_val=32))
    events = accumulator(os.path.join(exp.output_dir, 'tensorboard'))
    events.Reload()
    for key in ('main/MSE', 'val/MSE'):
        assert [(event.step, event.value) for event in events.Scalars(key)] == [
            (row['epoch'], pytest.approx(row[key], rel=1e-6)) for row in read_log(exp)]
    assert len(read_log(exp)) == 3
