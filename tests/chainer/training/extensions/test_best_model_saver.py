"""BestModelSaver: the model of the best validation score, in one npz file."""
import os

import chainer
import numpy as np
import pytest

from researchutils.chainer import serializers
from researchutils.chainer.training.extensions import BestModelSaver
from tests.chainer.training import tasks
from tests.chainer.training.tasks import assert_same_weights, experiment, read_log, val_mse, weights
from tests.support.tiny_training import make_model, make_trainer


def test_returned_model_is_the_best_by_lowest_val_score(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=4), val_score_key='MSE')
    train, val = tasks.make_managers()
    model = exp.run(train, val)
    best = min(entry['val/MSE'] for entry in read_log(exp))
    assert val_mse(exp, model, val) == pytest.approx(best, rel=1e-5)


def test_returned_model_is_the_best_by_highest_val_score(tmp_path):
    # The highest MSE is the first epoch's, not the last one's.
    exp = experiment(tmp_path, tasks.make_params(num_epochs=4), val_score_key='MSE',
                     val_score_mode='highest')
    train, val = tasks.make_managers()
    model = exp.run(train, val)
    log = read_log(exp)
    assert val_mse(exp, model, val) == pytest.approx(log[0]['val/MSE'], rel=1e-5)
    assert log[0]['val/MSE'] > log[-1]['val/MSE']


def test_best_model_file_loads_into_a_fresh_model(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE')
    model = exp.run(*tasks.make_managers())
    fresh = serializers.load_model(os.path.join(exp.output_dir, 'best_model.npz'),
                                   tasks.Regressor())
    assert_same_weights(weights(fresh), weights(model))


class ReportScores(chainer.training.Extension):
    """Reports ``scores[epoch - 1]`` as ``val/score`` and keeps each epoch's weights."""

    trigger = (1, 'epoch')
    priority = chainer.training.PRIORITY_WRITER

    def __init__(self, scores):
        self.scores = scores
        self.weights = {}

    def __call__(self, trainer):
        epoch = trainer.updater.epoch
        chainer.reporter.report({'val/score': self.scores[epoch - 1]})
        self.weights[epoch] = weights(trainer.updater.get_optimizer('main').target)


@pytest.mark.parametrize('mode, best_epoch', [('lowest', 2), ('highest', 3)])
def test_the_file_holds_the_weights_of_the_best_epoch_on_a_plain_trainer(tmp_path, mode,
                                                                         best_epoch):
    scores = [3.0, 1.0, 4.0, 2.0]
    trainer = make_trainer(tmp_path, stop_iteration=4 * len(scores))  # 4 iterations an epoch
    model = trainer.updater.get_optimizer('main').target
    reporter = ReportScores(scores)
    saver = BestModelSaver(model, 'val/score', mode, str(tmp_path / 'best.npz'))
    trainer.extend(reporter)
    trainer.extend(saver)
    trainer.run()
    assert (saver.best_epoch, saver.best_value) == (best_epoch, scores[best_epoch - 1])
    saved = serializers.load_model(str(tmp_path / 'best.npz'), make_model(seed=1))
    assert_same_weights(weights(saved), reporter.weights[best_epoch])


def test_a_mode_other_than_lowest_or_highest_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="mode.*'min'"):
        BestModelSaver(make_model(), 'val/score', 'min', str(tmp_path / 'best.npz'))


def run_plain_trainer(out, scores, snapshot_at=None, resume_from=None):
    """A tiny trainer (4 iterations an epoch) over ``scores``; returns (saver, reporter)."""
    trainer = make_trainer(out, stop_iteration=4 * len(scores))
    model = trainer.updater.get_optimizer('main').target
    reporter = ReportScores(scores)
    saver = BestModelSaver(model, 'val/score', 'lowest', str(out / 'best.npz'))
    trainer.extend(reporter)
    trainer.extend(saver)
    if snapshot_at is not None:
        trainer.extend(chainer.training.extensions.snapshot(filename='snapshot'),
                       trigger=(snapshot_at, 'epoch'))
    if resume_from is not None:
        chainer.serializers.load_npz(resume_from, trainer)
    trainer.run()
    return saver, reporter


def saved_arrays(path):
    with np.load(path) as archive:
        return {key: archive[key].copy() for key in archive.files}


def test_after_a_resume_a_worse_epoch_never_replaces_the_best_of_before_the_snapshot(tmp_path):
    # Epoch 2 is the best; the snapshot is taken at epoch 3; epochs 4 to 6 are all worse.
    scores = [3.0, 1.0, 4.0, 5.0, 2.0, 6.0]
    first, reporter = run_plain_trainer(tmp_path, scores[:3], snapshot_at=3)
    best_of_first = saved_arrays(str(tmp_path / 'best.npz'))
    assert_same_weights(best_of_first, {name.lstrip('/'): array for name, array
                                        in reporter.weights[2].items()})
    resumed, _ = run_plain_trainer(tmp_path, scores, resume_from=str(tmp_path / 'snapshot'))
    assert (resumed.best_epoch, resumed.best_value) == (2, 1.0)
    assert_same_weights(saved_arrays(str(tmp_path / 'best.npz')), best_of_first)


def test_a_resumed_experiment_keeps_the_best_model_of_before_its_snapshot(tmp_path):
    train, val = tasks.make_managers(n_train=64, n_val=32, batch_size=32)

    def run(num_epochs, scores):
        exp = experiment(tmp_path, tasks.make_params(
            num_epochs=num_epochs, val_metrics={'score': tasks.ScriptedScore(scores)}),
            val_score_key='score')
        return exp, exp.run(train, val)

    first, _ = run(3, [3.0, 1.0, 4.0])
    best = os.path.join(first.output_dir, 'best_model.npz')
    best_of_first = saved_arrays(best)
    os.remove(os.path.join(first.output_dir, 'run_state.json'))  # let it train further
    resumed, model = run(6, [5.0, 2.0, 6.0])
    assert [entry['val/score'] for entry in read_log(resumed)] == [3.0, 1.0, 4.0, 5.0, 2.0, 6.0]
    assert_same_weights(saved_arrays(best), best_of_first)
    assert_same_weights(weights(model), {'/' + name: array
                                         for name, array in best_of_first.items()})


@pytest.mark.parametrize('arguments, error, name', [
    ((chainer.Variable(np.zeros(1)), 5, 'best', None), TypeError, 'model'),
    ((make_model(), 5, 'best', None), TypeError, 'monitor'),
    ((make_model(), 'val/MSE', 'best', None), ValueError, 'mode'),
    ((make_model(), 'val/MSE', 'lowest', None), TypeError, 'path'),
])
def test_the_first_wrong_argument_in_the_signature_order_is_named(arguments, error, name):
    with pytest.raises(error, match='^' + name):
        BestModelSaver(*arguments)


def test_an_empty_monitor_is_refused():
    with pytest.raises(ValueError, match="^monitor must be an observation key .*got ''"):
        BestModelSaver(make_model(), '', 'lowest', 'best.npz')


def test_a_folder_as_path_is_refused_when_made(tmp_path):
    with pytest.raises(ValueError, match='^path must be the npz file to write, .*a folder'):
        BestModelSaver(make_model(), 'val/MSE', 'lowest', tmp_path)


@pytest.mark.parametrize('path', ['best\0.npz', 5, b'best.npz'])
def test_a_path_that_is_not_a_path_is_refused_naming_it(tmp_path, path):
    with pytest.raises((TypeError, ValueError), match='^path must'):
        BestModelSaver(make_model(), 'val/MSE', 'lowest', path)
    assert os.listdir(tmp_path) == []
