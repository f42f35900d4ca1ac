"""The model of a run: built from the "model" parameters, seeded, on the experiment's devices."""
import os
import types

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import ChainerExperiment
from researchutils.chainer.training._experiment import model as _model
from tests.chainer.training import tasks
from tests.chainer.training.tasks import assert_same_weights, experiment, val_mse, weights


def test_model_parameters_that_do_not_fit_fail_before_training(tmp_path):
    exp = experiment(tmp_path, tasks.make_params(model={'num_layers': 3}))
    with pytest.raises(TypeError, match='"model" parameters .* do not fit Regressor'):
        exp.run(*tasks.make_managers())
    assert not os.path.exists(exp.output_dir)


@pytest.mark.parametrize('gpu_ids', [True, 1.0, [True], [0.5], [-1]])
def test_gpu_ids_that_name_no_device_are_refused_naming_gpu_ids(tmp_path, gpu_ids):
    with pytest.raises((TypeError, ValueError), match='gpu_ids'):
        experiment(tmp_path, gpu_ids=gpu_ids)


def test_gpu_ids_of_one_int_is_that_one_device_never_the_cpu(tmp_path):
    try:
        exp = experiment(tmp_path, gpu_ids=0)
    except ValueError as error:  # no CUDA here: the device is named, not replaced by the CPU
        assert 'gpu_ids' in str(error) and '0' in str(error)
    else:
        assert exp.gpu_ids == [0]
        assert exp.build_model().device.xp is not np


@pytest.mark.gpu
def test_training_on_gpu_0_learns(tmp_path):
    exp = experiment(tmp_path, val_score_key='MSE', gpu_ids=[0])
    train, val = tasks.make_managers()
    before = val_mse(exp, exp.build_model(), val)
    model = exp.run(train, val)
    assert model.device.xp is not np
    assert val_mse(exp, model, val) < before / 10


def test_several_devices_train_a_data_parallel_model_like_one_device(tmp_path):
    from researchutils.chainer.models import (
        DataParallelChainerNetwork,
        DataParallelChainerOptimizer,
    )
    params = tasks.make_params(num_epochs=2)
    single = experiment(tmp_path / 'single', params).run(*tasks.make_managers())
    parallel_exp = experiment(tmp_path / 'parallel', params, gpu_ids=['@numpy', '@numpy'])
    parallel = parallel_exp.run(*tasks.make_managers())
    assert isinstance(parallel, DataParallelChainerNetwork)
    assert isinstance(parallel_exp.trainer.updater.get_optimizer('main'),
                      DataParallelChainerOptimizer)
    for name, param in single.namedparams():
        np.testing.assert_allclose(dict(parallel.namedparams())[name].array, param.array,
                                   rtol=1e-4, atol=1e-5, err_msg=name)


def test_model_parameters_that_do_not_fit_are_named_with_the_class_s_own_error(tmp_path):
    with pytest.raises(TypeError) as expected:
        tasks.Regressor(num_layers=3)
    exp = experiment(tmp_path, tasks.make_params(model={'num_layers': 3}))
    with pytest.raises(TypeError) as caught:
        exp.build_model()
    message = str(caught.value)
    assert repr({'num_layers': 3}) in message and str(expected.value) in message


def test_a_gpu_number_is_the_cupy_device_of_that_number(tmp_path):
    try:
        expected = chainer.get_device('@cupy:0')
    except Exception as error:  # no usable GPU: refused with Chainer's own reason
        with pytest.raises(ValueError) as caught:
            experiment(tmp_path, gpu_ids=[0])
        assert 'gpu_ids' in str(caught.value) and str(error) in str(caught.value)
    else:
        assert experiment(tmp_path, gpu_ids=[0]).devices == [expected]


@pytest.mark.parametrize('gpu_ids', [None, [], ['@numpy']])
def test_one_device_trains_the_model_itself(tmp_path, gpu_ids):
    model = experiment(tmp_path, gpu_ids=gpu_ids).build_model()
    assert type(model) is tasks.Regressor and model.device.xp is np


def test_the_seed_draws_the_weights_and_leaves_numpy_s_random_state_alone(tmp_path):
    np.random.seed(123)
    state = np.random.get_state()
    first = weights(experiment(tmp_path, seed=3).build_model())
    again = weights(experiment(tmp_path, seed=3).build_model())
    other = weights(experiment(tmp_path, seed=4).build_model())
    assert_same_weights(first, again)
    assert any(not np.array_equal(first[name], other[name]) for name in first)
    after = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]


def test_without_a_seed_the_weights_come_from_numpy_s_random_state(tmp_path):
    np.random.seed(5)
    first = weights(experiment(tmp_path, seed=None).build_model())
    np.random.seed(6)
    other = weights(experiment(tmp_path, seed=None).build_model())
    np.random.seed(5)
    assert_same_weights(weights(experiment(tmp_path, seed=None).build_model()), first)
    assert any(not np.array_equal(first[name], other[name]) for name in first)


class TakesNothing(tasks.Regressor):
    def forward(self):
        raise AssertionError('never called')


def test_a_model_whose_forward_takes_no_argument_needs_a_key_mapping(tmp_path):
    exp = ChainerExperiment(tasks.make_params(num_epochs=1), TakesNothing, name='exp',
                            save_path=str(tmp_path))
    with pytest.raises(ValueError) as caught:
        exp.run(*tasks.make_managers(n_train=32, n_val=32))
    assert 'TakesNothing' in str(caught.value) and 'key_mapping' in str(caught.value)
    assert not os.path.exists(exp.output_dir)


@pytest.mark.parametrize('intra_rank, chosen', [(0, 0), (1, 1), (2, 0), (5, 1)])
def test_the_ranks_of_a_node_take_its_devices_in_turn(intra_rank, chosen):
    # Only the communicator's intra_rank is read: the real one runs under mpiexec
    # (test_experiment_mpi.py).
    devices = [chainer.get_device('@numpy'), chainer.get_device('@numpy')]
    taken = _model.rank_devices(devices, types.SimpleNamespace(intra_rank=intra_rank))
    assert len(taken) == 1 and taken[0] is devices[chosen]
    assert _model.rank_devices(devices, None) == devices
    assert _model.rank_devices([], types.SimpleNamespace(intra_rank=intra_rank)) == [
        chainer.get_device('@numpy')]
