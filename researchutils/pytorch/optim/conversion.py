"""A Chainer optimizer's kind, hyper-parameters, per-parameter state, hooks and schedules,
carried on by a torch optimizer.

:func:`from_chainer_optimizer` picks the torch rule that computes Chainer's update (torch's
own SGD, RMSprop and Adagrad, which compute exactly Chainer's; ours for MomentumSGD, Adam and
RMSprop with ``eps_inside_sqrt``, see :mod:`researchutils.pytorch.optim.optimizers`), copies
each parameter's state (Adam's ``m``, ``v``, ``vhat`` and step count ...) onto the torch
parameter of the same name, and registers the Chainer hooks as step pre-hooks
(:mod:`researchutils.pytorch.optim.hooks`), so ``step()`` alone does what Chainer's
``update()`` did. :func:`from_chainer_schedule` does the same for an ExponentialShift or
LinearShift extension. Either reads the state from a live Chainer object or from a Trainer
snapshot file (read with pickling refused).

Tests: ``tests/pytorch/optim/test_conversion.py`` (each rule, hook and schedule against
Chainer's own resumed Trainer).
"""
from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import chainer
import numpy
import torch

from researchutils._checks import check_path, check_str
from researchutils.pytorch.optim.hooks import GradientClipping, WeightDecay
from researchutils.pytorch.optim.optimizers import (
    ChainerAdam,
    ChainerMomentumSGD,
    ChainerRMSprop,
)
from researchutils.pytorch.optim.schedules import ExponentialShift, LinearShift
from researchutils.pytorch.weights._rules import plan

# The Chainer hyper-parameters a rule reads, each with the param-group key it becomes.
_SGD = {'lr': 'lr'}
_RENAMED_BY_ADAM = {'alpha': 'lr'}


def _read_snapshot(path: str, prefix: str) -> dict[str, Any]:
    """The arrays of ``path`` whose keys start with ``prefix``, keyed by the rest."""
    try:
        # Opened here, so that it is closed also when numpy finds no npz in it.
        with open(path, 'rb') as file, numpy.load(file, allow_pickle=False) as archive:
            keys = [key for key in archive.files if key.startswith(prefix)]
            if not keys:
                raise ValueError('snapshot {!r} has no key under {!r}; its keys start '
                                 'with {}'.format(path, prefix, sorted(
                                     {key.split('/')[0] for key in archive.files})))
            return {key[len(prefix):]: archive[key] for key in keys}
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError('snapshot {!r} cannot be read as an npz file: {}'.format(
            path, error)) from error


def _torch_rule(optimizer: Any, params: list[Any]) -> torch.optim.Optimizer:
    hp = optimizer.hyperparam
    if isinstance(optimizer, chainer.optimizers.Adam):
        if hp.adabound:
            raise ValueError('optimizer: Adam with adabound=True has no torch rule here')
        return ChainerAdam(params, lr=hp.alpha, betas=(hp.beta1, hp.beta2), eps=hp.eps,
                           eta=hp.eta, weight_decay_rate=hp.weight_decay_rate,
                           amsgrad=hp.amsgrad)
    if isinstance(optimizer, chainer.optimizers.MomentumSGD):
        return ChainerMomentumSGD(params, lr=hp.lr, momentum=hp.momentum)
    if isinstance(optimizer, chainer.optimizers.SGD):
        return torch.optim.SGD(params, lr=hp.lr)
    if isinstance(optimizer, chainer.optimizers.RMSprop):
        if hp.eps_inside_sqrt:
            return ChainerRMSprop(params, lr=hp.lr, alpha=hp.alpha, eps=hp.eps,
                                  eps_inside_sqrt=True)
        return torch.optim.RMSprop(params, lr=hp.lr, alpha=hp.alpha, eps=hp.eps)
    if isinstance(optimizer, chainer.optimizers.AdaGrad):
        return torch.optim.Adagrad(params, lr=hp.lr, eps=hp.eps)
    raise TypeError('optimizer must be a Chainer SGD, MomentumSGD, Adam, RMSprop or AdaGrad, '
                    'got {}'.format(type(optimizer).__name__))


def _torch_state(torch_optimizer: torch.optim.Optimizer, state: Mapping[str, Any],
                 steps: int, param: Any) -> dict[str, Any]:
    """Chainer's state entries of one parameter under the torch rule's names."""
    def tensor(array: Any) -> Any:
        return array.to(dtype=param.dtype, device=param.device, copy=True)
    if isinstance(torch_optimizer, ChainerAdam):
        return dict({name: tensor(array) for name, array in state.items()}, step=steps)
    if isinstance(torch_optimizer, ChainerMomentumSGD):
        return {'velocity': tensor(state['v'])}
    if isinstance(torch_optimizer, ChainerRMSprop):
        return {'ms': tensor(state['ms'])}
    if isinstance(torch_optimizer, torch.optim.RMSprop):
        return {'step': torch.tensor(float(steps)), 'square_avg': tensor(state['ms'])}
    if isinstance(torch_optimizer, torch.optim.Adagrad):
        return {'step': torch.tensor(float(steps)), 'sum': tensor(state['h'])}
    return {}


def _live_state(optimizer: Any) -> dict[str, tuple[int, dict[str, Any]]]:
    """Parameter path to (its rule's step count, its state), from a set-up optimizer."""
    states = {}
    for path, param in optimizer.target.namedparams():
        rule = param.update_rule
        if not rule.enabled:
            raise ValueError('optimizer: the update rule of {} is disabled; torch has no '
                             'such rule'.format(path))
        own_hooks = rule._hookable._pre_update_hooks or rule._hookable._post_update_hooks
        if rule.hyperparam.get_dict() != optimizer.hyperparam.get_dict() or own_hooks:
            raise ValueError('optimizer: parameter {} has hyper-parameters or hooks of its '
                             'own; only the optimizer\'s are carried over'.format(path))
        states[path] = (rule.t, dict(rule.state or {}))
    return states


def _snapshot_state(arrays: Mapping[str, Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    """Parameter path to (step count, state), from a snapshot's optimizer entries."""
    states: dict[str, tuple[int, dict[str, Any]]] = {}
    for key in sorted(arrays):
        if '/' not in key:
            continue  # the optimizer's own t and epoch
        path, name = key.rsplit('/', 1)
        _, state = states.setdefault('/' + path, (0, {}))
        if name == 't':
            states['/' + path] = (int(arrays[key]), state)
        else:
            state[name] = arrays[key]
    return states


def _carried_state(module: torch.nn.Module, states: Mapping[str, tuple[int, dict[str, Any]]]
                   ) -> tuple[list[Any], dict[Any, tuple[int, dict[str, Any]]]]:
    """The parameters to optimize, and each one's (step count, state) in torch's layout.

    The weights' rules (:func:`~researchutils.pytorch.load_chainer_weights`) say which
    Chainer arrays make each torch tensor and how (the LSTM gate order ...): a state array
    has its parameter's layout, so it goes the same way.
    """
    named = dict(module.named_parameters())
    params, carried, used = [], {}, set()
    for rule in plan(module):
        if rule.torch_name not in named or not rule.chainer_names:
            continue  # a buffer, or a tensor Chainer lacks (LSTMCell's bias_hh): kept as is
        param = named[rule.torch_name]
        paths = ['/' + name for name in rule.chainer_names]
        missing = [path for path in paths if path not in states]
        if missing:
            raise ValueError('module parameter {!r} needs the optimizer state of Chainer '
                             'parameter {}, which the optimizer lacks; it has {}'.format(
                                 rule.torch_name, missing[0], sorted(states)))
        used.update(paths)
        steps = {states[path][0] for path in paths}
        if len(steps) > 1:
            raise ValueError('module parameter {!r} is made of Chainer parameters {} updated '
                             'different numbers of times: {}'.format(
                                 rule.torch_name, paths, sorted(steps)))
        state = {}
        for entry in states[paths[0]][1]:
            value = rule.combine([torch.as_tensor(numpy.array(states[path][1][entry]))
                                  for path in paths])
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError('optimizer state {}/{} makes shape {}, but module parameter '
                                 '{!r} has {}'.format(paths[0], entry, tuple(value.shape),
                                                      rule.torch_name, tuple(param.shape)))
            state[entry] = value
        params.append(param)
        carried[param] = (steps.pop(), state)
    extra = sorted(set(states) - used)
    if extra:
        raise ValueError('optimizer parameter {} fits no parameter of module; it has {}'.format(
            extra[0], sorted(named)))
    return params, carried


def _hooks(optimizer: Any) -> list[Callable[..., None]]:
    hookable = getattr(optimizer, '_hookable', None)
    if hookable is None:
        return []
    if hookable._post_update_hooks:
        raise ValueError('optimizer: hooks of timing "post" ({}) have no torch place'.format(
            ', '.join(hookable._post_update_hooks)))
    hooks: list[Callable[..., None]] = []
    for name, hook in hookable._pre_update_hooks.items():
        if isinstance(hook, chainer.optimizer_hooks.WeightDecay):
            hooks.append(WeightDecay(hook.rate))
        elif isinstance(hook, chainer.optimizer_hooks.GradientClipping):
            hooks.append(GradientClipping(hook.threshold))
        else:
            raise ValueError('optimizer: hook {!r} ({}) has no torch twin; WeightDecay and '
                             'GradientClipping have'.format(name, type(hook).__name__))
    return hooks


def from_chainer_optimizer(optimizer: Any, module: torch.nn.Module, *,
                           snapshot: str | os.PathLike[str] | None = None,
                           key: str = 'updater/optimizer:main/') -> torch.optim.Optimizer:
    """A torch optimizer over ``module`` that goes on where the Chainer ``optimizer`` stopped.

    ``module`` is the model that :func:`~researchutils.pytorch.load_chainer_weights` fills:
    its submodules carry the Chainer children's names, and each parameter's state is
    converted as its weight is (``encoder.weight`` of an ``nn.Linear`` takes the state of
    ``/encoder/W``; an ``nn.LSTMCell``'s in torch's gate order). Every Chainer parameter
    must fit one of ``module``'s, and each of ``module``'s one of Chainer's, except a tensor
    that Chainer lacks (``nn.LSTMCell``'s ``bias_hh``): it is left out of the optimizer, so
    it keeps its value, as Chainer has no such tensor to update. The optimizer's
    parameters are the others, in ``module``'s order.

    Args:
        optimizer (chainer.Optimizer): A Chainer SGD, MomentumSGD, Adam (AdamW, AMSGrad),
            RMSprop or AdaGrad: its hyper-parameters are taken as they are now. Its
            per-parameter state comes from its update rules when it is set up and
            ``snapshot`` is None. Its hooks (WeightDecay, GradientClipping), when set up,
            are registered as step pre-hooks, in Chainer's order.
        module (torch.nn.Module): The model whose parameters carry the Chainer names.
        snapshot (str or os.PathLike or None): A Trainer snapshot (or any npz) to read the
            state from instead, pickling refused.
        key (str): The optimizer's prefix in ``snapshot``.

    Returns:
        torch.optim.Optimizer: Its ``step()`` applies the hooks, then Chainer's rule.

    Raises:
        TypeError: ``optimizer`` is of another kind.
        ValueError: A hook or setting with no torch twin, or a parameter that one side lacks
            or whose state makes another shape (naming the first).

    Example:
        >>> import chainer
        >>> link = chainer.links.Linear(2, 1)
        >>> chainer_optimizer = chainer.optimizers.Adam(alpha=0.01)
        >>> _ = chainer_optimizer.setup(link)
        >>> module = torch.nn.Module()
        >>> module.W = torch.nn.Parameter(torch.as_tensor(link.W.array))
        >>> module.b = torch.nn.Parameter(torch.as_tensor(link.b.array))
        >>> type(from_chainer_optimizer(chainer_optimizer, module)).__name__
        'ChainerAdam'
    """
    if not isinstance(optimizer, chainer.Optimizer):
        raise TypeError('optimizer must be a Chainer optimizer, got {!r}'.format(optimizer))
    if not isinstance(module, torch.nn.Module):
        raise TypeError('module must be a torch.nn.Module, got {!r}'.format(module))
    key = check_str(key, 'key')
    snapshot = check_path(snapshot, 'snapshot', allow_none=True)
    if snapshot is None:
        if getattr(optimizer, 'target', None) is None:
            raise ValueError('optimizer is not set up and no snapshot is given: nothing '
                             'holds its state')
        states = _live_state(optimizer)
    else:
        states = _snapshot_state(_read_snapshot(snapshot, key))
    params, torch_states = _carried_state(module, states)
    torch_optimizer = _torch_rule(optimizer, params)
    for param, (steps, state) in torch_states.items():
        if state:
            torch_optimizer.state[param] = _torch_state(torch_optimizer, state, steps, param)
    for hook in _hooks(optimizer):
        torch_optimizer.register_step_pre_hook(hook)
    return torch_optimizer


def from_chainer_schedule(extension: Any, optimizer: torch.optim.Optimizer, *,
                          snapshot: str | os.PathLike[str] | None = None,
                          key: str | None = None) -> ExponentialShift | LinearShift:
    """The torch twin of a Chainer ExponentialShift or LinearShift, in its state.

    Chainer's Adam's ``alpha`` is ``lr`` of a :class:`~researchutils.pytorch.ChainerAdam`;
    other names stay. The schedule sets its last value at once, as Chainer's extension does
    when a resumed run starts; call its ``step()`` where the extension's trigger fired.

    Args:
        extension (chainer.training.Extension): An ExponentialShift or LinearShift, its state
            (``_t``, ``_last_value``) as now, or as in ``snapshot``.
        optimizer (torch.optim.Optimizer): The optimizer it drives (from
            :func:`from_chainer_optimizer`).
        snapshot (str or os.PathLike or None): A Trainer snapshot to read the state from.
        key (str or None): The extension's prefix in ``snapshot``; None is
            ``'extensions/<its class name>/'``, the Trainer's default.

    Returns:
        ExponentialShift or LinearShift: The schedule.

    Raises:
        TypeError: ``extension`` is of another kind.

    Example:
        >>> import chainer
        >>> shift = chainer.training.extensions.ExponentialShift('lr', 0.5, init=0.1)
        >>> layer = torch.nn.Linear(2, 1)
        >>> schedule = from_chainer_schedule(shift, torch.optim.SGD(layer.parameters(), 0.1))
        >>> schedule.step()
        >>> schedule.last_value
        0.05
    """
    extensions = chainer.training.extensions
    if not isinstance(extension, (extensions.ExponentialShift, extensions.LinearShift)):
        raise TypeError('extension must be a Chainer ExponentialShift or LinearShift, got '
                        '{!r}'.format(extension))
    key = check_str(key, 'key', allow_none=True)
    snapshot = check_path(snapshot, 'snapshot', allow_none=True)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError('optimizer must be a torch.optim.Optimizer, got {!r}'.format(optimizer))
    t, last_value = extension._t, extension._last_value
    if snapshot is not None:
        prefix = 'extensions/{}/'.format(type(extension).__name__) if key is None else key
        arrays = _read_snapshot(snapshot, prefix)
        t, last_value = int(arrays['_t']), float(arrays['_last_value'])
    attr = extension._attr
    if isinstance(optimizer, ChainerAdam):
        attr = _RENAMED_BY_ADAM.get(attr, attr)
    schedule: ExponentialShift | LinearShift
    if isinstance(extension, extensions.ExponentialShift):
        schedule = ExponentialShift(optimizer, attr, extension._rate, init=extension._init,
                                    target=extension._target)
    else:
        schedule = LinearShift(optimizer, attr, extension._value_range, extension._time_range)
    schedule.load_state_dict({'t': t, 'last_value': last_value})
    return schedule
