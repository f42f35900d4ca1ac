"""ClosureUpdater: one ``model.closure`` step per iteration, as a Chainer updater."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import chainer

from researchutils._checks import check_callable, check_mapping, check_str
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

    Raises:
        TypeError: ``iterator`` is not a Chainer iterator, ``model`` has no
            ``closure`` and ``prepare_batch``, ``optimizers`` is not a dict with a
            ``"default"`` optimizer, ``losses`` or ``metrics`` is not a dict of
            callables.
        ValueError: ``losses`` is empty, or ``device`` is not a device Chainer knows.

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
        if not isinstance(iterator, chainer.dataset.Iterator):
            raise TypeError('iterator must be a chainer.dataset.Iterator (such as '
                            'DataManager.get_iterator()), got {!r}'.format(iterator))
        for method in ('closure', 'prepare_batch'):
            if not callable(getattr(model, method, None)):
                raise TypeError('model must be an AbstractChainerNetwork (with closure and '
                                'prepare_batch), got {!r}'.format(model))
        _check_functions(losses, 'losses', allow_empty=False)
        if metrics is not None:
            _check_functions(metrics, 'metrics', allow_empty=True)
        try:
            batch_device = chainer.get_device('@numpy' if device is None else device)
        except (RuntimeError, TypeError, ValueError) as error:  # ChainerX: RuntimeError
            raise ValueError('device must be a Chainer device or its name, such as "@numpy" '
                             'or "@cupy:0", got {!r}: {}'.format(device, error)) from error
        if not isinstance(optimizers, dict) or 'default' not in optimizers:
            raise TypeError('optimizers must be a dict with a "default" optimizer, got '
                            '{!r}'.format(optimizers))
        for optimizer_name, optimizer in optimizers.items():
            # ChainerMN's multi-node optimizers wrap a chainer.Optimizer without deriving from
            # it: an object with the optimizer's update and target is taken, as Chainer's own
            # updaters take it.
            if not isinstance(optimizer, chainer.Optimizer) and not (
                    callable(getattr(optimizer, 'update', None))
                    and hasattr(optimizer, 'target')):
                raise TypeError('optimizers[{!r}] must be a chainer.Optimizer (or a wrapper of '
                                'one, such as ChainerMN\'s multi-node optimizer), got {!r}'
                                .format(optimizer_name, optimizer))
        named = {'main': optimizers['default']}
        named.update((name, optimizer) for name, optimizer in optimizers.items()
                     if name != 'default')
        super().__init__(iterator, named)
        self._model = model
        self._closure_optimizers = optimizers
        self._losses = losses
        self._metrics = {} if metrics is None else metrics
        self._batch_device = batch_device

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


def _check_functions(functions: object, name: str, allow_empty: bool) -> None:
    check_mapping(functions, name, allow_empty=allow_empty)
    assert isinstance(functions, Mapping)
    for key, function in functions.items():
        check_str(key, '{} names'.format(name))
        check_callable(function, '{}[{!r}]'.format(name, key))
