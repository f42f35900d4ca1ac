"""load_chainer_weights: a torch module written by hand, filled from Chainer's weights.

The module's submodules carry the Chainer children's names; each of its tensors is found by
the rules of its module's kind (:mod:`researchutils.pytorch.weights._rules`), which also
convert it (LSTM gate order, NStep stacking, depthwise layout). The load is strict as the
npz loader is: every tensor of the module must get an array and every array under the key
must fill a tensor, each of the shape and dtype kind the rule needs. All of that is checked
on shapes and dtypes first, then every array is read and converted, and only then is any
tensor written, so a refused or unreadable source leaves the module as it was.

Tests: ``tests/pytorch/weights/test_loading.py``.
"""
from __future__ import annotations

import os
from typing import Any, TypeVar

import chainer
import torch
from torch import nn

from researchutils.pytorch.weights import _rules, _sources

_Module = TypeVar('_Module', bound=nn.Module)


def _describe(shape: Any, dtype: Any) -> str:
    return 'shape {} and dtype {}'.format(tuple(shape), str(dtype).replace('torch.', ''))


def _problems(rules: list[_rules.Rule], state: dict[str, Any],
              source: _sources.Source) -> list[tuple[str, str]]:
    """What does not fit, as (Chainer key or torch name, message) pairs."""
    problems = []
    used = set()
    for rule in rules:
        target = state[rule.torch_name]
        lazy = nn.parameter.is_lazy(target)
        expected = ([None] * len(rule.chainer_names) if lazy else rule.split(
            torch.empty(target.shape, dtype=target.dtype, device='meta')))
        for name, needed in zip(rule.chainer_names, expected):
            used.add(name)
            needs = 'the module\'s {!r} needs it with {}'.format(
                rule.torch_name, 'dtype {}'.format(str(target.dtype).replace('torch.', ''))
                if needed is None else _describe(needed.shape, target.dtype))
            if name not in source.specs:
                problems.append((name, '{} has no array {!r}: {}'.format(
                    source.what, name, needs)))
                continue
            spec = source.specs[name]
            if spec is None:
                problems.append((name, '{}: array {!r} is not initialized (a lazy parameter '
                                       'Chainer never ran): {}'.format(source.what, name, needs)))
            elif (needed is not None and tuple(spec[0]) != tuple(needed.shape)) or not (
                    _sources.kind_fits(spec[1], target.dtype)):
                problems.append((name, '{}: array {!r} has {}, but {}'.format(
                    source.what, name, _describe(*spec), needs)))
    covered = {rule.torch_name for rule in rules}
    for torch_name in state:
        if torch_name not in covered:
            problems.append((torch_name, 'the module\'s {!r} has no Chainer array in the rules '
                                         'of its kind'.format(torch_name)))
    for name in source.specs:
        if name not in used:
            spec = source.specs[name]
            problems.append((name, '{}: array {!r} ({}) fits nothing in the module: no '
                                   'submodule or tensor of that name'.format(
                                       source.what, name,
                                       'not initialized' if spec is None else _describe(*spec))))
    return sorted(problems)


def _refuse(problems: list[tuple[str, str]]) -> None:
    first = problems[0][1]
    rest = [message for _, message in problems[1:9]]
    more = len(problems) - 1 - len(rest)
    raise ValueError('{}; nothing was loaded{}'.format(first, ''.join(
        ['; also: ' + '; '.join(rest)] if rest else []) + (
            ' and {} more'.format(more) if more > 0 else '')))


def load_chainer_weights(module: _Module, source: chainer.Link | str | os.PathLike[str], *,
                         key: str | None = None) -> _Module:
    """Fills ``module`` with Chainer weights, strictly, and returns it.

    Each submodule of ``module`` carries the name of the Chainer child it stands for, and
    each of its tensors is converted by its kind: ``nn.Linear`` and the convolutions take
    ``W`` and ``b``; the batch normalizations ``gamma``, ``beta``, ``avg_mean``,
    ``avg_var`` and ``N``; ``nn.LSTMCell`` (and :class:`~researchutils.pytorch.nn.recurrent.LSTM`)
    ``upward`` and ``lateral`` in torch's gate order; ``nn.LSTM`` and ``nn.GRU`` the NStep
    links' ``w0``... and ``b0``... stacked; any other module keeps its own tensors' names and
    its children are filled by theirs. The table is in the tutorial
    (``docs/tutorials/pytorch.rst``).

    Args:
        module (torch.nn.Module): The module to fill, float32 or float64.
        source (chainer.Link or str or os.PathLike): A Chainer link, a model file saved by
            :func:`researchutils.chainer.serializers.save_model` (or ``save_npz``), or a
            Trainer snapshot. Files are read without unpickling.
        key (str or None): The prefix of the model's arrays in the source
            (``'updater/model:main/predictor/'``); by default a snapshot's main model
            (``'updater/model:main/'``) or the whole file or link.

    Returns:
        torch.nn.Module: ``module``.

    Raises:
        ValueError: An array is missing, extra, not initialized, or of another shape or dtype
            kind than its tensor needs: the message names the first such key (in key order)
            and both sides, and nothing is loaded. Also a corrupt file.
        KeyError: The source has nothing under ``key``.
        TypeError: ``module`` is not a torch module, or ``source`` is neither a link nor a path.
        FileNotFoundError: The file does not exist.

    Example:
        >>> import chainer.links as L
        >>> import torch
        >>> chainer_model = chainer.Chain()
        >>> with chainer_model.init_scope():
        ...     chainer_model.fc = L.Linear(3, 2)
        >>> class Model(torch.nn.Module):  # the port: its children named as Chainer's
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = torch.nn.Linear(3, 2)
        >>> model = load_chainer_weights(Model(), chainer_model)
        >>> bool((model.fc.weight.detach().numpy() == chainer_model.fc.W.array).all())
        True
    """
    if not isinstance(module, nn.Module):
        raise TypeError('module must be a torch.nn.Module, got {!r}'.format(module))
    rules = _rules.plan(module)
    state = module.state_dict(keep_vars=True)
    with _sources.open_source(source, key) as opened:
        problems = _problems(rules, state, opened)
        if problems:
            _refuse(problems)
        values = {}
        for rule in rules:
            target = state[rule.torch_name]
            arrays = [torch.as_tensor(opened.read(name)) for name in rule.chainer_names]
            value = rule.combine(arrays).to(dtype=target.dtype, device=target.device)
            values[rule.torch_name] = value
    with torch.no_grad():
        for torch_name, value in values.items():
            target = state[torch_name]
            if nn.parameter.is_lazy(target):  # takes the shape of Chainer's (initialized) array
                target.materialize(value.shape, dtype=target.dtype, device=target.device)
            target.copy_(value)
    return module
