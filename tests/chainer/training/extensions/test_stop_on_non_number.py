"""StopOnNonNumber: training that diverges stops, saying where."""
import json
import os

import chainer
import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer import serializers
from researchutils.chainer.training.extensions import StopOnNonNumber, TrainingDiverged
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment
from tests.support.tiny_training import make_trainer

ITERATIONS_PER_EPOCH = 256 // 32  # tasks.make_managers()


class MeanSquaredErrorThenNaN(object):
    """The MSE loss, which turns NaN from its call ``first_nan_call`` (counted from 1) on."""

    def __init__(self, first_nan_call):
        self.first_nan_call = first_nan_call
        self.calls = 0

    def __call__(self, pred, label):
        self.calls += 1
        loss = F.mean_squared_error(pred, label)
        return loss * np.float32('nan') if self.calls >= self.first_nan_call else loss


def diverging_params(first_nan_call, num_epochs=3, **training):
    return tasks.make_params(num_epochs=num_epochs,
                             losses={'MSE': MeanSquaredErrorThenNaN(first_nan_call)}, **training)


def all_finite(model):
    return all(np.isfinite(param.array).all() for param in model.params())


def test_a_nan_loss_stops_the_run_naming_epoch_and_iteration(tmp_path):
    first_nan = ITERATIONS_PER_EPOCH + 3
    exp = experiment(tmp_path, diverging_params(first_nan), val_score_key='MSE')
    with pytest.raises(RuntimeError, match='iteration {} .epoch 2'.format(first_nan)) as info:
        exp.run(*tasks.make_managers())
    assert 'stop_on_non_number' in str(info.value)
    assert 'main/MSE=nan' in str(info.value)


def test_a_stopped_run_keeps_the_last_good_snapshot_and_best_model(tmp_path):
    exp = experiment(tmp_path, diverging_params(2 * ITERATIONS_PER_EPOCH + 3),
                     val_score_key='MSE')
    with pytest.raises(RuntimeError):
        exp.run(*tasks.make_managers())
    files = sorted(os.listdir(exp.output_dir))
    assert 'snapshot_epoch_2' in files and 'snapshot_epoch_3' not in files
    best = serializers.load_model(os.path.join(exp.output_dir, 'best_model.npz'),
                                  exp.build_model())
    assert all_finite(best)
    with open(os.path.join(exp.output_dir, 'log')) as stream:
        assert [entry['epoch'] for entry in json.load(stream)] == [1, 2]


def test_stop_on_non_number_false_trains_every_epoch(tmp_path):
    exp = experiment(tmp_path, diverging_params(ITERATIONS_PER_EPOCH + 3),
                     stop_on_non_number=False)
    model = exp.run(*tasks.make_managers())
    assert exp.trainer.updater.epoch == 3
    assert not all_finite(model)


def poison_weights_at(iteration):
    """An extension that sets a weight NaN after ``iteration``, before StopOnNonNumber runs."""

    @chainer.training.make_extension(trigger=(1, 'iteration'),
                                     priority=chainer.training.PRIORITY_WRITER + 2)
    def poison(trainer):
        if trainer.updater.iteration == iteration:
            trainer.updater.get_optimizer('main').target.predictor.W.array[0, 0] = np.nan

    return poison


def test_a_nan_weight_stops_a_plain_trainer_naming_iteration_and_epoch(tmp_path):
    trainer = make_trainer(tmp_path, stop_iteration=12)  # 4 iterations an epoch
    trainer.extend(poison_weights_at(6))
    trainer.extend(StopOnNonNumber())
    with pytest.raises(TrainingDiverged, match=r'iteration 6 \(epoch 2\)') as info:
        trainer.run()
    assert isinstance(info.value, RuntimeError)
    assert trainer.updater.iteration == 6


def test_an_epochs_last_iteration_belongs_to_that_epoch(tmp_path):
    trainer = make_trainer(tmp_path, stop_iteration=12)
    trainer.extend(poison_weights_at(8))
    trainer.extend(StopOnNonNumber())
    with pytest.raises(TrainingDiverged, match=r'iteration 8 \(epoch 2\)'):
        trainer.run()


class FiniteRecorder(object):
    """A validation metric (plain NumPy MSE) that records whether each prediction was finite."""

    def __init__(self):
        self.finite = []

    def __call__(self, pred, label):
        self.finite.append(bool(np.isfinite(pred).all()))
        return tasks.mean_squared_error(pred, label)


def test_weights_that_diverge_at_an_epochs_end_are_never_validated_or_saved(tmp_path):
    # The loss turns NaN at the last iteration of epoch 2: the weights are NaN when the
    # epoch-end extensions run. StopOnNonNumber must stop the run before the validation
    # (and so before the best-model saver) sees them.
    recorder = FiniteRecorder()
    params = diverging_params(2 * ITERATIONS_PER_EPOCH, val_metrics={'MSE': recorder})
    exp = experiment(tmp_path, params, val_score_key='MSE')
    with pytest.raises(TrainingDiverged, match=r'iteration {} \(epoch 2\)'.format(
            2 * ITERATIONS_PER_EPOCH)):
        exp.run(*tasks.make_managers())
    assert recorder.finite and all(recorder.finite), recorder.finite
    best = serializers.load_model(os.path.join(exp.output_dir, 'best_model.npz'),
                                  exp.build_model())
    assert all_finite(best)
    assert [entry['epoch'] for entry in tasks.read_log(exp)] == [1]
