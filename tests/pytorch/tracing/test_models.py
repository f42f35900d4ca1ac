"""The models of Chainer's examples, converted: forward and every gradient equal to
Chainer's, ten SGD steps side by side, and the written source read back equal again."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import chainer
import numpy
import pytest

from researchutils.pytorch import convert, write_source
from tests.pytorch.tracing import models
from tests.pytorch.tracing.equality import (
    check_ruff,
    compare,
    read_back,
    torch,
    train_side_by_side,
)


@pytest.fixture(autouse=True)
def _seeded_initializers() -> Any:
    """Chainer's initializers draw from NumPy's global generator: each model starts from the
    same weights whatever ran before. (Drawn otherwise, a BatchNormalization gamma's gradient
    in training can differ by up to 5e-5 relative: Chainer's float32 rounding, measured
    against float64 at 4.9e-5, torch's at 6.5e-6.)"""
    state = numpy.random.get_state()
    numpy.random.seed(0)
    yield
    numpy.random.set_state(state)


def _u(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.RandomState(seed).uniform(-1, 1, shape).astype(numpy.float32)


def _ints(high: int, *shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.RandomState(seed).randint(0, high, shape).astype(numpy.int32)


def _check(tmp_path: Any, model: chainer.Link, batch: Callable[[int], list[numpy.ndarray]],
           *, trace_train: bool, check_train: bool,
           states: Sequence[tuple[chainer.Link, str, numpy.ndarray, numpy.ndarray]] = (),
           reseed: Callable[[], None] = lambda: None, lr: float = 0.05) -> Any:
    """Converts, compares, writes and reads back, and trains side by side; returns the
    converted module."""
    for link, _, c, h in states:
        link.set_state(chainer.Variable(c), chainer.Variable(h))
    module = convert(model, batch(0), train=trace_train,
                     states=[path for _, path, _, _ in states])
    carried = [(link, c, h) for link, _, c, h in states]
    compare(model, module, batch(1), train=check_train, states=carried, reseed=reseed)
    path = str(tmp_path / 'converted.py')
    write_source(module, path)
    check_ruff(path)
    written = read_back(path, type(model).__name__, model)
    compare(model, written, batch(2), train=check_train, states=carried, reseed=reseed)
    train_side_by_side(model, module, [batch(3 + i) for i in range(10)], train=check_train,
                       states=carried, reseed=reseed, lr=lr)
    return module


def test_mnist_mlp(tmp_path: Any) -> None:
    _check(tmp_path, models.MLP(), lambda seed: [_u(4, 6, seed=seed)], trace_train=False,
           check_train=False)


def test_vgg_with_batch_normalization_and_dropout(tmp_path: Any) -> None:
    model = models.VGG()
    with chainer.using_config('train', True):
        for seed in range(3):    # running statistics of their own
            model(_u(4, 3, 8, 8, seed=100 + seed))
    module = _check(tmp_path, model, lambda seed: [_u(4, 3, 8, 8, seed=seed)],
                    trace_train=True, check_train=False)
    module.train()
    x = torch.from_numpy(_u(4, 3, 8, 8))
    assert not torch.equal(module(x), module(x))    # dropout, in training mode only
    module.eval()
    assert torch.equal(module(x), module(x))


def test_resnet50_bottleneck_block(tmp_path: Any) -> None:
    _check(tmp_path, models.BottleNeck(), lambda seed: [_u(3, 4, 6, 6, seed=seed)],
           trace_train=True, check_train=True)


def test_ptb_rnnlm_step_with_its_states(tmp_path: Any) -> None:
    model = models.RNNForLM()
    states = [(model.l1, '/l1', _u(3, 6, seed=50), _u(3, 6, seed=51)),
              (model.l2, '/l2', _u(3, 6, seed=52), _u(3, 6, seed=53))]
    _check(tmp_path, model, lambda seed: [_ints(10, 3, seed=seed)], trace_train=True,
           check_train=False, states=states)


def test_seq2seq_encoder_and_decoder_on_n_step_lstm(tmp_path: Any) -> None:
    def batch(seed: int) -> list[numpy.ndarray]:
        return [_ints(7, 3, seed=seed), _ints(7, 2, seed=seed + 50),
                _ints(6, 2, seed=seed + 100), _ints(6, 4, seed=seed + 150)]

    _check(tmp_path, models.Seq2seq(), batch, trace_train=True, check_train=True)


def test_dcgan_generator(tmp_path: Any) -> None:
    _check(tmp_path, models.Generator(), lambda seed: [_u(3, 4, seed=seed)],
           trace_train=True, check_train=True)


def test_vae_loss_with_its_gaussian(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chainer's F.gaussian draws NumPy's noise; here torch's generator gives both sides
    # the same noise, reseeded before each side's forward.
    monkeypatch.setattr(numpy.random, 'standard_normal',
                        lambda size: torch.randn(size).numpy().astype(numpy.float64))
    steps = iter(range(10 ** 6))

    def reseed() -> None:
        torch.manual_seed(next(steps) // 2)

    _check(tmp_path, models.VAE(), lambda seed: [
        (_u(4, 8, seed=seed) > 0).astype(numpy.float32)], trace_train=False,
        check_train=False, reseed=reseed, lr=0.002)


def test_word2vec_skip_gram(tmp_path: Any) -> None:
    _check(tmp_path, models.SkipGram(), lambda seed: [_ints(9, 4, seed=seed),
                                                      _ints(9, 4, 2, seed=seed + 50)],
           trace_train=False, check_train=False)


def test_video_predictor_of_the_demo(tmp_path: Any) -> None:
    example = models.video_predictor_module()
    model = example.VideoPredictor(frame_size=4, n_hidden=6, context=2, clip=0.01,
                                   eval_k_step=2)
    _check(tmp_path, model, lambda seed: [_u(2, 3, 4, 4, seed=seed)], trace_train=False,
           check_train=False)
