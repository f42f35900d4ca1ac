"""ResumableEarlyStoppingTrigger: early stopping that survives a snapshot."""
import os

import chainer
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
