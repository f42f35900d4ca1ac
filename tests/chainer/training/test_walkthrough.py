"""The issue's walkthrough (Delira's transition guide in Chainer), as written, at a reduced size."""
import json
import os

import chainer
import chainer.functions as F
import pytest

from researchutils.chainer.data_loading import DataManager, RandomSampler, SequentialSampler
from researchutils.chainer.training import (
    ChainerExperiment,
    Parameters,
    Predictor,
    create_optims_default_chainer,
)
from tests.support.walkthrough import RandomDataset, SimpleNet, mean_squared_error


@pytest.mark.timeout(120)
def test_walkthrough_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = Parameters(fixed_params={
        "model": {"num_inputs": 5, "num_hidden": 20, "num_outputs": 10},
        "training": {"batch_size": 64, "num_epochs": 2,
                     "optimizer_cls": chainer.optimizers.Adam, "optimizer_params": {"alpha": 1e-3},
                     "losses": {"L1": F.mean_absolute_error},
                     "lr_sched_cls": None, "lr_sched_params": {},
                     "val_metrics": {"MSE": mean_squared_error}}})
    manager_train = DataManager(RandomDataset(500, 5, 10), params.nested_get("batch_size"),
                                transforms=None, sampler_cls=RandomSampler,
                                n_process_augmentation=4)
    manager_val = DataManager(RandomDataset(100, 5, 10), params.nested_get("batch_size"),
                              transforms=None, sampler_cls=SequentialSampler,
                              n_process_augmentation=4)
    experiment = ChainerExperiment(params, SimpleNet, name="ClassificationExample",
                                   save_path="./tmp/experiments",
                                   optim_builder=create_optims_default_chainer,
                                   key_mapping={"x": "data"}, gpu_ids=[])
    experiment.save()
    model = experiment.run(manager_train, manager_val)

    assert isinstance(model, SimpleNet) and model.init_kwargs == params.model
    folder = os.path.join('tmp', 'experiments', 'ClassificationExample')
    with open(os.path.join(folder, 'log')) as stream:
        log = json.load(stream)
    assert [entry['epoch'] for entry in log] == [1, 2]
    assert {'main/L1', 'val/MSE'} <= set(log[-1])
    assert ChainerExperiment.load(folder).params == params
    preds = Predictor(model, {"x": "data"}).predict(next(iter(manager_val)))
    assert preds["pred"].shape == (64, 10)
