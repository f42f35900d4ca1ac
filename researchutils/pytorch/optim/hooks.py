"""Chainer's optimizer hooks as torch step pre-hooks: WeightDecay and GradientClipping.

A Chainer hook of timing ``'pre'`` changes the gradients after backward and before the
update rule; torch's :meth:`torch.optim.Optimizer.register_step_pre_hook` calls a hook at
the same moment, at the start of ``step()``, in the order registered, as Chainer does.
:func:`~researchutils.pytorch.from_chainer_optimizer` registers these for the hooks it finds;
any torch optimizer takes them::

    optimizer.register_step_pre_hook(GradientClipping(5.0))

Each acts on the gradients of every parameter of the optimizer's groups that has one.

Tests: ``tests/pytorch/optim/test_hooks.py``; against Chainer's own hooks in a run:
``tests/pytorch/optim/test_conversion.py``.
"""
from __future__ import annotations

from typing import Any

import torch

from researchutils._checks import check_float


def _gradients(optimizer: Any) -> list[tuple[Any, Any]]:
    return [(param, param.grad) for group in optimizer.param_groups
            for param in group['params'] if param.grad is not None]


class WeightDecay(object):
    """Chainer's ``WeightDecay(rate)``: ``grad += rate * param`` before the update.

    Unlike Adam's decoupled ``weight_decay_rate``, this decay passes through the update rule
    (Adam divides it by :math:`\\sqrt{v}` like the rest of the gradient), as in Chainer.

    Args:
        rate (float): Coefficient of the decay, >= 0.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        >>> handle = optimizer.register_step_pre_hook(WeightDecay(1e-4))
    """

    def __init__(self, rate: float) -> None:
        self.rate = check_float(rate, 'rate', minimum=0.0)

    @torch.no_grad()
    def __call__(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        for param, grad in _gradients(optimizer):
            grad.add_(param * self.rate)

    def __repr__(self) -> str:
        return 'WeightDecay({!r})'.format(self.rate)


class GradientClipping(object):
    """Chainer's ``GradientClipping(threshold)``: scales all gradients to an L2 norm of at most
    ``threshold``.

    The norm is taken over all gradients together; when it exceeds ``threshold`` every
    gradient is multiplied by ``threshold / norm``. torch's ``clip_grad_norm_`` divides by
    ``norm + 1e-6`` and so differs slightly; this is Chainer's rule.

    Args:
        threshold (float): The largest norm let through, > 0.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        >>> handle = optimizer.register_step_pre_hook(GradientClipping(1.0))
        >>> (100 * layer(torch.ones(1, 2))).sum().backward()
        >>> optimizer.step()  # the hook clipped the gradients first
        >>> round(float(torch.cat([p.grad.flatten() for p in layer.parameters()]).norm()), 4)
        1.0
    """

    def __init__(self, threshold: float) -> None:
        threshold = check_float(threshold, 'threshold', minimum=0.0)
        if threshold == 0:
            raise ValueError('threshold must be positive, got {!r}'.format(threshold))
        self.threshold = threshold

    @torch.no_grad()
    def __call__(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        grads = [grad for _, grad in _gradients(optimizer)]
        if not grads:
            return
        norm = float(torch.stack([(grad * grad).sum() for grad in grads]).sum().sqrt())
        rate = self.threshold / norm if norm else float('inf')
        if rate >= 1:
            return
        for grad in grads:
            grad.mul_(rate)

    def __repr__(self) -> str:
        return 'GradientClipping({!r})'.format(self.threshold)
