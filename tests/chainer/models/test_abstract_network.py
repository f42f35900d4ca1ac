"""Tests of AbstractChainerNetwork against hand-written NumPy references."""
import doctest

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.models import AbstractChainerNetwork, abstract_network


class LinearNet(AbstractChainerNetwork):
    """One linear layer; records the configuration each forward ran under."""

    def __init__(self, n_in=3, n_out=2, seed=0):
        super().__init__(n_in=n_in, n_out=n_out, seed=seed)
        rng = np.random.RandomState(seed)
        with self.init_scope():
            self.fc = L.Linear(n_in, n_out, initialW=rng.randn(n_out, n_in).astype(np.float32),
                               initial_bias=rng.randn(n_out).astype(np.float32))
        self.seen_config = []

    def forward(self, x):
        self.seen_config.append((chainer.config.train, chainer.config.enable_backprop))
        return {'pred': self.fc(x)}


def _regression_batch(seed=1, n=4):
    rng = np.random.RandomState(seed)
    return {'data': rng.randn(n, 3).astype(np.float32), 'y': rng.randn(n, 2).astype(np.float32)}


def _numpy_sgd_step(weight, bias, x, y, lr, loss_count=1):
    """One SGD step of ``loss_count`` identical mean squared errors, by hand."""
    pred = x.dot(weight.T) + bias
    grad_pred = loss_count * 2.0 * (pred - y) / pred.size
    return weight - lr * grad_pred.T.dot(x), bias - lr * grad_pred.sum(axis=0)


def test_forward_is_abstract():
    class NoForward(AbstractChainerNetwork):
        pass

    with pytest.raises(TypeError):
        NoForward()


def test_init_kwargs_are_kept_per_instance():
    first, second = LinearNet(n_out=2), LinearNet(n_out=5, seed=3)
    assert first.init_kwargs == {'n_in': 3, 'n_out': 2, 'seed': 0}
    assert second.init_kwargs == {'n_in': 3, 'n_out': 5, 'seed': 3}


def test_init_kwargs_rebuild_an_equal_network():
    net = LinearNet(n_out=4, seed=7)
    rebuilt = type(net)(**net.init_kwargs)
    np.testing.assert_array_equal(rebuilt.fc.W.array, net.fc.W.array)


def test_init_kwargs_returns_a_copy():
    net = LinearNet()
    net.init_kwargs['n_out'] = 99
    assert net.init_kwargs['n_out'] == 2


def test_closure_training_step_equals_numpy_sgd():
    net = LinearNet()
    batch = _regression_batch()
    weight, bias = _numpy_sgd_step(net.fc.W.array.copy(), net.fc.b.array.copy(),
                                   batch['data'], batch['y'], lr=0.1)
    optimizer = chainer.optimizers.SGD(lr=0.1).setup(net)
    AbstractChainerNetwork.closure(net, batch, {'default': optimizer},
                                   losses={'mse': F.mean_squared_error})
    np.testing.assert_allclose(net.fc.W.array, weight, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.fc.b.array, bias, rtol=1e-5, atol=1e-6)


def test_closure_backpropagates_with_the_optimizer_loss_scale():
    net = LinearNet()
    batch = _regression_batch()
    weight, _ = _numpy_sgd_step(net.fc.W.array.copy(), net.fc.b.array.copy(),
                                batch['data'], batch['y'], lr=0.1)
    unscaled_grad = (net.fc.W.array - weight) / 0.1
    optimizer = chainer.optimizers.SGD(lr=0.1).setup(net)
    optimizer.set_loss_scale(64.0)
    seen = []
    optimizer.add_hook(lambda opt: seen.append(net.fc.W.grad.copy()), name='record')
    AbstractChainerNetwork.closure(net, batch, {'default': optimizer},
                                   losses={'mse': F.mean_squared_error})
    np.testing.assert_allclose(seen[0], 64.0 * unscaled_grad, rtol=1e-4)
    np.testing.assert_allclose(net.fc.W.array, weight, rtol=1e-5, atol=1e-6)


def test_closure_sums_the_losses():
    net = LinearNet()
    batch = _regression_batch()
    weight, _ = _numpy_sgd_step(net.fc.W.array.copy(), net.fc.b.array.copy(),
                                batch['data'], batch['y'], lr=0.1, loss_count=2)
    optimizer = chainer.optimizers.SGD(lr=0.1).setup(net)
    AbstractChainerNetwork.closure(
        net, batch, {'default': optimizer},
        losses={'a': F.mean_squared_error, 'b': F.mean_squared_error})
    np.testing.assert_allclose(net.fc.W.array, weight, rtol=1e-5, atol=1e-6)


def test_closure_clears_stale_gradients_before_backward():
    net = LinearNet()
    batch = _regression_batch()
    weight, _ = _numpy_sgd_step(net.fc.W.array.copy(), net.fc.b.array.copy(),
                                batch['data'], batch['y'], lr=0.1)
    for param in net.params():
        param.grad = np.full_like(param.array, 100.0)
    optimizer = chainer.optimizers.SGD(lr=0.1).setup(net)
    AbstractChainerNetwork.closure(net, batch, {'default': optimizer},
                                   losses={'mse': F.mean_squared_error})
    np.testing.assert_allclose(net.fc.W.array, weight, rtol=1e-5, atol=1e-6)


def test_closure_passes_pred_then_remaining_entries_in_order():
    net = LinearNet()
    batch = {'data': np.ones((2, 3), np.float32), 'first': np.zeros(2), 'second': np.ones(3)}
    calls = []

    def metric(pred, *others):
        calls.append((pred.shape, [other.shape for other in others]))
        return 0.0

    AbstractChainerNetwork.closure(net, batch, None, metrics={'m': metric})
    assert calls == [((2, 2), [(2,), (3,)])]


def test_closure_returns_floats_keyed_like_losses_and_metrics():
    net = LinearNet()
    batch = _regression_batch()
    pred = batch['data'].dot(net.fc.W.array.T) + net.fc.b.array
    expected = float(np.mean((pred - batch['y']) ** 2))
    metric_vals, loss_vals, _ = AbstractChainerNetwork.closure(
        net, batch, None, losses={'mse': F.mean_squared_error},
        metrics={'mae': lambda p, y: np.mean(np.abs(p.array - y))})
    assert set(loss_vals) == {'mse'} and set(metric_vals) == {'mae'}
    assert type(loss_vals['mse']) is float and type(metric_vals['mae']) is float
    assert loss_vals['mse'] == pytest.approx(expected, rel=1e-5)


def test_closure_training_runs_in_train_mode_with_backprop():
    net = LinearNet()
    optimizer = chainer.optimizers.SGD().setup(net)
    AbstractChainerNetwork.closure(net, _regression_batch(), {'default': optimizer},
                                   losses={'mse': F.mean_squared_error})
    assert net.seen_config == [(True, True)]


def test_closure_without_optimizers_evaluates_without_backprop():
    net = LinearNet()
    AbstractChainerNetwork.closure(net, _regression_batch(), {},
                                   losses={'mse': F.mean_squared_error})
    assert net.seen_config == [(False, False)]


def test_closure_without_optimizers_touches_no_parameter():
    net = LinearNet()
    for param in net.params():
        param.grad = np.full_like(param.array, 7.0)
    before = {name: param.array.copy() for name, param in net.namedparams()}
    AbstractChainerNetwork.closure(net, _regression_batch(), None,
                                   losses={'mse': F.mean_squared_error})
    for name, param in net.namedparams():
        np.testing.assert_array_equal(param.array, before[name])
        np.testing.assert_array_equal(param.grad, np.full_like(param.array, 7.0))


def test_closure_preds_are_unchained_from_the_graph():
    net = LinearNet()
    optimizer = chainer.optimizers.SGD().setup(net)
    _, _, preds = AbstractChainerNetwork.closure(
        net, _regression_batch(), {'default': optimizer}, losses={'mse': F.mean_squared_error})
    assert preds['pred'].creator is None
    assert not preds['pred'].requires_grad


def test_closure_softmax_cross_entropy_works_with_prepared_integer_labels():
    net = LinearNet(n_out=3)
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': np.random.RandomState(0).randn(5, 3), 'label': np.array([0, 2, 1, 1, 0])},
        '@numpy', '@numpy')
    optimizer = chainer.optimizers.SGD().setup(net)
    metric_vals, loss_vals, _ = AbstractChainerNetwork.closure(
        net, batch, {'default': optimizer}, losses={'ce': F.softmax_cross_entropy},
        metrics={'acc': F.accuracy})
    assert np.isfinite(loss_vals['ce']) and 0.0 <= metric_vals['acc'] <= 1.0


def test_a_float_loss_on_integer_labels_says_to_make_them_float():
    # Delira's habit: a regression loss on integer labels (Delira cast every entry to float32).
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': np.ones((4, 3)), 'label': np.array([[1, 0], [0, 1], [1, 1], [0, 0]])},
        '@numpy', '@numpy')
    optimizer = chainer.optimizers.SGD().setup(LinearNet())
    with pytest.raises(TypeError, match=r"loss 'L1'.*float32.*'label'.*int64.*astype") as info:
        AbstractChainerNetwork.closure(optimizer.target, batch, {'default': optimizer},
                                       losses={'L1': F.mean_absolute_error})
    assert isinstance(info.value.__cause__, chainer.utils.type_check.InvalidType)


def test_a_float_metric_on_integer_labels_says_to_make_them_float():
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': np.ones((4, 3)), 'label': np.zeros((4, 2), np.int32)}, '@numpy', '@numpy')
    with pytest.raises(TypeError, match=r"metric 'MAE'.*'label'.*int32"):
        AbstractChainerNetwork.closure(LinearNet(), batch, None,
                                       metrics={'MAE': F.mean_absolute_error})


def test_closure_training_without_losses_raises_value_error():
    net = LinearNet()
    optimizer = chainer.optimizers.SGD().setup(net)
    with pytest.raises(ValueError, match='losses'):
        AbstractChainerNetwork.closure(net, _regression_batch(), {'default': optimizer})


def test_closure_without_default_optimizer_raises_value_error():
    net = LinearNet()
    optimizer = chainer.optimizers.SGD().setup(net)
    with pytest.raises(ValueError, match='default'):
        AbstractChainerNetwork.closure(net, _regression_batch(), {'main': optimizer},
                                       losses={'mse': F.mean_squared_error})


def test_closure_without_data_entry_raises_value_error():
    with pytest.raises(ValueError, match='data_dict'):
        AbstractChainerNetwork.closure(LinearNet(), {'x': np.ones(3)}, None)


def test_closure_keeps_a_failing_loss_exception_type_and_message():
    def broken(pred, y):
        raise KeyError('my message')

    with pytest.raises(KeyError, match='my message'):
        AbstractChainerNetwork.closure(LinearNet(), _regression_batch(), None,
                                       losses={'broken': broken})


def test_closure_non_scalar_metric_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="'vector'"):
        AbstractChainerNetwork.closure(LinearNet(), _regression_batch(), None,
                                       metrics={'vector': lambda p, y: p.array})


def test_prepare_batch_casts_floating_data_to_float32():
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': np.zeros((2, 3), np.float64), 'target': np.ones(2, np.float16)},
        '@numpy', '@numpy')
    assert batch['data'].dtype == np.float32 and batch['target'].dtype == np.float32


def test_prepare_batch_keeps_integer_labels_integer():
    labels = np.array([3, 1], np.int64)
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': np.zeros((2, 3)), 'label': labels, 'small': labels.astype(np.int32)},
        '@numpy', '@numpy')
    assert batch['label'].dtype == np.int64 and batch['small'].dtype == np.int32
    np.testing.assert_array_equal(batch['label'], labels)


def test_prepare_batch_converts_lists_to_arrays():
    batch = AbstractChainerNetwork.prepare_batch({'data': [[1.0, 2.0]], 'label': [1]},
                                                 '@numpy', '@numpy')
    assert isinstance(batch['data'], np.ndarray) and batch['data'].dtype == np.float32


def test_prepare_batch_rejects_a_non_dict():
    with pytest.raises(TypeError, match='batch'):
        AbstractChainerNetwork.prepare_batch([np.zeros(2)], '@numpy', '@numpy')


def test_prepare_batch_without_data_raises_value_error():
    with pytest.raises(ValueError, match='data'):
        AbstractChainerNetwork.prepare_batch({'label': np.zeros(2)}, '@numpy', '@numpy')


def test_prepare_batch_rejects_a_non_numeric_entry():
    with pytest.raises(TypeError, match="'name'"):
        AbstractChainerNetwork.prepare_batch(
            {'data': np.zeros(2), 'name': np.array(['a', 'b'])}, '@numpy', '@numpy')


def test_prepare_batch_rejects_an_unknown_device():
    with pytest.raises(ValueError, match='output_device'):
        AbstractChainerNetwork.prepare_batch({'data': np.zeros(2)}, '@numpy', '@nowhere')


@pytest.mark.gpu
def test_prepare_batch_sends_data_and_labels_to_their_devices():
    import cupy
    batch = AbstractChainerNetwork.prepare_batch(
        {'data': np.zeros((2, 3)), 'label': np.array([0, 1])}, '@cupy:0', '@numpy')
    assert isinstance(batch['data'], cupy.ndarray) and isinstance(batch['label'], np.ndarray)
    assert batch['label'].dtype.kind == 'i'


def test_docstring_examples_run():
    result = doctest.testmod(abstract_network)
    assert result.attempted > 0 and result.failed == 0
