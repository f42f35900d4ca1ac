"""compare: one batch through a Chainer model and its torch port, every difference by name.

The check a person writes when porting a model by hand: the same inputs go through both (in
the module's mode: ``module.training`` is ``chainer.config.train``), the largest forward
difference is measured, and then one backward of the same random weighting of the outputs
gives each parameter's gradient difference, by Chainer's name, the torch gradient brought
back to Chainer's layout by the rules of its module's kind (:mod:`._rules`), and each input's.

Tests: ``tests/pytorch/weights/test_comparison.py``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import chainer
import numpy
import torch
from torch import nn

from researchutils._checks import check_int
from researchutils.pytorch.weights import _rules


@dataclasses.dataclass(frozen=True)
class Difference:
    """The largest absolute difference of two arrays, and the largest absolute value of
    Chainer's (the scale): ``relative`` is their ratio."""

    largest: float
    scale: float

    @property
    def relative(self) -> float:
        """``largest / scale`` (``largest`` itself where Chainer's is all zeros)."""
        return self.largest / self.scale if self.scale > 0 else self.largest


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found: ``forward`` over every output, ``gradients`` by name
    (the parameters' Chainer names, ``'/upward/W'``, then the inputs', ``'inputs[0]'``).

    Example:
        >>> Comparison(Difference(1e-7, 1.0), {'/W': Difference(0.0, 2.0)})
        Comparison(largest forward difference 1e-07 (relative 1e-07); gradients:
          /W  0 (relative 0))
    """

    forward: Difference
    gradients: dict[str, Difference]

    @property
    def largest_relative(self) -> float:
        """The largest relative difference of the forward and of every gradient."""
        return max([self.forward.relative] + [gradient.relative
                                              for gradient in self.gradients.values()])

    def __repr__(self) -> str:
        width = max((len(name) for name in self.gradients), default=0)
        lines = ['  {}  {:.3g} (relative {:.3g})'.format(name.ljust(width), gradient.largest,
                                                         gradient.relative)
                 for name, gradient in self.gradients.items()]
        return 'Comparison(largest forward difference {:.3g} (relative {:.3g}); gradients:\n' \
            '{})'.format(self.forward.largest, self.forward.relative, '\n'.join(lines))


def _difference(torch_value: Any, chainer_value: Any) -> Difference:
    ours = torch_value.detach().cpu().double().numpy()
    theirs = numpy.asarray(chainer.backend.CpuDevice().send(chainer_value), dtype=numpy.float64)
    if ours.shape != theirs.shape:
        raise ValueError('the outputs differ in shape: torch {} against Chainer {}'.format(
            ours.shape, theirs.shape))
    return Difference(float(numpy.abs(ours - theirs).max(initial=0.0)),
                      float(numpy.abs(theirs).max(initial=0.0)))


def _both(value: Any, name: str) -> tuple[Any, Any, list[tuple[str, Any, Any]]]:
    """``value`` (arrays, lists, tuples, None) for Chainer and for torch, and its float
    arrays as (name, Chainer variable, torch tensor), whose gradients are compared."""
    if value is None:
        return None, None, []
    if isinstance(value, (list, tuple)):
        parts = [_both(item, '{}[{}]'.format(name, index)) for index, item in enumerate(value)]
        return (type(value)(part[0] for part in parts), type(value)(part[1] for part in parts),
                [leaf for part in parts for leaf in part[2]])
    if not isinstance(value, numpy.ndarray):
        raise TypeError('{} must be a NumPy array, None, or a list or tuple of them, got {!r}'
                        .format(name, value))
    if value.dtype.kind != 'f':
        return value, torch.from_numpy(value), []
    variable = chainer.Variable(value.copy())
    tensor = torch.from_numpy(value.copy()).requires_grad_()
    return variable, tensor, [(name, variable, tensor)]


def _outputs(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _outputs(item)
    elif value is not None:
        yield value


def compare(chainer_model: chainer.Link, module: nn.Module, inputs: Any, *,
            seed: int = 0) -> Comparison:
    """One batch through ``chainer_model`` and ``module``: forward and gradient differences.

    Both are called with ``inputs`` (float arrays as variables and tensors whose gradients
    are compared, integer arrays as they are), in the mode of ``module`` (``train()`` is
    ``chainer.config.train = True``). Their outputs (a tensor, or tuples and lists of them,
    as the NStep links return) are compared element by element; then both backpropagate the
    sum of their outputs times the same random weights (drawn with ``seed``), from cleared
    gradients. A stateful model advances one step in both, and a batch normalization in
    train mode updates its statistics in both.

    Args:
        chainer_model (chainer.Link): The reference, on the CPU.
        module (torch.nn.Module): The port, whose submodules carry the Chainer children's
            names (as :func:`from_chainer` makes them, or by hand).
        inputs (numpy.ndarray or tuple): One input array, or a tuple of the positional
            arguments (arrays, None, or lists of arrays for the NStep links).
        seed (int): Seed of the outputs' weights.

    Returns:
        Comparison: ``forward`` (the largest difference over every output) and ``gradients``
        by Chainer parameter name, then by input (``'inputs[0]'``).

    Raises:
        TypeError: An argument of another kind.
        ValueError: The outputs differ in number or shape.

    Example:
        >>> import chainer.links as L, numpy
        >>> from researchutils.pytorch.weights import from_chainer
        >>> link = L.Linear(3, 2)
        >>> result = compare(link, from_chainer(link), numpy.ones((4, 3), numpy.float32))
        >>> sorted(result.gradients)
        ['/W', '/b', 'inputs[0]']
        >>> result.largest_relative < 1e-6
        True
    """
    if not isinstance(chainer_model, chainer.Link):
        raise TypeError('chainer_model must be a chainer.Link, got {!r}'.format(chainer_model))
    if not isinstance(module, nn.Module):
        raise TypeError('module must be a torch.nn.Module, got {!r}'.format(module))
    seed = check_int(seed, 'seed', minimum=0)
    arguments = inputs if isinstance(inputs, tuple) else (inputs,)
    chainer_inputs, torch_inputs, leaves = _both(arguments, 'inputs')
    chainer_model.cleargrads()
    module.zero_grad(set_to_none=True)
    with chainer.using_config('train', module.training):
        chainer_outputs = list(_outputs(chainer_model(*chainer_inputs)))
        torch_outputs = list(_outputs(module(*torch_inputs)))
        if len(chainer_outputs) != len(torch_outputs):
            raise ValueError('Chainer returns {} outputs and torch {}'.format(
                len(chainer_outputs), len(torch_outputs)))
        differences = [_difference(ours, theirs.array)
                       for ours, theirs in zip(torch_outputs, chainer_outputs)]
        forward = Difference(max(difference.largest for difference in differences),
                             max(difference.scale for difference in differences))
        random = numpy.random.RandomState(seed)
        weights = [random.standard_normal(output.shape).astype(output.dtype)
                   for output in chainer_outputs]
        chainer.functions.sum(chainer.functions.stack([
            chainer.functions.sum(output * weight)
            for output, weight in zip(chainer_outputs, weights)])).backward()
    # The graph is kept, as Chainer keeps its own: a stateful module's next call backpropagates
    # through this step too, as the Chainer model's does.
    torch.stack([(output * torch.from_numpy(weight)).sum()
                 for output, weight in zip(torch_outputs, weights)]).sum().backward(
                     retain_graph=True)
    return Comparison(forward, _gradients(chainer_model, module, leaves))


def _gradients(chainer_model: Any, module: Any,
               leaves: list[tuple[str, Any, Any]]) -> dict[str, Difference]:
    chainer_params = dict(chainer_model.namedparams())
    parameters = dict(module.named_parameters())
    gradients = {}
    for rule in _rules.plan(module):
        parameter = parameters.get(rule.torch_name)
        if parameter is None or not rule.chainer_names:
            continue  # a buffer (running statistics), or a tensor Chainer has no array for
        grad = torch.zeros_like(parameter) if parameter.grad is None else parameter.grad
        for name, part in zip(rule.chainer_names, rule.split(grad)):
            param = chainer_params['/' + name]
            theirs = numpy.zeros(param.shape, param.dtype) if param.grad is None else param.grad
            gradients['/' + name] = _difference(part, theirs)
    for name, variable, tensor in leaves:
        theirs = numpy.zeros_like(variable.array) if variable.grad is None else variable.grad
        ours = torch.zeros_like(tensor) if tensor.grad is None else tensor.grad
        gradients[name] = _difference(ours, theirs)
    return dict(sorted(gradients.items(), key=lambda item: (item[0].startswith('inputs'),
                                                            item[0])))
