"""Models written as Chainer's own examples build them (chainer/examples), small: the
subjects of the conversion tests."""
from __future__ import annotations

from typing import Any

import chainer
import chainer.functions as F
import chainer.links as L
import numpy


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


class BottleNeck(chainer.Chain):
    """examples/imagenet/resnet50.py's BottleNeckA: three convolutions with
    BatchNormalization and a projected shortcut."""

    def __init__(self, in_size: int = 4, ch: int = 2, out_size: int = 8,
                 stride: int = 2) -> None:
        super().__init__()
        initialW = chainer.initializers.HeNormal()
        with self.init_scope():
            self.conv1 = L.Convolution2D(in_size, ch, 1, stride, 0, initialW=initialW,
                                         nobias=True)
            self.bn1 = L.BatchNormalization(ch)
            self.conv2 = L.Convolution2D(ch, ch, 3, 1, 1, initialW=initialW, nobias=True)
            self.bn2 = L.BatchNormalization(ch)
            self.conv3 = L.Convolution2D(ch, out_size, 1, 1, 0, initialW=initialW,
                                         nobias=True)
            self.bn3 = L.BatchNormalization(out_size)
            self.conv4 = L.Convolution2D(in_size, out_size, 1, stride, 0, initialW=initialW,
                                         nobias=True)
            self.bn4 = L.BatchNormalization(out_size)

    def forward(self, x: Any) -> Any:
        h1 = F.relu(self.bn1(self.conv1(x)))
        h1 = F.relu(self.bn2(self.conv2(h1)))
        h1 = self.bn3(self.conv3(h1))
        h2 = self.bn4(self.conv4(x))
        return F.relu(h1 + h2)


class RNNForLM(chainer.Chain):
    """examples/ptb/train_ptb.py's RNNForLM: one step, its LSTMs' state read from links."""

    def __init__(self, n_vocab: int = 10, n_units: int = 6) -> None:
        super().__init__()
        with self.init_scope():
            self.embed = L.EmbedID(n_vocab, n_units)
            self.l1 = L.LSTM(n_units, n_units)
            self.l2 = L.LSTM(n_units, n_units)
            self.l3 = L.Linear(n_units, n_vocab)
        for param in self.params():
            param.array[...] = numpy.random.uniform(-0.1, 0.1, param.shape)

    def forward(self, x: Any) -> Any:
        h0 = self.embed(x)
        h1 = self.l1(F.dropout(h0))
        h2 = self.l2(F.dropout(h1))
        return self.l3(F.dropout(h2))


class Seq2seq(chainer.Chain):
    """examples/seq2seq/seq2seq.py's Seq2seq: the encoder over the source sentences and one
    decoder pass over the targets, its loss per word (two sentences of fixed lengths)."""

    def __init__(self, n_layers: int = 2, n_source_vocab: int = 7, n_target_vocab: int = 6,
                 n_units: int = 5) -> None:
        super().__init__()
        with self.init_scope():
            self.embed_x = L.EmbedID(n_source_vocab, n_units)
            self.embed_y = L.EmbedID(n_target_vocab, n_units)
            self.encoder = L.NStepLSTM(n_layers, n_units, n_units, 0.0)
            self.decoder = L.NStepLSTM(n_layers, n_units, n_units, 0.0)
            self.W = L.Linear(n_units, n_target_vocab)

    def forward(self, x0: Any, x1: Any, y0: Any, y1: Any) -> Any:
        eos = self.xp.zeros(1, numpy.int32)
        ys_in = [F.concat([eos, y], axis=0) for y in (y0, y1)]
        ys_out = [F.concat([y, eos], axis=0) for y in (y0, y1)]
        exs = _sequence_embed(self.embed_x, [x0, x1])
        eys = _sequence_embed(self.embed_y, ys_in)
        hx, cx, _ = self.encoder(None, None, exs)
        _, _, os = self.decoder(hx, cx, eys)
        concat_os = F.concat(os, axis=0)
        concat_ys_out = F.concat(ys_out, axis=0)
        return F.softmax_cross_entropy(self.W(concat_os), concat_ys_out, reduce='no')


def _sequence_embed(embed: chainer.Link, xs: list[Any]) -> list[Any]:
    x_len = [len(x) for x in xs]
    x_section = numpy.cumsum(x_len[:-1])
    ex = embed(F.concat(xs, axis=0))
    return list(F.split_axis(ex, x_section, 0))


class Generator(chainer.Chain):
    """examples/dcgan/net.py's Generator, narrower; its biases drawn, not zero (a bias
    before BatchNormalization in training has no gradient: compared at zero it would
    compare rounding noise)."""

    def __init__(self, n_hidden: int = 4, bottom_width: int = 2, ch: int = 16) -> None:
        super().__init__()
        self.n_hidden, self.ch, self.bottom_width = n_hidden, ch, bottom_width
        w = chainer.initializers.Normal(0.02)
        with self.init_scope():
            self.l0 = L.Linear(n_hidden, bottom_width * bottom_width * ch, initialW=w,
                               initial_bias=w)
            self.dc1 = L.Deconvolution2D(ch, ch // 2, 4, 2, 1, initialW=w, initial_bias=w)
            self.dc2 = L.Deconvolution2D(ch // 2, ch // 4, 4, 2, 1, initialW=w, initial_bias=w)
            self.dc3 = L.Deconvolution2D(ch // 4, ch // 8, 4, 2, 1, initialW=w, initial_bias=w)
            self.dc4 = L.Deconvolution2D(ch // 8, 3, 3, 1, 1, initialW=w, initial_bias=w)
            self.bn0 = L.BatchNormalization(bottom_width * bottom_width * ch)
            self.bn1 = L.BatchNormalization(ch // 2)
            self.bn2 = L.BatchNormalization(ch // 4)
            self.bn3 = L.BatchNormalization(ch // 8)

    def forward(self, z: Any) -> Any:
        h = F.reshape(F.relu(self.bn0(self.l0(z))),
                      (len(z), self.ch, self.bottom_width, self.bottom_width))
        h = F.relu(self.bn1(self.dc1(h)))
        h = F.relu(self.bn2(self.dc2(h)))
        h = F.relu(self.bn3(self.dc3(h)))
        return F.sigmoid(self.dc4(h))


class VAE(chainer.Chain):
    """examples/vae/net.py's VAE, its loss: the gaussian sample, Bernoulli reconstruction
    and the KL divergence."""

    def __init__(self, n_in: int = 8, n_latent: int = 3, n_h: int = 5, beta: float = 1.0
                 ) -> None:
        super().__init__()
        self.beta = beta
        with self.init_scope():
            self.le1 = L.Linear(n_in, n_h)
            self.le2_mu = L.Linear(n_h, n_latent)
            self.le2_ln_var = L.Linear(n_h, n_latent)
            self.ld1 = L.Linear(n_latent, n_h)
            self.ld2 = L.Linear(n_h, n_in)

    def encode(self, x: Any) -> tuple[Any, Any]:
        h1 = F.tanh(self.le1(x))
        return self.le2_mu(h1), self.le2_ln_var(h1)

    def decode(self, z: Any) -> Any:
        return self.ld2(F.tanh(self.ld1(z)))

    def forward(self, x: Any) -> Any:
        mu, ln_var = self.encode(x)
        batchsize = len(mu)
        z = F.gaussian(mu, ln_var)
        reconstruction = F.bernoulli_nll(x, self.decode(z)) / batchsize
        return reconstruction + self.beta * F.gaussian_kl_divergence(mu, ln_var) / batchsize


class SkipGram(chainer.Chain):
    """examples/word2vec/train_word2vec.py's SkipGram with its SoftmaxCrossEntropyLoss."""

    def __init__(self, n_vocab: int = 9, n_units: int = 4) -> None:
        super().__init__()
        with self.init_scope():
            self.embed = L.EmbedID(n_vocab, n_units,
                                   initialW=chainer.initializers.Uniform(1. / n_units))
            self.loss_func = SoftmaxCrossEntropyLoss(n_units, n_vocab)

    def forward(self, x: Any, contexts: Any) -> Any:
        e = self.embed(contexts)
        batch_size, n_context, n_units = e.shape
        x = F.broadcast_to(x[:, None], (batch_size, n_context))
        e = F.reshape(e, (batch_size * n_context, n_units))
        x = F.reshape(x, (batch_size * n_context,))
        return self.loss_func(e, x)


class SoftmaxCrossEntropyLoss(chainer.Chain):
    """The word2vec example's softmax output layer (random weights here, not zeros)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        with self.init_scope():
            self.out = L.Linear(n_in, n_out)

    def forward(self, x: Any, t: Any) -> Any:
        return F.softmax_cross_entropy(self.out(x), t)


def video_predictor_module() -> Any:
    """examples/video_prediction/model.py, imported from its file."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples',
                        'video_prediction', 'model.py')
    spec = importlib.util.spec_from_file_location('video_prediction_model', path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
