"""BestModelSaver: the model of the best validation score, in one npz file."""
import os

import chainer
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
