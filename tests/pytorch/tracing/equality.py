"""The equality checks of the conversion tests: Chainer's own forward, gradients and SGD
steps are the reference; the converted module or the class read back from its source file
must give the same, to 1e-6 (forward) and 1e-5 (gradients, parameters) relative."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import chainer
import chainer.functions as F
import numpy
import pytest

torch = pytest.importorskip('torch')

# Chainer's parameter names -> torch's, for links that become torch's own modules.
_TORCH_NAMES = {
    'Linear': {'W': 'weight', 'b': 'bias'},
    'Conv2d': {'W': 'weight', 'b': 'bias'},
    'ConvTranspose2d': {'W': 'weight', 'b': 'bias'},
    'Embedding': {'W': 'weight'},
    'BatchNorm1d': {'gamma': 'weight', 'beta': 'bias', 'avg_mean': 'running_mean',
                    'avg_var': 'running_var'},
}
_TORCH_NAMES['BatchNorm2d'] = _TORCH_NAMES['BatchNorm3d'] = _TORCH_NAMES['BatchNorm1d']


def relative(value: Any, reference: Any) -> float:
    """The largest difference relative to the reference's largest magnitude."""
    value, reference = numpy.asarray(value, numpy.float64), numpy.asarray(reference,
                                                                        numpy.float64)
    assert value.shape == reference.shape
    scale = max(float(numpy.abs(reference).max(initial=0)), 1e-30)
    return float(numpy.abs(value - reference).max(initial=0)) / scale


def torch_key(module: Any, path: str) -> str:
    """The state-dict key the Chainer value at ``path`` (``/fc1/W``) has in ``module``."""
    link_path, _, name = path.rpartition('/')
    owner = module.get_submodule(link_path.strip('/').replace('/', '.'))
    if type(owner).__module__.startswith('torch.nn'):    # torch's own, not a written class
        name = _TORCH_NAMES.get(type(owner).__name__, {}).get(name, name)
    prefix = link_path.strip('/').replace('/', '.')
    return '{}.{}'.format(prefix, name) if prefix else name


def _flat(outputs: Any) -> list[Any]:
    if isinstance(outputs, dict):
        return list(outputs.values())
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def _chainer_outputs(model: Any, args: Sequence[Any], states: Sequence[tuple[Any, Any, Any]],
                     ) -> list[Any]:
    for link, c, h in states:
        link.set_state(chainer.Variable(c.copy()), chainer.Variable(h.copy()))
    outputs = _flat(model(*args))
    for link, _, _ in states:
        outputs += [link.c, link.h]
    return outputs


def _weights(outputs: Sequence[Any], seed: int) -> list[Any]:
    random = numpy.random.RandomState(seed)
    return [random.uniform(0.5, 1.5, numpy.shape(output.array)).astype(output.dtype)
            if output.dtype.kind == 'f' else None for output in outputs]


def compare(model: Any, module: Any, args: Sequence[Any], *, train: bool = False,
            states: Sequence[tuple[Any, Any, Any]] = (), seed: int = 0,
            reseed: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Forward and every parameter's gradient of ``model`` and ``module`` on ``args``
    (``states``: (link, c, h) set on the link and passed after ``args``; ``reseed`` runs
    before each side's forward); asserts the tolerances and returns the largest
    differences measured."""
    model.cleargrads()
    reseed()
    with chainer.using_config('train', train):
        outputs = _chainer_outputs(model, [a.copy() for a in args], states)
    weights = _weights(outputs, seed)
    loss = sum(F.sum(output * weight) for output, weight in zip(outputs, weights)
               if weight is not None)
    loss.backward()
    module.train(train)
    module.zero_grad()
    tensors = [torch.from_numpy(a.copy()) for a in args]
    tensors += [torch.from_numpy(array.copy()) for _, c, h in states for array in (c, h)]
    reseed()
    converted = _flat(module(*tensors))
    assert len(converted) == len(outputs)
    forward = max(relative(value.detach().numpy(), output.array)
                  for value, output in zip(converted, outputs))
    assert forward <= 1e-6, forward
    torch_loss = sum((value * torch.from_numpy(weight)).sum()
                     for value, weight in zip(converted, weights) if weight is not None)
    torch_loss.backward()
    parameters = dict(module.named_parameters())
    grads = {path: param.grad for path, param in model.namedparams() if param.grad is not None}
    largest = max((float(numpy.abs(grad).max()) for grad in grads.values()), default=0.0)
    gradient = 0.0
    for path, reference in grads.items():
        grad = parameters[torch_key(module, path)].grad
        found = numpy.zeros_like(reference) if grad is None else grad.numpy()
        if numpy.abs(reference).max() < 1e-5 * largest:
            # Zero but for float32 rounding (a bias before BatchNormalization in training):
            # both sides must be zero as well, on the model's scale.
            assert numpy.abs(found).max() < 1e-5 * largest, (path, numpy.abs(found).max())
            continue
        difference = relative(found, reference)
        assert difference <= 1e-5, (path, difference)
        gradient = max(gradient, difference)
    return {'forward': forward, 'gradient': gradient}


def train_side_by_side(model: Any, module: Any, batches: Sequence[Sequence[Any]], *,
                       lr: float = 0.05, train: bool = True,
                       states: Sequence[tuple[Any, Any, Any]] = (),
                       reseed: Callable[[], None] = lambda: None) -> float:
    """SGD steps, one per batch, on the mean square of the first output, in Chainer and in
    torch (each step from the ``states`` given); asserts the parameters stay equal to 1e-5
    relative and returns the largest relative difference."""
    optimizer = chainer.optimizers.SGD(lr)
    optimizer.setup(model)
    torch_optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    module.train(train)
    for batch in batches:
        reseed()
        with chainer.using_config('train', train):
            output = _chainer_outputs(model, [array.copy() for array in batch], states)[0]
        loss = F.mean(F.square(output))
        model.cleargrads()
        loss.backward()
        optimizer.update()
        tensors = [torch.from_numpy(array.copy()) for array in batch]
        tensors += [torch.from_numpy(array.copy()) for _, c, h in states for array in (c, h)]
        reseed()
        torch_loss = (_flat(module(*tensors))[0] ** 2).mean()
        torch_optimizer.zero_grad()
        torch_loss.backward()
        torch_optimizer.step()
    parameters = dict(module.named_parameters())
    worst = 0.0
    for path, param in model.namedparams():
        difference = relative(parameters[torch_key(module, path)].detach().numpy(),
                              param.array)
        assert difference <= 1e-5, (path, difference)
        worst = max(worst, difference)
    return worst


def ruff() -> list[str]:
    """The command that runs the real ruff: the one beside this Python, else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), 'ruff')
    found = beside if os.path.exists(beside) else shutil.which('ruff')
    if found is None:
        pytest.skip('ruff is not installed')
    return [found]


def read_back(path: str, class_name: str, model: Any) -> Any:
    """Imports the written file, builds its class and fills it with the Chainer model's
    weights by researchutils.pytorch.load_chainer_weights (strict: every tensor filled)."""
    from researchutils.pytorch import load_chainer_weights

    spec = importlib.util.spec_from_file_location('written_{}'.format(abs(hash(path))), path)
    assert spec is not None and spec.loader is not None
    written = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(written)
    module = getattr(written, class_name)()
    load_chainer_weights(module, model)
    return module


def check_ruff(path: str) -> None:
    """Runs the real ``ruff check`` on ``path`` with the project's settings."""
    settings = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'pyproject.toml')
    result = subprocess.run(ruff() + ['check', '--no-cache', '--config', settings, path],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
