"""PredictorEvaluator: NumPy validation metrics reported as val/<name>."""

import chainer
import numpy as np
import pytest

from researchutils.chainer.data_loading import DataManager, SequentialSampler
from researchutils.chainer.training import Predictor
from researchutils.chainer.training.extensions import PredictorEvaluator
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment, read_log


def test_logged_val_metric_is_the_numpy_metric_over_the_val_set(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(num_epochs=2))
    train, val = tasks.make_managers()
    model = exp.run(train, val)
    dataset = val.dataset
    with chainer.using_config('train', False):
        preds = model.forward(dataset.data)['pred'].array
    reference = np.mean((preds - dataset.labels) ** 2)
    assert read_log(exp)[-1]['val/MSE'] == pytest.approx(reference, rel=1e-5)


def test_val_metrics_get_numpy_arrays(tmp_path):
    seen = set()

    def metric(pred, label):
        seen.add((type(pred), type(label)))
        return 0.0

    exp = experiment(tmp_path, tasks.make_params(num_epochs=1, val_metrics={'m': metric}))
    exp.run(*tasks.make_managers())
    assert seen == {(np.ndarray, np.ndarray)}


def report_of(evaluator):
    observation = {}
    with chainer.reporter.Reporter().scope(observation):
        evaluator(trainer=None)
    return observation


def test_the_metric_is_averaged_over_all_examples_with_a_short_last_batch():
    dataset = tasks.LinearTask(5)  # batches of 2, 2 and 1
    model = chainer.links.Linear(tasks.NUM_INPUTS, tasks.NUM_OUTPUTS)
    evaluator = PredictorEvaluator(Predictor(model, {'x': 'data'}),
                                   DataManager(dataset, 2, sampler_cls=SequentialSampler),
                                   {'MSE': tasks.mean_squared_error})
    preds = dataset.data @ model.W.array.T + model.b.array
    per_example = ((preds - dataset.labels) ** 2).mean(axis=1)
    assert report_of(evaluator) == {'val/MSE': pytest.approx(per_example.mean(), rel=1e-5)}


@pytest.mark.parametrize('metrics', [{}, {'MSE': 3}, None])
def test_metrics_must_be_named_functions(metrics):
    model = chainer.links.Linear(tasks.NUM_INPUTS, tasks.NUM_OUTPUTS)
    with pytest.raises(TypeError, match='metrics'):
        PredictorEvaluator(Predictor(model, {'x': 'data'}), DataManager(tasks.LinearTask(4), 2),
                           metrics)


def test_the_validation_examples_must_come_in_a_data_manager():
    model = chainer.links.Linear(tasks.NUM_INPUTS, tasks.NUM_OUTPUTS)
    with pytest.raises(TypeError, match='manager.*list'):
        PredictorEvaluator(Predictor(model, {'x': 'data'}), list(tasks.LinearTask(4)),
                           {'MSE': tasks.mean_squared_error})


def _good_arguments():
    model = tasks.Regressor()
    return [Predictor(model, {'x': 'data'}), DataManager(tasks.LinearTask(4), 2),
            {'MSE': tasks.mean_squared_error}, None, None]


@pytest.mark.parametrize('first_wrong, wrong, name', [
    (0, tasks.Regressor(), 'predictor'), (1, [1, 2], 'manager'), (2, {}, 'metrics'),
    (3, ('pred', 'label'), 'metric_keys'), (4, object(), 'comm')])
def test_the_first_wrong_argument_in_the_signature_order_is_named(first_wrong, wrong, name):
    arguments = _good_arguments()
    arguments[first_wrong] = wrong
    for later in range(first_wrong + 1, len(arguments)):
        arguments[later] = object()  # wrong too, but later
    with pytest.raises(TypeError, match='^' + name):
        PredictorEvaluator(*arguments)


@pytest.mark.parametrize('metric_keys', [{'MSE': 5}, {'MSE': [5]}, {'MSE': 'pred'}])
def test_metric_keys_that_are_not_lists_of_str_are_refused(metric_keys):
    model = tasks.Regressor()
    with pytest.raises(TypeError, match=r"^metric_keys\['MSE'\] must be a list of str"):
        PredictorEvaluator(Predictor(model, {'x': 'data'}), DataManager(tasks.LinearTask(4), 2),
                           {'MSE': tasks.mean_squared_error}, metric_keys=metric_keys)
