"""ResumableEarlyStoppingTrigger: early stopping that survives a snapshot."""
import os

import chainer
import pytest
from chainer.training import extensions as chainer_extensions

from researchutils.chainer.training.triggers import ResumableEarlyStoppingTrigger
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment, read_log
from tests.support.tiny_training import make_trainer


def test_early_stopping_stops_when_the_val_score_stops_improving(tmp_path):
    # With a zero learning rate the score never improves after the first epoch.
    params = tasks.make_params(num_epochs=10, optimizer_cls=chainer.optimizers.SGD,
                               optimizer_params={'lr': 0.0}, early_stopping_patience=2)
    exp = experiment(tmp_path, params, val_score_key='MSE')
    exp.run(*tasks.make_managers())
    assert [entry['epoch'] for entry in read_log(exp)] == [1, 2, 3]


def test_early_stopping_resumed_from_a_snapshot_stops_at_the_same_epoch(tmp_path):
    def params(num_epochs):
        return tasks.make_params(num_epochs=num_epochs, optimizer_cls=chainer.optimizers.SGD,
                                 optimizer_params={'lr': 0.0}, early_stopping_patience=2)

    first = experiment(tmp_path, params(2), val_score_key='MSE')
    first.run(*tasks.make_managers())
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    resumed = experiment(tmp_path, params(10), val_score_key='MSE')
    resumed.run(*tasks.make_managers())
    # Uninterrupted, the same run stops after epoch 3 (see the test above).
    assert [entry['epoch'] for entry in read_log(resumed)] == [1, 2, 3]


def report_scores(scores):
    @chainer.training.make_extension(trigger=(1, 'epoch'),
                                     priority=chainer.training.PRIORITY_WRITER)
    def report(trainer):
        chainer.reporter.report({'val/score': scores[trainer.updater.epoch - 1]})

    return report


def run_until_stopped(out, scores, snapshot_at=None, resume_from=None):
    """Epochs run by a tiny trainer stopped by the trigger (4 iterations an epoch)."""
    trainer = make_trainer(out, stop_iteration=4 * len(scores))
    trigger = ResumableEarlyStoppingTrigger(monitor='val/score', patience=2, mode='min',
                                            max_trigger=(len(scores), 'epoch'))
    trainer.stop_trigger = trigger
    trainer.extend(report_scores(scores))
    if snapshot_at is not None:
        trainer.extend(chainer_extensions.snapshot(filename='snapshot'),
                       trigger=(snapshot_at, 'epoch'))
    if resume_from is not None:
        chainer.serializers.load_npz(resume_from, trainer)
    trainer.extend(chainer_extensions.LogReport(trigger=(1, 'epoch')))
    trainer.run()
    return trainer.updater.epoch


def test_a_plain_trainer_stops_after_patience_epochs_without_improvement(tmp_path):
    # The best score is epoch 2's; epochs 3 and 4 do not beat it.
    assert run_until_stopped(tmp_path, [3.0, 1.0, 2.0, 2.0, 0.5, 0.1]) == 4


def test_a_run_resumed_from_a_snapshot_stops_at_the_same_epoch(tmp_path):
    scores = [3.0, 1.0, 2.0, 2.0, 0.5, 0.1]
    run_until_stopped(tmp_path / 'first', scores[:3], snapshot_at=3)
    assert run_until_stopped(tmp_path / 'resumed', scores,
                             resume_from=str(tmp_path / 'first' / 'snapshot')) == 4


def report_scores_at(scores, trigger):
    """Reports ``scores[epoch - 1]`` as ``val/score``, at ``trigger`` (each epoch's value
    reported from that epoch's first iteration on when the trigger is every iteration)."""

    @chainer.training.make_extension(trigger=trigger, priority=chainer.training.PRIORITY_WRITER)
    def report(trainer):
        updater = trainer.updater
        epoch = updater.epoch if updater.is_new_epoch else updater.epoch + 1
        chainer.reporter.report({'val/score': scores[epoch - 1]})

    return report


def stopped_epoch(out, scores, iterations_per_epoch, report_trigger, snapshot_at=None,
                  resume_from=None, patience=3):
    trainer = make_trainer(out, stop_iteration=iterations_per_epoch * len(scores),
                           batch_size=16 // iterations_per_epoch)
    trainer.stop_trigger = ResumableEarlyStoppingTrigger(
        monitor='val/score', patience=patience, mode='min', max_trigger=(len(scores), 'epoch'))
    trainer.extend(report_scores_at(scores, report_trigger))
    if snapshot_at is not None:
        trainer.extend(chainer_extensions.snapshot(filename='snapshot'),
                       trigger=(snapshot_at, 'epoch'))
    if resume_from is not None:
        chainer.serializers.load_npz(resume_from, trainer)
    trainer.run()
    return trainer.updater.epoch, trainer.stop_trigger.count


# Patience 3, snapshot at epoch 4, with the patience count above 0 (epoch 3 did not beat
# epoch 2). Either nothing beats epoch 2 again (stop after 5), or epoch 5 does, just after
# the worse epoch 4 whose value the snapshot holds (stop after 8).
SCORES_AND_STOP = [([3.0, 1.0, 2.0, 2.0, 2.0, 0.5, 0.1], 5),
                   ([3.0, 1.0, 2.0, 3.0, 0.9, 2.0, 2.0, 2.0, 0.1], 8)]


@pytest.mark.parametrize('scores, stop', SCORES_AND_STOP)
@pytest.mark.parametrize('iterations_per_epoch, report_trigger', [
    (4, (1, 'epoch')), (1, (1, 'epoch')), (1, (1, 'iteration')), (4, (1, 'iteration'))])
def test_a_resume_while_patience_is_counting_stops_at_the_same_epoch(
        tmp_path, scores, stop, iterations_per_epoch, report_trigger):
    uninterrupted, _ = stopped_epoch(tmp_path / 'whole', scores, iterations_per_epoch,
                                     report_trigger)
    assert uninterrupted == stop
    _, count_at_snapshot = stopped_epoch(tmp_path / 'first', scores[:4], iterations_per_epoch,
                                         report_trigger, snapshot_at=4)
    assert count_at_snapshot == 1
    resumed, _ = stopped_epoch(tmp_path / 'resumed', scores, iterations_per_epoch,
                               report_trigger, resume_from=str(tmp_path / 'first' / 'snapshot'))
    assert resumed == stop


@pytest.mark.parametrize('n_train', [64, 32])  # 2 iterations an epoch, and 1
@pytest.mark.parametrize('scores, stop', SCORES_AND_STOP)
def test_a_resumed_experiment_whose_patience_was_counting_stops_at_the_same_epoch(
        tmp_path, n_train, scores, stop):
    train, val = tasks.make_managers(n_train=n_train, n_val=32, batch_size=32)

    def run(num_epochs, epoch_scores):
        exp = experiment(tmp_path, tasks.make_params(
            num_epochs=num_epochs, val_metrics={'score': tasks.ScriptedScore(epoch_scores)},
            early_stopping_patience=3), val_score_key='score')
        exp.run(train, val)
        return exp

    first = run(4, scores[:4])
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    resumed = run(len(scores), scores[4:])
    assert [entry['epoch'] for entry in read_log(resumed)] == list(range(1, stop + 1))


@pytest.mark.parametrize('kwargs, error, message', [
    ({'patience': -1}, ValueError, '^patience must be a positive integer or None, got -1'),
    ({'patience': 0}, ValueError, '^patience must be'),
    ({'patience': 2.5}, TypeError, '^patience must be'),
    ({'patience': True}, TypeError, '^patience must be'),
    ({'patience': '3'}, TypeError, '^patience must be'),
    ({'patience': float('nan')}, TypeError, '^patience must be'),
    ({'patients': 0}, ValueError, '^patients must be'),
    ({'patience': 2, 'patients': 2}, ValueError, '^give patience or patients'),
    ({'mode': 'best'}, ValueError, "^mode must be one of 'auto', 'min', 'max', got 'best'"),
    ({'mode': None}, TypeError, '^mode must be one of'),
    ({'verbose': 'yes'}, TypeError, "^verbose must be True or False, got 'yes'"),
    ({'verbose': None}, TypeError, '^verbose must be True or False'),
    ({'monitor': ''}, ValueError, '^monitor must be a non-empty str'),
    ({'monitor': 5}, TypeError, '^monitor must be a non-empty str'),
    ({'check_trigger': (-1, 'epoch')}, ValueError, '^check_trigger must be a trigger'),
    ({'check_trigger': (0.5, 'epoch')}, TypeError, '^check_trigger must be a trigger'),
    ({'check_trigger': (True, 'epoch')}, TypeError, '^check_trigger must be a trigger'),
    ({'check_trigger': (1, 'epochs')}, ValueError, '^check_trigger must be a trigger'),
    ({'check_trigger': 5}, TypeError, '^check_trigger must be a trigger'),
    ({'max_trigger': (2.5, 'iteration')}, TypeError, '^max_trigger must be a trigger'),
    ({'max_trigger': (float('nan'), 'epoch')}, TypeError, '^max_trigger must be a trigger'),
    ({'max_trigger': (0, 'epoch')}, ValueError, '^max_trigger must be a trigger'),
])
def test_bad_arguments_are_refused_naming_them(kwargs, error, message):
    with pytest.raises(error, match=message):
        ResumableEarlyStoppingTrigger(**kwargs)


def test_the_signature_is_chainers_own_spelled_out():
    import inspect
    parameters = inspect.signature(ResumableEarlyStoppingTrigger).parameters
    assert list(parameters) == ['check_trigger', 'monitor', 'patience', 'mode', 'verbose',
                                'max_trigger', 'patients']


@pytest.mark.parametrize('kwargs, patience', [({}, 3), ({'patience': 5}, 5),
                                              ({'patients': 4}, 4)])
def test_patience_defaults_to_chainers_three_and_takes_the_older_spelling(kwargs, patience):
    trigger = ResumableEarlyStoppingTrigger(
        check_trigger=chainer.training.triggers.IntervalTrigger(2, 'iteration'),
        max_trigger=(10.0, 'epoch'), **kwargs)
    assert trigger.patience == patience
