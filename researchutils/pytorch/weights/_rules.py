"""Which Chainer arrays fill which torch tensor, by the kind of the torch module: the rules.

A :class:`Rule` names one tensor of a module (``weight_ih``), the Chainer arrays it is made of
(``upward/W``), and the two ways between them: ``combine`` (Chainer's arrays to the tensor) and
``split`` (the tensor, or its gradient, back to Chainer's arrays). :func:`module_rules` gives a
module's rules by its kind, or None for a module without one, whose own tensors keep their
names and whose children are walked. The LSTM gate order lives here, once:
:func:`stack_gates` and :func:`interleave_gates`.

The functions are torch operations only, so they also run on ``meta`` tensors: splitting a
tensor of the module's shape tells the shapes the Chainer arrays must have.

Tests: ``tests/pytorch/weights/test_loading.py`` and the converters' tests.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from researchutils.pytorch.nn.connection import DepthwiseConvolution2D

# torch's LSTMCell and LSTM stack the gates i, f, g, o in blocks of U rows; Chainer's F.lstm
# interleaves them unit by unit as a, i, f, o (a is torch's g). Chainer's gate index of each
# of torch's blocks, and torch's block of each of Chainer's gates:
_CHAINER_GATE_OF_TORCH_BLOCK = [1, 2, 0, 3]
_TORCH_BLOCK_OF_CHAINER_GATE = [2, 0, 1, 3]


def stack_gates(interleaved: Any) -> Any:
    """Chainer's interleaved LSTM rows (row ``4u + g``, gates a, i, f, o) in torch's order
    (row ``b * U + u``, blocks i, f, g, o); any trailing axes are kept."""
    units = interleaved.shape[0] // 4
    rows = interleaved.reshape(units, 4, *interleaved.shape[1:])
    return rows[:, _CHAINER_GATE_OF_TORCH_BLOCK].transpose(0, 1).reshape(interleaved.shape)


def interleave_gates(stacked: Any) -> Any:
    """The inverse of :func:`stack_gates`."""
    units = stacked.shape[0] // 4
    blocks = stacked.reshape(4, units, *stacked.shape[1:])
    return blocks[_TORCH_BLOCK_OF_CHAINER_GATE].transpose(0, 1).reshape(stacked.shape)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One torch tensor (dotted name, relative to its module) from Chainer arrays ('/' names)."""

    torch_name: str
    chainer_names: tuple[str, ...]
    combine: Callable[[list[Any]], Any]
    split: Callable[[Any], list[Any]]

    def prefixed(self, torch_prefix: str, chainer_prefix: str) -> Rule:
        return dataclasses.replace(
            self, torch_name=torch_prefix + self.torch_name,
            chainer_names=tuple(chainer_prefix + name for name in self.chainer_names))


def _same(torch_name: str, chainer_name: str) -> Rule:
    return Rule(torch_name, (chainer_name,), lambda arrays: arrays[0], lambda tensor: [tensor])


def _one(torch_name: str, chainer_name: str, combine: Callable[[Any], Any],
         split: Callable[[Any], Any]) -> Rule:
    return Rule(torch_name, (chainer_name,), lambda arrays: combine(arrays[0]),
                lambda tensor: [split(tensor)])


def _stacked(torch_name: str, chainer_names: list[str]) -> Rule:
    count = len(chainer_names)
    return Rule(torch_name, tuple(chainer_names), lambda arrays: torch.cat(list(arrays)),
                lambda tensor: list(tensor.chunk(count)))


def _weight_and_bias(module: Any) -> list[Rule]:
    rules = [_same('weight', 'W')]
    if module.bias is not None:
        rules.append(_same('bias', 'b'))
    return rules


def _depthwise(module: Any) -> list[Rule]:
    # Chainer's W is (multiplier, in, kh, kw); output channel c * multiplier + m is W[m, c].
    multiplier, channels = module.channel_multiplier, module.in_channels

    def combine(w: Any) -> Any:
        return w.transpose(0, 1).reshape(channels * multiplier, 1, *w.shape[2:])

    def split(weight: Any) -> Any:
        return weight.reshape(channels, multiplier, *weight.shape[2:]).transpose(0, 1)

    rules = [_one('weight', 'W', combine, split)]
    if module.bias is not None:
        rules.append(_same('bias', 'b'))
    return rules


def _batch_norm(module: Any) -> list[Rule]:
    rules = []
    if module.weight is not None:
        rules.append(_same('weight', 'gamma'))
    if module.bias is not None:
        rules.append(_same('bias', 'beta'))
    if module.track_running_stats:
        rules += [_same('running_mean', 'avg_mean'), _same('running_var', 'avg_var'),
                  _same('num_batches_tracked', 'N')]
    return rules


def _lstm_cell(module: Any) -> list[Rule]:
    rules = [_one('weight_ih', 'upward/W', stack_gates, interleave_gates),
             _one('weight_hh', 'lateral/W', stack_gates, interleave_gates),
             _one('bias_ih', 'upward/b', stack_gates, interleave_gates)]
    if isinstance(module.bias_hh, nn.Parameter):
        # A plain LSTMCell's second bias, which Chainer's LSTM lacks: zero computes Chainer's.
        rules.append(Rule('bias_hh', (), lambda arrays: torch.zeros(4 * module.hidden_size),
                          lambda tensor: []))
    return rules


def _n_step(module: Any) -> list[Rule]:
    # Chainer's NStep links hold, for layer l and direction d, the child 'l * D + d' with
    # w0..w{2G-1} (input weights, then hidden ones) and b0..b{2G-1}, gate g in torch's block
    # order: LSTM i, f, a (torch's g), o; GRU r, z, n.
    gates = 4 if isinstance(module, nn.LSTM) else 3
    directions = 2 if module.bidirectional else 1
    rules = []
    for layer in range(module.num_layers):
        for direction in range(directions):
            child = '{}/'.format(layer * directions + direction)
            suffix = '_l{}{}'.format(layer, '_reverse' if direction else '')
            for torch_kind, chainer_kind, first in (
                    ('weight_ih', 'w', 0), ('weight_hh', 'w', gates),
                    ('bias_ih', 'b', 0), ('bias_hh', 'b', gates)):
                rules.append(_stacked(torch_kind + suffix, [
                    '{}{}{}'.format(child, chainer_kind, first + gate) for gate in range(gates)]))
    return rules


#: torch module kind to its rules, most specific first (a twin before its torch base).
_RULES: list[tuple[type, Callable[[Any], list[Rule]]]] = [
    (DepthwiseConvolution2D, _depthwise),
    (nn.Linear, _weight_and_bias),
    (nn.Bilinear, _weight_and_bias),
    (nn.Embedding, lambda module: [_same('weight', 'W')]),
    (nn.Conv1d, _weight_and_bias), (nn.Conv2d, _weight_and_bias), (nn.Conv3d, _weight_and_bias),
    (nn.ConvTranspose1d, _weight_and_bias), (nn.ConvTranspose2d, _weight_and_bias),
    (nn.ConvTranspose3d, _weight_and_bias),
    (nn.BatchNorm1d, _batch_norm), (nn.BatchNorm2d, _batch_norm), (nn.BatchNorm3d, _batch_norm),
    (nn.LSTMCell, _lstm_cell),
    (nn.LSTM, _n_step), (nn.GRU, _n_step),
]


def module_rules(module: Any) -> list[Rule] | None:
    """The rules of ``module``'s kind (its names relative to it), or None for a kind without."""
    for kind, rules in _RULES:
        if isinstance(module, kind):
            return rules(module)
    return None


def plan(module: Any, chainer_prefix: str = '') -> list[Rule]:
    """Every rule of ``module``'s tree, with full names: a module of a kind in the table
    takes its tensors by its rules; any other keeps its own tensors' names (a Chain's own
    parameters) and its children are walked under their names."""
    rules = module_rules(module)
    if rules is not None:
        return rules
    found = [_same(name, name) for name, _ in module.named_parameters(recurse=False)]
    found += [_same(name, name) for name, _ in module.named_buffers(recurse=False)
              if name not in module._non_persistent_buffers_set]
    for name, child in module.named_children():
        found += [rule.prefixed(name + '.', name + '/') for rule in plan(child)]
    return [rule.prefixed('', chainer_prefix) for rule in found]
