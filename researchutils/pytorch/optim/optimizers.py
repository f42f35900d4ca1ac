"""Chainer's update rules that torch has no exact twin for, as ``torch.optim.Optimizer``.

torch's SGD, RMSprop (eps outside the square root) and Adagrad compute exactly what
Chainer's SGD, RMSprop and AdaGrad compute, and
:func:`~researchutils.pytorch.from_chainer_optimizer` returns them. Three rules
differ, and live here:

- Chainer's MomentumSGD keeps the learning rate inside its velocity
  (``v = momentum * v - lr * g; p += v``); torch's SGD keeps it outside
  (``b = momentum * b + g; p -= lr * b``). The two agree only while ``lr`` never changes,
  so a schedule on ``lr`` would part them.
- Chainer's Adam adds ``eps`` to ``sqrt(v)`` and then scales by the bias-corrected
  ``alpha_t``; torch adds ``eps`` after the bias correction of ``v``. It also has ``eta``
  (a multiplier of the whole step, for schedules) and ``weight_decay_rate`` (decoupled,
  scaled by ``eta`` but not by ``alpha``), which torch's AdamW spells differently.
- Chainer's RMSprop may put ``eps`` inside the square root (``eps_inside_sqrt=True``).

Each keeps its hyper-parameters in the param group under torch's name where torch has one
(``lr`` is Adam's ``alpha``, ``betas`` its ``beta1, beta2``), so torch's learning-rate
schedulers drive them too, and under Chainer's name otherwise (``eta``,
``weight_decay_rate``, ``eps_inside_sqrt``). Per-parameter state keeps Chainer's names
(``velocity`` is MomentumSGD's ``v``; Adam's ``m``, ``v``, ``vhat`` and ``step``, its ``t``).
The tutorial ``docs/tutorials/pytorch.rst`` shows why the rules differ.

Tests: ``tests/pytorch/optim/test_optimizers.py``; against Chainer's own updates in a run:
``tests/pytorch/optim/test_conversion.py``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from researchutils._checks import check_bool, check_float, check_non_negative_float

_Params = Iterable[Any]


def _check_betas(betas: object) -> tuple[float, float]:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError('betas must be a pair (beta1, beta2), got {!r}'.format(betas))
    return (check_float(betas[0], 'betas[0]', minimum=0.0, maximum=1.0),
            check_float(betas[1], 'betas[1]', minimum=0.0, maximum=1.0))


def _closure_loss(closure: Callable[[], Any] | None) -> Any:
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class ChainerMomentumSGD(torch.optim.Optimizer):
    """Chainer's MomentumSGD: ``v = momentum * v - lr * grad; param += v``.

    The learning rate sits inside the velocity, as in Chainer, so a change of ``lr`` (a
    schedule) acts on the next step only, not on the momentum already gathered.

    Args:
        params (iterable): Parameters or param groups, as for any torch optimizer.
        lr (float): Learning rate, >= 0.
        momentum (float): Decay of the velocity, in [0, 1].

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = ChainerMomentumSGD(layer.parameters(), lr=0.1, momentum=0.9)
        >>> layer(torch.ones(1, 2)).sum().backward()
        >>> optimizer.step()
        >>> sorted(optimizer.state[layer.bias])
        ['velocity']
    """

    def __init__(self, params: _Params, lr: float = 0.01, momentum: float = 0.9) -> None:
        defaults = {'lr': check_non_negative_float(lr, 'lr'),
                    'momentum': check_float(momentum, 'momentum', minimum=0.0, maximum=1.0)}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Updates every parameter that has a gradient; returns ``closure()``'s loss."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            for param in group['params']:
                if param.grad is None:
                    continue
                state = self.state[param]
                if 'velocity' not in state:
                    state['velocity'] = torch.zeros_like(param)
                velocity = state['velocity']
                velocity.mul_(group['momentum'])
                velocity.sub_(param.grad * group['lr'])
                param.add_(velocity)
        return loss


class ChainerAdam(torch.optim.Optimizer):
    """Chainer's Adam (with AMSGrad and decoupled weight decay, as ``chainer.optimizers.Adam``).

    For each parameter with gradient ``g``, at its step ``t`` (counted from 1):

    .. math::

        m &\\leftarrow m + (1 - \\beta_1)(g - m), \\quad
        v \\leftarrow v + (1 - \\beta_2)(g^2 - v), \\quad
        \\hat v \\leftarrow \\max(\\hat v, v) \\text{ (AMSGrad; else } \\hat v = v) \\\\
        \\alpha_t &= \\alpha \\sqrt{1 - \\beta_2^t} / (1 - \\beta_1^t) \\\\
        p &\\leftarrow p - \\eta \\left(\\frac{\\alpha_t\\, m}{\\sqrt{\\hat v} + \\epsilon}
            + \\lambda p\\right)

    with :math:`\\lambda` the ``weight_decay_rate``. torch's Adam divides by
    :math:`\\sqrt{\\hat v / (1 - \\beta_2^t)} + \\epsilon` instead: the same up to where
    ``eps`` stands, which matters early in a run and wherever ``v`` is small.

    Args:
        params (iterable): Parameters or param groups.
        lr (float): Chainer's ``alpha``, >= 0.
        betas (tuple of float): Chainer's ``(beta1, beta2)``, each in [0, 1].
        eps (float): Added to :math:`\\sqrt{\\hat v}`, >= 0.
        eta (float): Multiplier of the whole step (schedules use it), >= 0.
        weight_decay_rate (float): Decoupled weight decay :math:`\\lambda`, >= 0.
        amsgrad (bool): Use AMSGrad's running maximum :math:`\\hat v`.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = ChainerAdam(layer.parameters(), lr=1e-3, amsgrad=True)
        >>> layer(torch.ones(1, 2)).sum().backward()
        >>> optimizer.step()
        >>> sorted(optimizer.state[layer.bias]), optimizer.state[layer.bias]['step']
        (['m', 'step', 'v', 'vhat'], 1)
    """

    def __init__(self, params: _Params, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 eta: float = 1.0, weight_decay_rate: float = 0.0,
                 amsgrad: bool = False) -> None:
        defaults = {'lr': check_non_negative_float(lr, 'lr'), 'betas': _check_betas(betas),
                    'eps': check_non_negative_float(eps, 'eps'),
                    'eta': check_non_negative_float(eta, 'eta'),
                    'weight_decay_rate': check_non_negative_float(
                        weight_decay_rate, 'weight_decay_rate'),
                    'amsgrad': check_bool(amsgrad, 'amsgrad')}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Updates every parameter that has a gradient; returns ``closure()``'s loss."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group['betas']
            for param in group['params']:
                if param.grad is None:
                    continue
                self._update(param, param.grad, group, beta1, beta2)
        return loss

    def _update(self, param: Any, grad: Any, group: dict[str, Any], beta1: float,
                beta2: float) -> None:
        state = self.state[param]
        if 'step' not in state:
            state.update(step=0, m=torch.zeros_like(param), v=torch.zeros_like(param))
            if group['amsgrad']:
                state['vhat'] = torch.zeros_like(param)
        state['step'] += 1
        m, v = state['m'], state['v']
        m.add_((grad - m) * (1.0 - beta1))
        v.add_((grad * grad - v) * (1.0 - beta2))
        if group['amsgrad']:
            vhat = state['vhat']
            torch.maximum(vhat, v, out=vhat)
        else:
            vhat = v
        t = state['step']
        alpha_t = group['lr'] * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
        update = alpha_t / (vhat.sqrt() + group['eps']) * m
        eta, decay = group['eta'], group['weight_decay_rate']
        if eta * decay != 0:
            param.mul_(1.0 - eta * decay)
        param.sub_(update * eta)


class ChainerRMSprop(torch.optim.Optimizer):
    """Chainer's RMSprop: ``ms = alpha * ms + (1 - alpha) * g**2; p -= lr * g / denominator``.

    The denominator is ``sqrt(ms) + eps``, as torch's RMSprop has it (and
    :func:`~researchutils.pytorch.from_chainer_optimizer` then returns torch's), or
    ``sqrt(ms + eps)`` with ``eps_inside_sqrt=True``, which torch lacks.

    Args:
        params (iterable): Parameters or param groups.
        lr (float): Learning rate, >= 0.
        alpha (float): Decay of the mean square ``ms``, in [0, 1].
        eps (float): Keeps the denominator away from 0, >= 0.
        eps_inside_sqrt (bool): Put ``eps`` inside the square root.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = ChainerRMSprop(layer.parameters(), lr=0.01, eps_inside_sqrt=True)
        >>> layer(torch.ones(1, 2)).sum().backward()
        >>> optimizer.step()
        >>> sorted(optimizer.state[layer.bias])
        ['ms']
    """

    def __init__(self, params: _Params, lr: float = 0.01, alpha: float = 0.99,
                 eps: float = 1e-8, eps_inside_sqrt: bool = False) -> None:
        defaults = {'lr': check_non_negative_float(lr, 'lr'),
                    'alpha': check_float(alpha, 'alpha', minimum=0.0, maximum=1.0),
                    'eps': check_non_negative_float(eps, 'eps'),
                    'eps_inside_sqrt': check_bool(eps_inside_sqrt, 'eps_inside_sqrt')}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Updates every parameter that has a gradient; returns ``closure()``'s loss."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            alpha, eps = group['alpha'], group['eps']
            for param in group['params']:
                if param.grad is None:
                    continue
                grad = param.grad
                state = self.state[param]
                if 'ms' not in state:
                    state['ms'] = torch.zeros_like(param)
                ms = state['ms']
                ms.mul_(alpha).add_(grad * (1.0 - alpha) * grad)
                if group['eps_inside_sqrt']:
                    denominator = (ms + eps).sqrt()
                else:
                    denominator = ms.sqrt() + eps
                param.sub_(grad * group['lr'] / denominator)
        return loss
