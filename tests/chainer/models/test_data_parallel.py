"""Tests of the data-parallel wrappers against plain single-replica Chainer training."""
import doctest

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest
from chainer import training
from chainer.training import extensions

from researchutils.chainer.models import (
    AbstractChainerNetwork,
    DataParallelChainerNetwork,
    DataParallelChainerOptimizer,
    data_parallel,
)
from researchutils.chainer.serializers import load_model, save_model

CPU = '@numpy'
OPTIMIZERS = {
    'SGD': lambda: chainer.optimizers.SGD(lr=0.1),
    'MomentumSGD': lambda: chainer.optimizers.MomentumSGD(lr=0.1, momentum=0.9),
    'Adam': lambda: chainer.optimizers.Adam(alpha=0.01),
}


class MLP(AbstractChainerNetwork):
    """Two layers with seeded weights, so two instances with one seed are equal."""

    def __init__(self, n_in=4, n_hidden=5, n_out=3, seed=0):
        super().__init__(n_in=n_in, n_hidden=n_hidden, n_out=n_out, seed=seed)
        rng = np.random.RandomState(seed)
        with self.init_scope():
            self.l1 = L.Linear(n_in, n_hidden,
                               initialW=rng.randn(n_hidden, n_in).astype(np.float32))
            self.l2 = L.Linear(n_hidden, n_out,
                               initialW=rng.randn(n_out, n_hidden).astype(np.float32))

    def forward(self, x):
        return {'pred': self.l2(F.relu(self.l1(x)))}


class NormalizedNet(AbstractChainerNetwork):
    """BatchNormalization alone, so its per-chunk statistics are visible in the output."""

    def __init__(self, size=3):
        super().__init__(size=size)
        with self.init_scope():
            self.bn = L.BatchNormalization(size, decay=0.5)

    def forward(self, x):
        return {'pred': self.bn(x)}


class LazyNet(AbstractChainerNetwork):
    """A Linear layer whose input size is inferred on the first call."""

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.fc = L.Linear(None, 3)

    def forward(self, x):
        return {'pred': self.fc(x)}


def _batches(count, size, seed=0, n_in=4, n_out=3):
    rng = np.random.RandomState(seed)
    return [{'data': rng.randn(size, n_in).astype(np.float32),
             'label': rng.randint(0, n_out, size=size).astype(np.int32)}
            for _ in range(count)]


def _train(model, optimizer, batches):
    for batch in batches:
        type(model).closure(model, batch, {'default': optimizer},
                            losses={'ce': F.softmax_cross_entropy})


def _assert_params_equal(actual, expected, rtol=1e-5, atol=1e-6):
    expected_params = dict(expected.namedparams())
    actual_params = dict(actual.namedparams())
    assert sorted(actual_params) == sorted(expected_params)
    for name, param in expected_params.items():
        np.testing.assert_allclose(chainer.backend.CpuDevice().send(actual_params[name].array),
                                   chainer.backend.CpuDevice().send(param.array),
                                   rtol=rtol, atol=atol, err_msg=name)


def _parallel(module, devices, optimizer):
    model = DataParallelChainerNetwork(module, devices)
    return model, DataParallelChainerOptimizer(optimizer).setup(model)


def _assert_trains_like_plain(batches, optimizer_name='SGD', devices=(CPU,) * 3, network=MLP,
                              prepare=None, parallel_batches=None, rtol=1e-5, atol=1e-6):
    """Train ``network()`` plainly and in the wrapper on ``batches``; the parameters must agree.

    ``prepare(plain_optimizer, optimizer)`` runs after both are set up, before training;
    ``parallel_batches`` replaces ``batches`` for the wrapper (moved to its devices).
    Returns ``(plain_optimizer, optimizer)``.
    """
    plain = network()
    plain_optimizer = OPTIMIZERS[optimizer_name]().setup(plain)
    model, optimizer = _parallel(network(), list(devices), OPTIMIZERS[optimizer_name]())
    if prepare is not None:
        prepare(plain_optimizer, optimizer)
    _train(plain, plain_optimizer, batches)
    _train(model, optimizer, batches if parallel_batches is None else parallel_batches)
    _assert_params_equal(model, plain, rtol=rtol, atol=atol)
    return plain_optimizer, optimizer


@pytest.mark.parametrize('replicas', [2, 3])
@pytest.mark.parametrize('optimizer_name', sorted(OPTIMIZERS))
def test_n_steps_equal_plain_training_on_the_full_batches(optimizer_name, replicas):
    plain_optimizer, optimizer = _assert_trains_like_plain(
        _batches(4, size=7), optimizer_name, devices=[CPU] * replicas)
    assert optimizer.t == plain_optimizer.t == 4


@pytest.mark.parametrize('replicas', [2, 3])
def test_replicas_hold_the_master_parameters_after_each_step(replicas):
    model, optimizer = _parallel(MLP(), [CPU] * replicas, OPTIMIZERS['Adam']())
    _train(model, optimizer, _batches(2, size=7))
    for replica in model.modules[1:]:
        _assert_params_equal(replica, model.module, rtol=0, atol=0)


def test_update_with_a_loss_function_equals_plain_training():
    plain = MLP()
    plain_optimizer = OPTIMIZERS['MomentumSGD']().setup(plain)
    model, optimizer = _parallel(MLP(), [CPU] * 3, OPTIMIZERS['MomentumSGD']())
    for batch in _batches(3, size=8):
        for net, opt in ((plain, plain_optimizer), (model, optimizer)):
            opt.update(lambda x, t, net=net: F.softmax_cross_entropy(net(x)['pred'], t),
                       batch['data'], batch['label'])
    _assert_params_equal(model, plain)


def test_batch_smaller_than_device_count_trains_like_plain():
    _assert_trains_like_plain(_batches(2, size=2))


def test_lazily_initialized_replicas_start_from_the_master_values():
    x = np.random.RandomState(0).randn(6, 4).astype(np.float32)

    def initialize(plain_optimizer, optimizer):
        model = optimizer.target
        model(x)
        _assert_params_equal(model.modules[1], model.module, rtol=0, atol=0)
        plain_optimizer.target(x[:1])
        plain_optimizer.target.copyparams(model.module)

    _assert_trains_like_plain(_batches(2, size=6), devices=[CPU] * 2, network=LazyNet,
                              prepare=initialize)


def test_cumulate_gradients_adds_every_replica_gradient_into_the_master():
    model = DataParallelChainerNetwork(MLP(), [CPU] * 3)
    F.sum(model(_batches(1, size=7)[0]['data'])['pred']).backward()
    expected = sum(replica.l2.W.grad for replica in model.modules)
    model.cumulate_gradients()
    np.testing.assert_allclose(model.module.l2.W.grad, expected, rtol=1e-6)


def test_cumulate_gradients_skips_replicas_that_took_no_part():
    model = DataParallelChainerNetwork(MLP(), [CPU] * 3)
    model.cleargrads()  # as every training step does first
    F.sum(model(_batches(1, size=2)[0]['data'])['pred']).backward()
    expected = model.module.l2.W.grad + model.modules[1].l2.W.grad
    assert model.modules[2].l2.W.grad is None
    model.cumulate_gradients()
    np.testing.assert_allclose(model.module.l2.W.grad, expected, rtol=1e-6)


def test_synchronize_replicas_copies_master_parameters_and_persistent_values():
    model = DataParallelChainerNetwork(NormalizedNet(), [CPU] * 2)
    model.module.bn.gamma.array[...] = [1.0, 2.0, 3.0]
    model.module.bn.avg_mean[...] = [4.0, 5.0, 6.0]
    model.synchronize_replicas()
    np.testing.assert_array_equal(model.modules[1].bn.gamma.array, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(model.modules[1].bn.avg_mean, [4.0, 5.0, 6.0])


def test_forward_equals_the_plain_module_output():
    plain = MLP()
    model = DataParallelChainerNetwork(MLP(), [CPU] * 3)
    x = _batches(1, size=10)[0]['data']
    np.testing.assert_allclose(model(x)['pred'].array, plain(x)['pred'].array, rtol=1e-6)


def test_forward_splits_along_batch_dim():
    class Transposed(AbstractChainerNetwork):
        def forward(self, x):
            return {'pred': x * 2, 'rows': x.shape[1]}

    model = DataParallelChainerNetwork(Transposed(), [CPU] * 2, batch_dim=1)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    out = model(x)
    np.testing.assert_array_equal(out['pred'], x * 2)
    assert out['rows'] == 3


def test_params_yields_only_the_master_parameters():
    plain = MLP()
    model = DataParallelChainerNetwork(MLP(), [CPU] * 3)
    master_ids = {id(param) for param in model.module.params()}
    assert {id(param) for param in model.params()} == master_ids
    assert sorted(name for name, _ in model.namedparams()) == sorted(
        name for name, _ in plain.namedparams())


def test_cleargrads_clears_every_replica():
    model = DataParallelChainerNetwork(MLP(), [CPU] * 3)
    F.sum(model(_batches(1, size=6)[0]['data'])['pred']).backward()
    model.cleargrads()
    assert all(param.grad is None for replica in model.modules for param in replica.params())


@pytest.mark.filterwarnings('ignore:.*zerograd.* is deprecated:DeprecationWarning')
def test_zerograds_zeroes_every_replica():
    model = DataParallelChainerNetwork(MLP(), [CPU] * 3)
    F.sum(model(_batches(1, size=6)[0]['data'])['pred']).backward()
    model.zerograds()
    assert all(not param.grad.any() for replica in model.modules for param in replica.params())


def test_wrapper_checkpoint_loads_into_the_plain_module(tmp_path):
    model, optimizer = _parallel(MLP(), [CPU] * 3, OPTIMIZERS['Adam']())
    _train(model, optimizer, _batches(2, size=7))
    chainer.serializers.save_npz(str(tmp_path / 'model.npz'), model)
    chainer.serializers.save_npz(str(tmp_path / 'optimizer.npz'), optimizer)
    plain = MLP(seed=5)
    plain_optimizer = OPTIMIZERS['Adam']().setup(plain)
    chainer.serializers.load_npz(str(tmp_path / 'model.npz'), plain)
    chainer.serializers.load_npz(str(tmp_path / 'optimizer.npz'), plain_optimizer)
    _assert_params_equal(plain, model.module, rtol=0, atol=0)
    assert plain_optimizer.t == 2
    np.testing.assert_array_equal(plain.l1.W.update_rule.state['m'],
                                  model.module.l1.W.update_rule.state['m'])


def test_plain_checkpoint_loads_into_every_replica_of_the_wrapper(tmp_path):
    plain = MLP(seed=5)
    chainer.serializers.save_npz(str(tmp_path / 'model.npz'), plain)
    model = DataParallelChainerNetwork(MLP(), [CPU] * 2)
    chainer.serializers.load_npz(str(tmp_path / 'model.npz'), model)
    for replica in model.modules:
        _assert_params_equal(replica, plain, rtol=0, atol=0)


class NormalizedMLP(MLP):
    """An MLP with BatchNormalization, so persistent values matter in evaluation."""

    def __init__(self, seed=0):
        super().__init__(seed=seed)
        with self.init_scope():
            self.bn = L.BatchNormalization(5)

    def forward(self, x):
        return {'pred': self.l2(F.relu(self.bn(self.l1(x))))}


def _load_with_researchutils(model, other, tmp_path):
    path = str(tmp_path / 'other.npz')
    save_model(path, other)
    load_model(path, model.module)


def _copyparams(model, other, tmp_path):
    model.module.copyparams(other)


def _assign_arrays(model, other, tmp_path):
    for (_, param), (_, source) in zip(sorted(model.module.namedparams()),
                                       sorted(other.namedparams())):
        param.array = source.array.copy()
    model.module.bn.avg_mean = other.bn.avg_mean.copy()
    model.module.bn.avg_var = other.bn.avg_var.copy()


def _write_into_arrays(model, other, tmp_path):
    for (_, param), (_, source) in zip(sorted(model.module.namedparams()),
                                       sorted(other.namedparams())):
        param.array[...] = source.array
    model.module.bn.avg_mean[...] = other.bn.avg_mean
    model.module.bn.avg_var[...] = other.bn.avg_var


def _other_weights():
    """An NormalizedMLP unlike NormalizedMLP(): other weights, running statistics not 0 and 1."""
    other = NormalizedMLP(seed=7)
    rng = np.random.RandomState(8)
    other.bn.gamma.array[...] = rng.uniform(0.5, 2, 5)
    other.bn.beta.array[...] = rng.uniform(-1, 1, 5)
    other.bn.avg_mean[...] = rng.uniform(-1, 1, 5)
    other.bn.avg_var[...] = rng.uniform(0.5, 2, 5)
    return other


@pytest.mark.parametrize('change', [_load_with_researchutils, _copyparams, _assign_arrays,
                                    _write_into_arrays])
def test_every_row_uses_the_weights_the_module_was_given(change, tmp_path):
    model = DataParallelChainerNetwork(NormalizedMLP(), [CPU] * 3)
    x = _batches(1, size=7)[0]['data']
    with chainer.using_config('train', False):
        model(x)  # a forward before the change, as in a run that loads its best model
        other = _other_weights()
        change(model, other, tmp_path)
        np.testing.assert_allclose(model(x)['pred'].array, other(x)['pred'].array,
                                   rtol=1e-5, atol=1e-6)


def test_weights_changed_after_a_training_step_reach_every_replica(tmp_path):
    model, optimizer = _parallel(NormalizedMLP(), [CPU] * 2, OPTIMIZERS['Adam']())
    _train(model, optimizer, _batches(1, size=6))
    other = _other_weights()
    _load_with_researchutils(model, other, tmp_path)
    x = _batches(1, size=6, seed=3)[0]['data']
    with chainer.using_config('train', False):
        np.testing.assert_allclose(model(x)['pred'].array, other(x)['pred'].array,
                                   rtol=1e-5, atol=1e-6)


def test_batch_normalization_normalizes_each_chunk_with_its_own_statistics():
    x = np.random.RandomState(0).randn(7, 3).astype(np.float32)
    model = DataParallelChainerNetwork(NormalizedNet(), [CPU] * 3)
    with chainer.using_config('train', True):
        out = model(x)['pred'].array
    expected = np.concatenate([(chunk - chunk.mean(0)) / np.sqrt(chunk.var(0) + 2e-5)
                               for chunk in (x[:3], x[3:5], x[5:])])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_batch_normalization_keeps_the_master_chunk_running_statistics():
    x = np.random.RandomState(1).randn(6, 3).astype(np.float32)
    model, optimizer = _parallel(NormalizedNet(), [CPU] * 2, OPTIMIZERS['SGD']())
    AbstractChainerNetwork.closure(model, {'data': x}, {'default': optimizer},
                                   losses={'sum': lambda pred: F.sum(pred * pred)})
    master_chunk = x[:3]
    expected_mean = 0.5 * master_chunk.mean(0)
    expected_var = 0.5 + 0.5 * master_chunk.var(0) * 3 / 2
    for replica in model.modules:
        np.testing.assert_allclose(replica.bn.avg_mean, expected_mean, rtol=1e-5)
        np.testing.assert_allclose(replica.bn.avg_var, expected_var, rtol=1e-5)


def test_batch_normalization_in_evaluation_equals_the_plain_module():
    x = np.random.RandomState(2).randn(5, 3).astype(np.float32)
    plain = NormalizedNet()
    model = DataParallelChainerNetwork(NormalizedNet(), [CPU] * 2)
    metric_vals, _, preds = AbstractChainerNetwork.closure(model, {'data': x}, None)
    _, _, plain_preds = AbstractChainerNetwork.closure(plain, {'data': x}, None)
    np.testing.assert_allclose(preds['pred'].array, plain_preds['pred'].array, rtol=1e-6)


def test_closure_and_prepare_batch_are_the_module_class_ones():
    calls = []

    class Custom(MLP):
        @staticmethod
        def closure(model, data_dict, optimizers, losses={}, metrics={}, fold=0,  # noqa: B006
                    **kwargs):
            calls.append(('closure', model, fold))
            return {}, {}, {}

        @staticmethod
        def prepare_batch(batch, input_device, output_device):
            calls.append(('prepare_batch',))
            return batch

    model = DataParallelChainerNetwork(Custom(), [CPU] * 2)
    model.prepare_batch({'data': 1}, CPU, CPU)
    DataParallelChainerNetwork.closure(model, {'data': 1}, None, fold=3)
    assert calls == [('prepare_batch',), ('closure', model, 3)]


def test_init_kwargs_are_the_module_ones():
    model = DataParallelChainerNetwork(MLP(n_hidden=6), [CPU] * 2)
    assert model.init_kwargs == MLP(n_hidden=6).init_kwargs


def _make_trainer(model, optimizer, out, iterations=4, rate='lr'):
    """A Trainer over 24 examples in batches of 6, ``rate`` halved every step, snapshot at end."""
    dataset = chainer.datasets.TupleDataset(
        *zip(*[(b['data'][i], b['label'][i]) for b in _batches(1, 24) for i in range(24)]))
    iterator = chainer.iterators.SerialIterator(dataset, 6, shuffle=False)
    updater = training.updaters.StandardUpdater(
        iterator, optimizer,
        loss_func=lambda x, t: F.softmax_cross_entropy(model(x)['pred'], t))
    trainer = training.Trainer(updater, (iterations, 'iteration'), out=str(out))
    trainer.extend(extensions.ExponentialShift(rate, 0.5), trigger=(1, 'iteration'))
    trainer.extend(extensions.snapshot(filename='snapshot'), trigger=(iterations, 'iteration'))
    return trainer


def test_trainer_with_exponential_shift_and_snapshot_equals_plain(tmp_path):
    plain = MLP()
    plain_optimizer = OPTIMIZERS['MomentumSGD']().setup(plain)
    model, optimizer = _parallel(MLP(), [CPU] * 3, OPTIMIZERS['MomentumSGD']())
    _make_trainer(plain, plain_optimizer, tmp_path / 'plain').run()
    _make_trainer(model, optimizer, tmp_path / 'parallel').run()
    _assert_params_equal(model, plain)
    assert optimizer.lr == pytest.approx(0.1 * 0.5 ** 4)
    resumed = MLP(seed=9)
    resumed_optimizer = OPTIMIZERS['MomentumSGD']().setup(resumed)
    trainer = _make_trainer(resumed, resumed_optimizer, tmp_path / 'resumed')
    chainer.serializers.load_npz(str(tmp_path / 'parallel' / 'snapshot'), trainer)
    _assert_params_equal(resumed, model.module, rtol=0, atol=0)
    trainer.get_extension('ExponentialShift').initialize(trainer)  # what a resumed run does
    assert resumed_optimizer.lr == optimizer.lr and resumed_optimizer.t == 4


def test_plain_trainer_snapshot_resumes_in_the_wrapper_like_plain(tmp_path):
    first = MLP()
    _make_trainer(first, OPTIMIZERS['Adam']().setup(first), tmp_path / 'first',
                  rate='alpha').run()
    snapshot = str(tmp_path / 'first' / 'snapshot')
    plain = MLP(seed=7)
    plain_trainer = _make_trainer(plain, OPTIMIZERS['Adam']().setup(plain), tmp_path / 'plain',
                                  iterations=7, rate='alpha')
    model, optimizer = _parallel(MLP(seed=8), [CPU] * 2, OPTIMIZERS['Adam']())
    parallel_trainer = _make_trainer(model, optimizer, tmp_path / 'parallel', iterations=7,
                                     rate='alpha')
    for trainer in (plain_trainer, parallel_trainer):
        chainer.serializers.load_npz(snapshot, trainer)
        trainer.run()
    assert optimizer.t == plain_trainer.updater.get_optimizer('main').t == 7
    assert optimizer.alpha == pytest.approx(0.01 * 0.5 ** 7)
    _assert_params_equal(model, plain)


def test_rejects_a_module_that_is_not_a_link():
    with pytest.raises(TypeError, match='module'):
        DataParallelChainerNetwork(object(), [CPU])


@pytest.mark.parametrize('devices', [[], '@numpy', None])
def test_rejects_devices_that_are_not_a_non_empty_list(devices):
    with pytest.raises(ValueError, match='devices'):
        DataParallelChainerNetwork(MLP(), devices)


@pytest.mark.parametrize('device', [True, 0.0])
def test_rejects_a_bool_or_float_device_naming_it(device):
    with pytest.raises(TypeError, match='devices.*{!r}'.format(device)):
        DataParallelChainerNetwork(MLP(), [CPU, device])


def test_rejects_an_unknown_device():
    with pytest.raises(ValueError, match='@nowhere'):
        DataParallelChainerNetwork(MLP(), [CPU, '@nowhere'])


@pytest.mark.parametrize('batch_dim', [-1, 1.0, True])
def test_rejects_a_bad_batch_dim(batch_dim):
    with pytest.raises(ValueError, match='batch_dim'):
        DataParallelChainerNetwork(MLP(), [CPU], batch_dim=batch_dim)


def test_docstring_examples_run():
    result = doctest.testmod(data_parallel)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.gpu
@pytest.mark.parametrize('devices', [['@cupy:0', '@cupy:0'], ['@cupy:0', CPU, '@cupy:0']])
@pytest.mark.parametrize('optimizer_name', sorted(OPTIMIZERS))
def test_gpu_n_steps_equal_plain_training(optimizer_name, devices):
    batches = _batches(3, size=7)
    gpu_batches = [AbstractChainerNetwork.prepare_batch(batch, devices[0], devices[0])
                   for batch in batches]
    _assert_trains_like_plain(batches, optimizer_name, devices=devices,
                              parallel_batches=gpu_batches, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_gpu_batch_normalization_normalizes_each_chunk_with_its_own_statistics():
    x = np.random.RandomState(0).randn(7, 3).astype(np.float32)
    model = DataParallelChainerNetwork(NormalizedNet(), ['@cupy:0', CPU, '@cupy:0'])
    with chainer.using_config('train', True):
        out = chainer.backend.CpuDevice().send(model(x)['pred'].array)
    expected = np.concatenate([(chunk - chunk.mean(0)) / np.sqrt(chunk.var(0) + 2e-5)
                               for chunk in (x[:3], x[3:5], x[5:])])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize('change', [_load_with_researchutils, _copyparams])
def test_gpu_every_row_uses_the_weights_the_module_was_given(change, tmp_path):
    model = DataParallelChainerNetwork(NormalizedMLP(), ['@cupy:0', CPU, '@cupy:0'])
    x = _batches(1, size=7)[0]['data']
    with chainer.using_config('train', False):
        model(x)
        other = _other_weights()
        change(model, other, tmp_path)
        out = chainer.backend.CpuDevice().send(model(x)['pred'].array)
        np.testing.assert_allclose(out, other(x)['pred'].array, rtol=1e-5, atol=1e-6)
