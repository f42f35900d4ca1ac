"""A small learnable regression task, and helpers, shared by the training API tests.

Run as ``python -m tests.chainer.training.tasks SAVE_PATH NUM_EPOCHS`` it trains
the task in a ChainerExperiment, slowly enough to be killed mid-run.
"""
import json
import os
import sys
import time

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

from researchutils.chainer.data_loading import (
    AbstractDataset,
    DataManager,
    RandomSampler,
    SequentialSampler,
)
from researchutils.chainer.models import AbstractChainerNetwork
from researchutils.chainer.training import ChainerExperiment, Parameters

NUM_INPUTS = 4
NUM_OUTPUTS = 2
TRUE_WEIGHTS = np.array([[1., -2.], [0.5, 1.], [-1., 0.], [2., 0.5]], dtype=np.float32)


class LinearTask(AbstractDataset):
    """``label = data @ TRUE_WEIGHTS + 0.5`` with ``data`` uniform in [-1, 1]."""

    def __init__(self, num_samples, seed=0):
        super().__init__()
        random_state = np.random.RandomState(seed)
        self.data = random_state.uniform(-1, 1, (num_samples, NUM_INPUTS)).astype(np.float32)
        self.labels = (self.data @ TRUE_WEIGHTS + 0.5).astype(np.float32)

    def __getitem__(self, index):
        return {'data': self.data[index], 'label': self.labels[index]}

    def __len__(self):
        return len(self.data)


class Regressor(AbstractChainerNetwork):
    def __init__(self, num_inputs=NUM_INPUTS, num_outputs=NUM_OUTPUTS, num_hidden=16):
        super().__init__(num_inputs=num_inputs, num_outputs=num_outputs, num_hidden=num_hidden)
        with self.init_scope():
            self.fc1 = L.Linear(num_inputs, num_hidden)
            self.fc2 = L.Linear(num_hidden, num_outputs)

    def forward(self, x):
        return {'pred': self.fc2(F.relu(self.fc1(x)))}


def mean_squared_error(pred, label):
    """The reference metric: plain NumPy. A diverged model's predictions overflow the square:
    its score is then inf or NaN, which the tests of diverged runs check, not a warning."""
    with np.errstate(over='ignore', invalid='ignore'):
        return float(np.mean((np.asarray(pred) - np.asarray(label)) ** 2))


def negative_mse(pred, label):
    return -mean_squared_error(pred, label)


class ScriptedScore(object):
    """A validation metric giving ``scores`` in turn, one per call (so one val batch an epoch
    gives one score an epoch)."""

    def __init__(self, scores):
        self.scores = list(scores)

    def __call__(self, pred, label):
        return self.scores.pop(0)


class CountCalls(chainer.training.Extension):
    """Counts its calls: once an epoch, unless extended with another trigger."""

    trigger = (1, 'epoch')

    def __init__(self):
        self.calls = 0

    def __call__(self, trainer):
        self.calls += 1


class CountCallsOnEveryRank(CountCalls):
    """CountCalls marked to run on every ChainerMN rank, not on rank 0 alone."""

    every_rank = True


class CountUpdates(chainer.training.Extension):
    """Counts iterations and remembers the epoch training resumed from."""

    trigger = (1, 'iteration')

    def __init__(self):
        self.updates = 0
        self.first_epoch = None

    def initialize(self, trainer):
        self.first_epoch = trainer.updater.epoch

    def __call__(self, trainer):
        self.updates += 1


def make_params(model=None, variable=None, **training):
    settings = {'batch_size': 32, 'num_epochs': 6, 'optimizer_cls': chainer.optimizers.Adam,
                'optimizer_params': {'alpha': 0.02},
                'losses': {'MSE': F.mean_squared_error},
                'val_metrics': {'MSE': mean_squared_error}}
    settings.update(training)
    return Parameters({'model': dict(model or {}), 'training': settings}, variable)


def make_managers(n_train=256, n_val=64, batch_size=32, n_process_augmentation=0, seed=0):
    train = DataManager(LinearTask(n_train, seed=1), batch_size, sampler_cls=RandomSampler,
                        n_process_augmentation=n_process_augmentation,
                        sampler_kwargs={'seed': seed})
    val = DataManager(LinearTask(n_val, seed=2), batch_size, sampler_cls=SequentialSampler,
                      n_process_augmentation=n_process_augmentation)
    return train, val


class SlowEpochs(chainer.training.Extension):
    """Sleeps at each epoch end, so a test can kill the run between snapshots."""

    trigger = (1, 'epoch')

    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, trainer):
        time.sleep(self.seconds)


def make_experiment(save_path, num_epochs, extensions=()):
    return ChainerExperiment(make_params(num_epochs=num_epochs), Regressor, name='resumable',
                             save_path=save_path, val_score_key='MSE', seed=0,
                             extensions=extensions)


def experiment(tmp_path, params=None, **kwargs):
    """The task's experiment in ``tmp_path/exp``, seeded (``seed=0``) unless told."""
    kwargs.setdefault('seed', 0)
    return ChainerExperiment(params or make_params(), Regressor, name='exp',
                             save_path=str(tmp_path), **kwargs)


def read_log(experiment_or_folder):
    """The LogReport entries of an experiment, or of the experiment folder given."""
    folder = getattr(experiment_or_folder, 'output_dir', experiment_or_folder)
    with open(os.path.join(folder, 'log')) as stream:
        return json.load(stream)


def val_mse(exp, model, val):
    return exp.test(model, val, {'MSE': mean_squared_error})[1]['MSE']


numpy_mse = mean_squared_error


def forward(model, data):
    """The model's predictions, in test mode and without a graph."""
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        return model.forward(data)['pred'].array


def weights(model):
    return {name: param.array.copy() for name, param in model.namedparams()}


def assert_same_weights(first, second):
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


if __name__ == '__main__':
    save_path, num_epochs = sys.argv[1], int(sys.argv[2])
    make_experiment(save_path, num_epochs, extensions=[SlowEpochs(0.4)]).run(*make_managers())


def edit_saved_experiment(exp, edit):
    """Saves ``exp``, lets ``edit(saved)`` change its experiment.json data, writes it back."""
    path = exp.save()
    with open(path) as stream:
        saved = json.load(stream)
    edit(saved)
    with open(path, 'w') as stream:
        json.dump(saved, stream)
