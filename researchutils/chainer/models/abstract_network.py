"""AbstractChainerNetwork: a Chain with a one-step training closure and batch preparation.

A network subclasses :class:`AbstractChainerNetwork`, passes its constructor arguments to
``super().__init__(**kwargs)`` and implements :meth:`~AbstractChainerNetwork.forward`, which
returns a dict (by convention ``{"pred": ...}``). :meth:`~AbstractChainerNetwork.closure` runs
one training or evaluation step on a batch made by
:meth:`~AbstractChainerNetwork.prepare_batch`.
"""
from __future__ import annotations

import abc
import functools
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import chainer
from chainer.utils import type_check

from researchutils._errors import add_note as _add_note
from researchutils._typing import Array, DeviceSpec, Variable, VariableOrArray
from researchutils.chainer._batch_arrays import send_arrays, to_float

if TYPE_CHECKING:
    import numpy

# Chainer's metaclass (an ABCMeta subclass), named so that it can be a base class: Chainer is
# Any to mypy, and mypy takes no call (type(chainer.Chain)) as a base.
_ChainMeta: Any = type(chainer.Chain)


class _AbstractChainMeta(_ChainMeta, abc.ABCMeta):
    """Chain's metaclass combined with ABCMeta, so ``forward`` can be abstract."""


def _detach(value: object) -> object:
    """Replace every Variable in ``value`` (recursing into containers) by a graph-free copy."""
    if isinstance(value, chainer.Variable):
        return chainer.Variable(value.array, requires_grad=False)
    if isinstance(value, dict):
        return {key: _detach(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_detach(item) for item in value)
    return value


def _checked_outputs(preds: object) -> dict[str, Any]:
    if not isinstance(preds, dict) or 'pred' not in preds:
        raise TypeError('the model must return a dict with a "pred" entry, got {!r}'.format(
            sorted(preds) if isinstance(preds, dict) else type(preds).__name__))
    return preds


def _as_device(device: DeviceSpec, argument: str) -> chainer.backend.Device:
    try:
        return chainer.get_device(device)
    except Exception as error:
        raise ValueError('{} is not a device: {!r} ({})'.format(argument, device, error)) from error


def _integer_targets(pred: VariableOrArray, targets: Mapping[str, Array]
                     ) -> list[tuple[str, numpy.dtype[Any]]]:
    """The ``(key, dtype)`` of integer targets when ``pred`` is floating, else ``[]``."""
    pred_dtype = getattr(pred, 'dtype', None)
    if pred_dtype is None or pred_dtype.kind != 'f':
        return []
    return [(key, value.dtype) for key, value in targets.items()
            if getattr(value, 'dtype', None) is not None and value.dtype.kind in 'biu']


def _call_all(functions: Mapping[str, Callable[..., Any]], kind: str, pred: Variable,
              targets: Mapping[str, Array]) -> dict[str, Any]:
    """Call each function with ``pred`` and the ``targets`` dict's values; a failure notes
    which function."""
    results = {}
    for name, function in functions.items():
        try:
            results[name] = function(pred, *targets.values())
        except type_check.InvalidType as error:
            integer = _integer_targets(pred, targets)
            if not integer:
                _add_note(error, 'raised by {} {!r}'.format(kind, name))
                raise
            # Delira cast every entry to float32; here integer labels stay integer (for
            # softmax_cross_entropy), so say what to change rather than Chainer's dtype check.
            raise TypeError(
                '{} {!r} refused the batch: the prediction is {} but {}. A {} that compares '
                'values (mean_absolute_error, mean_squared_error...) needs labels of the '
                "prediction's dtype: return them as numpy.float32 from the dataset, or cast "
                "them in transforms (batch[key].astype(numpy.float32)). Integer labels stay "
                'integer for softmax_cross_entropy and accuracy.'.format(
                    kind, name, pred.dtype,
                    ' and '.join('batch[{!r}] is {}'.format(key, dtype)
                                 for key, dtype in integer), kind)) from error
        except Exception as error:
            _add_note(error, 'raised by {} {!r}'.format(kind, name))
            raise
    return results


class AbstractChainerNetwork(chainer.Chain, metaclass=_AbstractChainMeta):
    """Base class of networks trained by a one-step closure (Delira's Chainer network).

    Subclasses pass their constructor's keyword arguments to ``super().__init__`` and implement
    :meth:`forward`. The arguments are kept per instance in :attr:`init_kwargs`, so a saved
    experiment can rebuild the network with ``type(net)(**net.init_kwargs)``.

    Args:
        **kwargs: The keyword arguments the network was built with.

    Example:
        >>> import chainer.functions as F
        >>> import chainer.links as L
        >>> import numpy as np
        >>> class Classifier(AbstractChainerNetwork):
        ...     def __init__(self, n_out=3):
        ...         super().__init__(n_out=n_out)
        ...         with self.init_scope():
        ...             self.fc = L.Linear(None, n_out)
        ...     def forward(self, x):
        ...         return {'pred': self.fc(x)}
        >>> net = Classifier(n_out=2)
        >>> net.init_kwargs
        {'n_out': 2}
        >>> batch = AbstractChainerNetwork.prepare_batch(
        ...     {'data': np.ones((4, 5)), 'label': np.array([0, 1, 1, 0])}, '@numpy', '@numpy')
        >>> optimizer = chainer.optimizers.SGD(lr=0.1).setup(net)
        >>> metric_vals, loss_vals, preds = AbstractChainerNetwork.closure(
        ...     net, batch, {'default': optimizer},
        ...     losses={'ce': F.softmax_cross_entropy}, metrics={'acc': F.accuracy})
        >>> sorted(loss_vals), preds['pred'].shape
        (['ce'], (4, 2))
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._init_kwargs = dict(kwargs)

    @property
    def init_kwargs(self) -> dict[str, Any]:
        """dict: A copy of the keyword arguments this instance was built with."""
        return dict(self._init_kwargs)

    @abc.abstractmethod
    def forward(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Compute the network's outputs.

        Returns:
            dict: The results, by convention ``{"pred": prediction}``; :meth:`closure` reads
            ``"pred"``.
        """

    @staticmethod
    def closure(model: chainer.Link, data_dict: dict[str, Array],
                optimizers: Mapping[str, chainer.Optimizer] | None,
                losses: Mapping[str, Callable[..., Any]] | None = {},  # noqa: B006
                metrics: Mapping[str, Callable[..., Any]] | None = {},  # noqa: B006
                fold: int = 0, **kwargs: Any
                ) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
        """Run one training step (with optimizers) or one evaluation step (without).

        ``data_dict["data"]`` goes to ``model``; each loss and metric function is called as
        ``function(preds["pred"], *others)``, where ``others`` are the remaining values of
        ``data_dict`` in their order. With ``optimizers`` the step runs in training mode: the
        losses are summed, the gradients cleared, the sum backpropagated (scaled by the
        optimizer's loss scale, if one is set) and ``optimizers["default"].update()`` called.
        Without optimizers (``None`` or empty) it runs under
        ``chainer.using_config('train', False)`` and ``chainer.no_backprop_mode()`` and touches
        no parameter. The default ``{}`` arguments are never modified.

        Args:
            model (chainer.Link): The network; called with ``data_dict["data"]``, returns a dict
                with a ``"pred"`` entry.
            data_dict (dict): The batch, as made by :meth:`prepare_batch`.
            optimizers (dict or None): ``{"default": optimizer}`` to train; ``None`` or ``{}``
                to evaluate.
            losses (dict): Name to loss function returning a scalar Variable. Training needs
                at least one.
            metrics (dict): Name to metric function returning a scalar (Variable, array or
                number).
            fold (int): The cross-validation fold; unused here, kept for subclasses.
            **kwargs: Unused here, kept for subclasses.

        Returns:
            tuple: ``(metric_vals, loss_vals, preds)``: dicts of Python floats keyed like
            ``metrics`` and ``losses``, and the model's outputs with every Variable replaced by
            a graph-free Variable (no creator, ``requires_grad=False``).

        Example:
            >>> import chainer.functions as F
            >>> import chainer.links as L
            >>> import numpy as np
            >>> class Regressor(AbstractChainerNetwork):
            ...     def __init__(self):
            ...         super().__init__()
            ...         with self.init_scope():
            ...             self.fc = L.Linear(3, 1)
            ...     def forward(self, x):
            ...         return {'pred': self.fc(x)}
            >>> net = Regressor()
            >>> batch = {'data': np.ones((2, 3), np.float32), 'y': np.zeros((2, 1), np.float32)}
            >>> metric_vals, loss_vals, preds = AbstractChainerNetwork.closure(
            ...     net, batch, None, losses={'mse': F.mean_squared_error})
            >>> isinstance(loss_vals['mse'], float)
            True
        """
        if not isinstance(data_dict, dict) or 'data' not in data_dict:
            raise ValueError('data_dict must be a dict with a "data" entry, got {!r}'.format(
                type(data_dict).__name__ if not isinstance(data_dict, dict)
                else sorted(data_dict)))
        losses = {} if losses is None else losses
        metrics = {} if metrics is None else metrics
        targets = {key: value for key, value in data_dict.items() if key != 'data'}
        if optimizers:
            if 'default' not in optimizers:
                raise ValueError('optimizers needs a "default" entry, got keys {!r}'.format(
                    sorted(optimizers)))
            if not losses:
                raise ValueError('losses must hold at least one loss to train, got {!r}'.format(
                    losses))
            with chainer.using_config('train', True):
                preds = _checked_outputs(model(data_dict['data']))
                loss_vars = _call_all(losses, 'loss', preds['pred'], targets)
                with chainer.no_backprop_mode():
                    metric_results = _call_all(metrics, 'metric', preds['pred'], targets)
            total = functools.reduce(operator.add, loss_vars.values())
            optimizer = optimizers['default']
            model.cleargrads()
            # As Optimizer.update(lossfun) does; the update rules divide by the same scale.
            total.backward(loss_scale=getattr(optimizer, '_loss_scale', None))
            optimizer.update()
        else:
            with chainer.using_config('train', False), chainer.no_backprop_mode():
                preds = _checked_outputs(model(data_dict['data']))
                loss_vars = _call_all(losses, 'loss', preds['pred'], targets)
                metric_results = _call_all(metrics, 'metric', preds['pred'], targets)
        loss_vals = {name: to_float(value, 'loss', name) for name, value in loss_vars.items()}
        metric_vals = {name: to_float(value, 'metric', name)
                       for name, value in metric_results.items()}
        return metric_vals, loss_vals, {key: _detach(item) for key, item in preds.items()}

    @staticmethod
    def prepare_batch(batch: dict[str, VariableOrArray], input_device: DeviceSpec,
                      output_device: DeviceSpec) -> dict[str, Array]:
        """Convert a batch of arrays for :meth:`closure` and move it to the devices.

        ``batch["data"]`` goes to ``input_device``, every other entry to ``output_device``.
        Floating arrays become float32; integer and boolean arrays keep their dtype, so integer
        labels work with ``softmax_cross_entropy``. (Delira cast every entry to float32; a loss
        that compares values, such as ``mean_absolute_error``, given integer labels makes
        :meth:`closure` raise a ``TypeError`` that says to return float labels.)

        Args:
            batch (dict): Name to array (NumPy or CuPy, or anything ``numpy.asarray``
                accepts); must hold ``"data"``.
            input_device: Where ``"data"`` goes; anything ``chainer.get_device`` accepts
                (``'@numpy'``, ``'@cupy:0'``, a :class:`chainer.backend.Device`).
            output_device: Where the other entries go.

        Returns:
            dict: The same keys, mapped to arrays on the devices.

        Example:
            >>> import numpy as np
            >>> batch = AbstractChainerNetwork.prepare_batch(
            ...     {'data': np.zeros((2, 3)), 'label': np.array([1, 0])}, '@numpy', '@numpy')
            >>> batch['data'].dtype, batch['label'].dtype.kind
            (dtype('float32'), 'i')
        """
        if not isinstance(batch, dict):
            raise TypeError('batch must be a dict of arrays, got {!r}'.format(
                type(batch).__name__))
        if 'data' not in batch:
            raise ValueError('batch must hold a "data" entry, got keys {!r}'.format(
                sorted(batch)))
        return send_arrays(batch, {'data': _as_device(input_device, 'input_device')},
                           _as_device(output_device, 'output_device'))
