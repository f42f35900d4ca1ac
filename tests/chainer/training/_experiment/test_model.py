"""The model of a run: built from the "model" parameters, seeded, on the experiment's devices."""
import os

import numpy as np
import pytest

from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment, val_mse


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
