"""ClosureUpdater: one ``model.closure`` step per iteration, as a Chainer updater."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import chainer

from researchutils._typing import DeviceSpec

if TYPE_CHECKING:
    from researchutils.chainer.models import AbstractChainerNetwork


class ClosureUpdater(chainer.training.updaters.StandardUpdater):
    """Trains an AbstractChainerNetwork by calling its ``closure`` once per batch.

    Each iteration takes the next batch dict from ``iterator``, prepares it
    with ``model.prepare_batch(batch, device, device)`` and runs
    ``model.closure(model, batch, optimizers, losses, metrics)``, which
    computes the losses, back-propagates and updates. The losses and metrics
    are reported as ``main/<name>``. ``optimizers["default"]`` is the
    updater's ``"main"`` optimizer (the one snapshots and ``observe_lr``
    find); the others keep their names.

    Args:
        iterator (chainer.dataset.Iterator): Gives batch dicts, such as
            :meth:`DataManager.get_iterator
            <researchutils.chainer.data_loading.DataManager.get_iterator>`'s.
        model (AbstractChainerNetwork): The model; anything with ``closure``
            and ``prepare_batch``.
        optimizers (dict): Name to optimizer set up on ``model``, with a
            ``"default"`` one.
        losses (dict): Name to loss function on backend arrays.
        metrics (dict or None): Name to metric function run in the closure.
        device: Where the batches go (a Chainer device or its name); None:
            ``'@numpy'``.

    Example:
        >>> import chainer.functions as F
        >>> import chainer.links as L
        >>> import numpy as np
        >>> from researchutils.chainer.data_loading import DataManager
        >>> from researchutils.chainer.models import AbstractChainerNetwork
        >>> class Net(AbstractChainerNetwork):
        ...     def __init__(self):
        ...         super().__init__()
        ...         with self.init_scope():
        ...             self.fc = L.Linear(3, 1)
        ...     def forward(self, x):
        ...         return {'pred': self.fc(x)}
        >>> data = [{'data': np.ones(3, np.float32), 'label': np.ones(1, np.float32)}] * 8
        >>> model = Net()
        >>> updater = ClosureUpdater(
        ...     DataManager(data, 4).get_iterator(), model,
        ...     {'default': chainer.optimizers.SGD(lr=0.1).setup(model)},
        ...     {'MSE': F.mean_squared_error})
        >>> trainer = chainer.training.Trainer(updater, (2, 'epoch'), out='.')
        >>> trainer.run()
        >>> updater.iteration
        4
    """

    def __init__(self, iterator: chainer.dataset.Iterator, model: AbstractChainerNetwork,
                 optimizers: dict[str, chainer.Optimizer],
                 losses: Mapping[str, Callable[..., Any]],
                 metrics: Mapping[str, Callable[..., Any]] | None = None,
                 device: DeviceSpec | None = None) -> None:
        if not isinstance(optimizers, dict) or 'default' not in optimizers:
            raise TypeError('optimizers must be a dict with a "default" optimizer, got '
                            '{!r}'.format(optimizers))
        named = {'main': optimizers['default']}
        named.update((name, optimizer) for name, optimizer in optimizers.items()
                     if name != 'default')
        super().__init__(iterator, named)
        self._model = model
        self._closure_optimizers = optimizers
        self._losses = losses
        self._metrics = {} if metrics is None else metrics
        self._batch_device = chainer.get_device('@numpy' if device is None else device)

    def update_core(self) -> None:
        iterator = self._iterators['main']
        batch = self._model.prepare_batch(iterator.next(), self._batch_device,
                                          self._batch_device)
        metric_vals, loss_vals, _ = self._model.closure(
            self._model, batch, self._closure_optimizers, self._losses, self._metrics)
        observation = {'main/' + name: value for name, value in loss_vals.items()}
        observation.update(('main/' + name, value) for name, value in metric_vals.items())
        chainer.reporter.report(observation)
        if iterator.is_new_epoch:
            for optimizer in self._optimizers.values():
                optimizer.new_epoch(auto=True)
