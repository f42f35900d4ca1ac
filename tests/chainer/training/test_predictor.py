import gc
import types
import weakref

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training import Predictor
from tests.chainer.training import tasks


def linear_reference(link, x):
    return x.astype(np.float32) @ link.W.array.T + link.b.array


class RecordsMode(chainer.Chain):
    def forward(self, x):
        self.train_mode = chainer.config.train
        self.backprop = chainer.config.enable_backprop
        return {'pred': F.dropout(chainer.Variable(x), 0.5)}


class TwoInputs(chainer.Chain):
    def forward(self, first, second):
        return {'pred': first - second}


class ScalarFirst(chainer.Chain):
    """Returns a scalar before the predictions, as a model reporting a statistic may."""

    def forward(self, x):
        return {'mean_input': F.mean(x), 'pred': x[:, :1]}


def test_predict_returns_numpy_outputs_of_the_model():
    link = L.Linear(3, 2)
    x = np.random.RandomState(0).randn(5, 3)
    preds = Predictor(link, {'x': 'data'}).predict({'data': x, 'label': np.zeros(5)})
    assert type(preds['pred']) is np.ndarray
    np.testing.assert_allclose(preds['pred'], linear_reference(link, x), rtol=1e-5)


def test_predict_runs_in_test_mode_without_a_graph():
    model = RecordsMode()
    x = np.ones((100, 4), np.float32)
    preds = Predictor(model, {'x': 'data'}).predict({'data': x})
    assert model.train_mode is False and model.backprop is False
    np.testing.assert_array_equal(preds['pred'], x)  # dropout is off


def test_key_mapping_maps_model_arguments_to_batch_keys():
    batch = {'a': np.full((2, 1), 5.), 'b': np.full((2, 1), 3.)}
    preds = Predictor(TwoInputs(), {'first': 'a', 'second': 'b'}).predict(batch)
    np.testing.assert_array_equal(preds['pred'], np.full((2, 1), 2.))


def test_a_missing_batch_key_names_it():
    with pytest.raises(KeyError, match="names the batch key 'image'"):
        Predictor(L.Linear(3, 2), {'x': 'image'}).predict({'data': np.ones((1, 3))})


def test_bad_key_mapping_is_refused_at_construction():
    with pytest.raises(ValueError, match='key_mapping'):
        Predictor(L.Linear(3, 2), {})


def test_predict_data_mgr_is_a_generator_of_batches():
    stream = Predictor(L.Linear(4, 2), {'x': 'data'}).predict_data_mgr(
        DataManager(tasks.LinearTask(10), 4))
    assert isinstance(stream, types.GeneratorType)
    assert [len(preds['pred']) for preds, metrics in stream] == [4, 4, 2]


def test_metrics_get_numpy_predictions_and_labels():
    seen = []

    def metric(pred, label):
        seen.append((type(pred), type(label)))
        return tasks.mean_squared_error(pred, label)

    link = L.Linear(4, 2)
    dataset = tasks.LinearTask(10)
    results = list(Predictor(link, {'x': 'data'}).predict_data_mgr(
        DataManager(dataset, 4), metrics={'MSE': metric}))
    assert set(seen) == {(np.ndarray, np.ndarray)}
    reference = np.mean((linear_reference(link, dataset.data[:4]) - dataset.labels[:4]) ** 2)
    assert results[0][1]['MSE'] == pytest.approx(reference, rel=1e-5)


def test_metric_keys_choose_the_arguments():
    manager = DataManager([{'data': np.ones(2), 'weight': np.float32(3)}] * 2, 2)
    stream = Predictor(L.Linear(2, 1), {'x': 'data'}).predict_data_mgr(
        manager, metrics={'w': lambda weight: weight.sum()}, metric_keys={'w': ('weight',)})
    assert [metrics['w'] for _, metrics in stream] == [6.0]


def test_batchsize_overrides_the_manager():
    stream = Predictor(L.Linear(4, 2), {'x': 'data'}).predict_data_mgr(
        DataManager(tasks.LinearTask(10), 4), batchsize=5)
    assert [len(preds['pred']) for preds, _ in stream] == [5, 5]


def test_stream_keeps_no_earlier_predictions():
    stream = Predictor(L.Linear(4, 2), {'x': 'data'}).predict_data_mgr(
        DataManager(tasks.LinearTask(12), 4))
    preds, _ = next(stream)
    first = weakref.ref(preds['pred'])
    del preds
    next(stream)
    gc.collect()
    assert first() is None


def test_evaluate_equals_the_metric_over_the_whole_dataset():
    link = L.Linear(4, 2)
    dataset = tasks.LinearTask(11)
    result = Predictor(link, {'x': 'data'}).evaluate(DataManager(dataset, 4),
                                                     {'MSE': tasks.mean_squared_error})
    reference = np.mean((linear_reference(link, dataset.data) - dataset.labels) ** 2)
    assert result['MSE'] == pytest.approx(reference, rel=1e-5)


def test_a_metric_returning_an_array_is_refused():
    predictor = Predictor(L.Linear(4, 2), {'x': 'data'})
    with pytest.raises(ValueError, match="metric 'raw' must return a scalar"):
        predictor.evaluate(DataManager(tasks.LinearTask(4), 4), {'raw': lambda p, y: p})


def test_an_output_that_is_not_a_dict_becomes_pred():
    preds = Predictor(L.Linear(3, 2), {'x': 'data'}).predict({'data': np.ones((1, 3))})
    assert list(preds) == ['pred']


def test_metric_sums_counts_examples_when_the_first_output_is_a_scalar():
    dataset = tasks.LinearTask(10)
    sums, count = Predictor(ScalarFirst(), {'x': 'data'}).metric_sums(
        DataManager(dataset, 4), {'one': lambda pred, label: 1.0})
    assert count == 10
    assert sums == {'one': 10.0}


def test_a_failing_metric_keeps_its_error_and_is_named_with_its_batch():
    def fails_on_second_batch(pred, label):
        if len(seen) == 1:
            raise ZeroDivisionError('no examples of class 3')
        seen.append(len(pred))
        return 0.0

    seen = []
    stream = Predictor(L.Linear(4, 2), {'x': 'data'}).predict_data_mgr(
        DataManager(tasks.LinearTask(10), 4), metrics={'recall': fails_on_second_batch})
    with pytest.raises(ZeroDivisionError) as info:
        list(stream)
    assert str(info.value) == 'no examples of class 3'
    assert "raised by metric 'recall' on batch 1 (4 examples)" in info.value.__notes__


def test_predict_all_joins_every_prediction_in_the_managers_order():
    link = L.Linear(4, 2)
    dataset = tasks.LinearTask(11)
    preds, metrics = Predictor(link, {'x': 'data'}).predict_all(
        DataManager(dataset, 4), {'MSE': tasks.mean_squared_error})
    reference = linear_reference(link, dataset.data)
    np.testing.assert_allclose(preds['pred'], reference, rtol=1e-6)
    assert metrics['MSE'] == pytest.approx(np.mean((reference - dataset.labels) ** 2), rel=1e-5)


class ScalarAndNested(chainer.Chain):
    def forward(self, x):
        return {'pred': x, 'extra': {'total': x.sum()}}


def test_predict_all_joins_nested_outputs_and_gives_a_scalar_output_one_row_per_batch():
    data = [{'data': np.full(2, i, np.float32), 'label': np.float32(0)} for i in range(5)]
    preds, _ = Predictor(ScalarAndNested(), {'x': 'data'}).predict_all(DataManager(data, 2))
    assert preds['pred'].shape == (5, 2)
    np.testing.assert_allclose(preds['extra']['total'], [2.0, 10.0, 8.0])


def test_default_preparation_refuses_a_non_numeric_entry_as_training_does():
    predictor = Predictor(L.Linear(3, 2), {'x': 'data'})
    with pytest.raises(TypeError, match=r"batch\['data'\] must be numeric"):
        predictor.predict({'data': np.array([['a', 'b', 'c']])})


def test_default_preparation_takes_a_variable_entry_as_training_does():
    model = L.Linear(3, 2)
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    expected = data.astype(np.float32) @ model.W.array.T + model.b.array
    got = Predictor(model, {'x': 'data'}).predict({'data': chainer.Variable(data)})['pred']
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)
