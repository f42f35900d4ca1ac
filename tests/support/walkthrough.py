"""The model, dataset and metric of the issue's walkthrough (Delira's transition guide in Chainer).

Shared by tests/chainer/training/test_walkthrough.py, which runs the walkthrough as written,
and benchmarks/bench_experiment.py, which times ChainerExperiment on the same model.
"""
import chainer.functions as F
import chainer.links as L
import numpy as np

from researchutils.chainer.data_loading import AbstractDataset
from researchutils.chainer.models import AbstractChainerNetwork


class SimpleNet(AbstractChainerNetwork):
    def __init__(self, num_inputs=32, num_outputs=10, num_hidden=64):
        super().__init__(num_inputs=num_inputs, num_outputs=num_outputs, num_hidden=num_hidden)
        with self.init_scope():
            self.fc1 = L.Linear(num_inputs, num_hidden)
            self.fc2 = L.Linear(num_hidden, num_hidden)
            self.fc3 = L.Linear(num_hidden, num_outputs)

    def forward(self, x):
        return {"pred": self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))}


class ArrayDataset(AbstractDataset):
    """Example i is ``{"data": data[i], "label": labels[i]}``."""

    def __init__(self, data, labels):
        super().__init__(None, None)
        self.data = data
        self.labels = labels

    def __getitem__(self, index):
        return {"data": self.data[index], "label": self.labels[index]}

    def __len__(self):
        return len(self.data)


class RandomDataset(ArrayDataset):  # as in the guide: __getitem__ returns a dict of numpy arrays
    def __init__(self, num_samples, num_inputs, num_outputs):
        super().__init__(np.random.rand(num_samples, num_inputs),
                         np.random.rand(num_samples, num_outputs))


def mean_squared_error(pred, label):  # a NumPy metric, like sklearn's
    return np.mean((pred - label) ** 2)
