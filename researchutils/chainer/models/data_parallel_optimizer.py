"""The optimizer of data-parallel training in one process, and its two hooks.

:class:`DataParallelChainerOptimizer` wraps any :class:`chainer.Optimizer` so that it trains a
:class:`~researchutils.chainer.models.DataParallelChainerNetwork` as the plain optimizer would
train its module on the full batch: before each update
:class:`ParallelOptimizerCumulateGradientsHook` sums the replicas' gradients into the master,
after it :class:`ParallelOptimizerUpdateModelParameters` brings the replicas to the master.
Every other attribute reads and writes through to the wrapped optimizer, so Chainer's updaters,
schedulers and snapshots see the optimizer itself. Delira's path,
``researchutils.chainer.models.data_parallel``, gives these names too.

Tests: ``tests/chainer/models/test_data_parallel_optimizer.py``.
"""
from __future__ import annotations

from typing import Any, Self

import chainer


class ParallelOptimizerCumulateGradientsHook(object):
    """Optimizer hook that adds every replica's gradients into the master's (before update).

    Registered by :meth:`DataParallelChainerOptimizer.setup`; its target must be a
    :class:`~researchutils.chainer.models.DataParallelChainerNetwork`. Replicas that took no
    part in the step (gradient ``None``) are skipped.

    Example:
        >>> hook = ParallelOptimizerCumulateGradientsHook()
        >>> hook.name, hook.timing, hook.call_for_each_param
        ('DataParallelCumulateGradients', 'pre', False)
    """

    name = 'DataParallelCumulateGradients'
    timing = 'pre'
    call_for_each_param = False

    def __call__(self, optimizer: chainer.Optimizer) -> None:
        optimizer.target.cumulate_gradients()


class ParallelOptimizerUpdateModelParameters(object):
    """Optimizer hook that brings the replicas to the master after the update.

    Replicas on the master's device share its parameter arrays, so they hold the updated
    parameters at once; persistent values (BatchNormalization's running averages) are copied
    to every replica. Replicas on other devices get the parameters at the start of the next
    forward, which copies them anyway, so a step transfers them once. Registered by
    :meth:`DataParallelChainerOptimizer.setup`.

    Example:
        >>> hook = ParallelOptimizerUpdateModelParameters()
        >>> hook.name, hook.timing, hook.call_for_each_param
        ('DataParallelUpdateModelParameters', 'post', False)
    """

    name = 'DataParallelUpdateModelParameters'
    timing = 'post'
    call_for_each_param = False

    def __call__(self, optimizer: chainer.Optimizer) -> None:
        optimizer.target._synchronize(across_devices=False)


_OWN_ATTRIBUTES = frozenset(['_optimizer', 'optimizer', 'setup', 'from_optimizer_class'])


class DataParallelChainerOptimizer(chainer.Optimizer):
    """Wrap a :class:`chainer.Optimizer` to train a
    :class:`~researchutils.chainer.models.DataParallelChainerNetwork`.

    Every attribute and method but :meth:`setup` is the wrapped optimizer's (``update``,
    ``target``, ``t``, ``epoch``, ``new_epoch``, ``lr`` / ``alpha``, ``hyperparam``,
    ``serialize``, ``add_hook``, loss scaling, ...), read and written through, so Chainer's
    updaters and extensions (ExponentialShift, snapshot) treat it as the optimizer itself, and
    its snapshots are those of the plain optimizer. :meth:`setup` also registers
    :class:`ParallelOptimizerCumulateGradientsHook` and
    :class:`ParallelOptimizerUpdateModelParameters` as the first hooks, so hooks added later
    (weight decay, gradient clipping) see the summed gradients. The hooks a user adds run after
    the replicas were updated: a ``'post'`` hook that changes parameters changes the master
    only until the next update.

    With dynamic loss scaling, the NaN check of the wrapped optimizer runs before the
    gradients are summed, so it sees the master's gradients only.

    Args:
        optimizer (chainer.Optimizer): The optimizer to wrap, not yet set up.

    Example:
        >>> import chainer.links as L
        >>> from researchutils.chainer.models import DataParallelChainerNetwork
        >>> model = DataParallelChainerNetwork(L.Linear(3, 2), ['@numpy', '@numpy'])
        >>> optimizer = DataParallelChainerOptimizer(chainer.optimizers.MomentumSGD(lr=0.1))
        >>> optimizer.setup(model) is optimizer
        True
        >>> optimizer.lr = 0.05
        >>> optimizer.optimizer.lr
        0.05
    """

    def __init__(self, optimizer: chainer.Optimizer) -> None:
        if not isinstance(optimizer, chainer.Optimizer) or isinstance(
                optimizer, DataParallelChainerOptimizer):
            raise TypeError('optimizer must be a chainer.Optimizer, got {!r}'.format(
                type(optimizer).__name__))
        object.__setattr__(self, '_optimizer', optimizer)

    def __getattribute__(self, name: str) -> Any:
        if name in _OWN_ATTRIBUTES or (name.startswith('__') and name.endswith('__')):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, '_optimizer'), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._optimizer, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._optimizer, name)

    def __repr__(self) -> str:
        return '{}({!r})'.format(type(self).__name__, self._optimizer)

    @property
    def optimizer(self) -> chainer.Optimizer:
        """chainer.Optimizer: The wrapped optimizer."""
        return self._optimizer

    @classmethod
    def from_optimizer_class(cls, optim_cls: type[chainer.Optimizer], *args: Any,
                             **kwargs: Any) -> Self:
        """Build the wrapped optimizer as ``optim_cls(*args, **kwargs)`` and wrap it.

        Args:
            optim_cls (type): A :class:`chainer.Optimizer` subclass.
            *args: Its constructor's positional arguments.
            **kwargs: Its constructor's keyword arguments.

        Returns:
            DataParallelChainerOptimizer: The wrapper, not yet set up.

        Example:
            >>> optimizer = DataParallelChainerOptimizer.from_optimizer_class(
            ...     chainer.optimizers.Adam, alpha=1e-3)
            >>> optimizer.alpha
            0.001
        """
        if not (isinstance(optim_cls, type) and issubclass(optim_cls, chainer.Optimizer)):
            raise TypeError('optim_cls must be a chainer.Optimizer subclass, got {!r}'.format(
                optim_cls))
        return cls(optim_cls(*args, **kwargs))

    def setup(self, link: chainer.Link) -> Self:
        """Set up the wrapped optimizer on ``link`` and register the data-parallel hooks.

        Args:
            link (DataParallelChainerNetwork): The network to train.

        Raises:
            TypeError: ``link`` is not a DataParallelChainerNetwork.

        Returns:
            DataParallelChainerOptimizer: This wrapper.
        """
        # The network's own methods, not its class: this module does not import the network's,
        # which imports this one (the optimizer's names are importable from there too).
        if not (isinstance(link, chainer.Link)
                and callable(getattr(link, 'cumulate_gradients', None))):
            raise TypeError('link must be a DataParallelChainerNetwork, got {!r}'.format(
                type(link).__name__))
        optimizer = self._optimizer
        optimizer.setup(link)  # starts with no hooks, so each is registered once
        optimizer.add_hook(ParallelOptimizerCumulateGradientsHook())
        optimizer.add_hook(ParallelOptimizerUpdateModelParameters())
        return self
