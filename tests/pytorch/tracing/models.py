"""Models written as Chainer's own examples build them (chainer/examples), small: the
subjects of the conversion tests."""
from __future__ import annotations

from typing import Any

import chainer
import chainer.functions as F
import chainer.links as L


class MLP(chainer.Chain):
    """examples/mnist/train_mnist.py's network."""

    def __init__(self, n_units: int = 8, n_out: int = 3) -> None:
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(None, n_units)
            self.l2 = L.Linear(None, n_units)
            self.l3 = L.Linear(None, n_out)

    def forward(self, x: Any) -> Any:
        h1 = F.relu(self.l1(x))
        h2 = F.relu(self.l2(h1))
        return self.l3(h2)


class VGGBlock(chainer.Chain):
    """examples/cifar/models/VGG.py's Block: convolution, BatchNormalization, ReLU."""

    def __init__(self, out_channels: int, ksize: int, pad: int = 1) -> None:
        super().__init__()
        with self.init_scope():
            self.conv = L.Convolution2D(None, out_channels, ksize, pad=pad, nobias=True)
            self.bn = L.BatchNormalization(out_channels)

    def forward(self, x: Any) -> Any:
        return F.relu(self.bn(self.conv(x)))


class VGG(chainer.Chain):
    """examples/cifar/models/VGG.py's VGG, two blocks of each stage kept, with its dropout
    and the classifier's BatchNormalization."""

    def __init__(self, class_labels: int = 4) -> None:
        super().__init__()
        with self.init_scope():
            self.block1_1 = VGGBlock(4, 3)
            self.block1_2 = VGGBlock(4, 3)
            self.block2_1 = VGGBlock(8, 3)
            self.fc1 = L.Linear(None, 8, nobias=True)
            self.bn_fc1 = L.BatchNormalization(8)
            self.fc2 = L.Linear(None, class_labels, nobias=True)

    def forward(self, x: Any) -> Any:
        h = self.block1_1(x)
        h = F.dropout(h, ratio=0.3)
        h = self.block1_2(h)
        h = F.max_pooling_2d(h, ksize=2, stride=2)
        h = self.block2_1(h)
        h = F.max_pooling_2d(h, ksize=2, stride=2)
        h = F.dropout(h, ratio=0.5)
        h = self.fc1(h)
        h = self.bn_fc1(h)
        h = F.relu(h)
        h = F.dropout(h, ratio=0.5)
        return self.fc2(h)
