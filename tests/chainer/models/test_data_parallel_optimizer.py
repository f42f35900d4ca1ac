"""DataParallelChainerOptimizer and its hooks: the wrapped optimizer trains like the plain one."""
import doctest

import chainer
import numpy as np
import pytest

from researchutils.chainer.models import (
    DataParallelChainerNetwork,
    DataParallelChainerOptimizer,
    ParallelOptimizerCumulateGradientsHook,
    ParallelOptimizerUpdateModelParameters,
    data_parallel_optimizer,
)
from tests.chainer.models.test_data_parallel import (
    CPU,
    MLP,
    _assert_trains_like_plain,
    _batches,
)


def test_loss_scaling_set_through_the_wrapper_trains_like_plain():
    seen = []

    def scale_and_record(plain_optimizer, optimizer):
        optimizer.set_loss_scale(32.0)
        optimizer.add_hook(lambda opt: seen.append(opt.target.module.l1.W.grad.copy()),
                           name='record')

    plain_optimizer, _ = _assert_trains_like_plain(_batches(1, size=7),
                                                   prepare=scale_and_record)
    np.testing.assert_allclose(seen[0], 32.0 * plain_optimizer.target.l1.W.grad,
                               rtol=1e-4, atol=1e-5)


def test_setting_up_twice_still_sums_gradients_once():
    def set_up_again(plain_optimizer, optimizer):
        assert optimizer.setup(optimizer.target) is optimizer

    _assert_trains_like_plain(_batches(2, size=6), devices=[CPU] * 2, prepare=set_up_again)


def test_hooks_added_after_setup_see_the_summed_gradients():
    def clip(plain_optimizer, optimizer):
        for opt in (plain_optimizer, optimizer):
            opt.add_hook(chainer.optimizer_hooks.GradientHardClipping(-0.05, 0.05))

    _assert_trains_like_plain(_batches(2, size=9), prepare=clip)


def test_optimizer_reads_and_writes_through_to_the_wrapped_optimizer():
    inner = chainer.optimizers.MomentumSGD(lr=0.1)
    optimizer = DataParallelChainerOptimizer(inner).setup(
        DataParallelChainerNetwork(MLP(), [CPU] * 2))
    optimizer.lr = 0.02
    optimizer.new_epoch()
    assert inner.lr == 0.02 and optimizer.hyperparam.lr == 0.02
    assert optimizer.epoch == inner.epoch == 1 and optimizer.target is inner.target
    assert isinstance(optimizer, chainer.Optimizer)


def test_from_optimizer_class_builds_the_wrapped_optimizer():
    optimizer = DataParallelChainerOptimizer.from_optimizer_class(
        chainer.optimizers.Adam, alpha=0.003, beta1=0.8)
    assert isinstance(optimizer.optimizer, chainer.optimizers.Adam)
    assert optimizer.alpha == 0.003 and optimizer.beta1 == 0.8


def test_hooks_are_named_and_timed_for_chainer():
    assert (ParallelOptimizerCumulateGradientsHook.name,
            ParallelOptimizerCumulateGradientsHook.timing,
            ParallelOptimizerCumulateGradientsHook.call_for_each_param) == (
                'DataParallelCumulateGradients', 'pre', False)
    assert (ParallelOptimizerUpdateModelParameters.timing,
            ParallelOptimizerUpdateModelParameters.call_for_each_param) == ('post', False)


def test_optimizer_rejects_what_is_not_an_optimizer():
    with pytest.raises(TypeError, match='optimizer'):
        DataParallelChainerOptimizer(MLP())


def test_from_optimizer_class_rejects_what_is_not_an_optimizer_class():
    with pytest.raises(TypeError, match='optim_cls'):
        DataParallelChainerOptimizer.from_optimizer_class(chainer.optimizers.SGD())


def test_setup_rejects_a_plain_link():
    with pytest.raises(TypeError, match='DataParallelChainerNetwork'):
        DataParallelChainerOptimizer(chainer.optimizers.SGD()).setup(MLP())


def test_setup_takes_a_network_with_replicas_whatever_module_it_was_imported_from():
    # Delira's path and the package's name the same classes.
    from researchutils.chainer.models import data_parallel
    assert data_parallel.DataParallelChainerOptimizer is DataParallelChainerOptimizer
    model = DataParallelChainerNetwork(MLP(), [CPU] * 2)
    assert data_parallel.DataParallelChainerOptimizer(chainer.optimizers.SGD()).setup(
        model).target is model


def test_docstring_examples_run():
    result = doctest.testmod(data_parallel_optimizer)
    assert result.attempted > 0 and result.failed == 0
