"""Predictor: a model's predictions and NumPy metrics, batch by batch, in test mode."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import chainer
import numpy
from chainer import backend

from researchutils._errors import add_note as _add_note
from researchutils._typing import Array, VariableOrArray
from researchutils.chainer._batch_arrays import send_arrays, to_float

if TYPE_CHECKING:
    from researchutils.chainer.data_loading import DataManager


def convert_to_numpy(value: Any) -> Any:
    """Returns ``value`` with every Variable and device array as a NumPy array.

    Recurses into dicts, lists and tuples; other values are returned as they are.

    Args:
        value: A model's output.

    Returns:
        The same structure holding NumPy arrays.

    Example:
        >>> convert_to_numpy({"pred": chainer.Variable(numpy.ones(2, numpy.float32))})
        {'pred': array([1., 1.], dtype=float32)}
    """
    if isinstance(value, chainer.Variable):
        value = value.array
    if isinstance(value, dict):
        return {key: convert_to_numpy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(convert_to_numpy(item) for item in value)
    if backend.get_array_module(value) is not numpy:
        return backend.CpuDevice().send(value)
    return value


def _batch_length(batch: Mapping[str, Array]) -> int:
    for value in batch.values():
        return len(value)
    raise ValueError('a batch must hold at least one array')


def _concatenate(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Joins a list of per-batch output dicts (nested dicts allowed) along axis 0."""
    joined: dict[str, Any] = {}
    for key, first in outputs[0].items():
        parts = [output[key] for output in outputs]
        if isinstance(first, dict):
            joined[key] = _concatenate(parts)
        else:
            # A scalar output (one value per batch) becomes one row per batch.
            joined[key] = numpy.concatenate([numpy.reshape(part, (-1,) + numpy.shape(part)[1:])
                                             for part in parts])
    return joined


class Predictor(object):
    """Predicts with a model in test mode, without a graph, from batches or a DataManager.

    The model is called as ``model(**{arg: batch[key] for arg, key in
    key_mapping.items()})`` under ``chainer.using_config('train', False)`` and
    ``chainer.no_backprop_mode()``. A model returning a dict (an
    :class:`~researchutils.chainer.models.AbstractChainerNetwork`) gives that
    dict; any other output is returned as ``{"pred": output}``.

    Args:
        model (chainer.Link): Any Chain.
        key_mapping (dict): Model argument name to batch key, e.g.
            ``{"x": "data"}``.
        convert_batch_to_npy_fn (callable): Turns the model's output dict into
            a dict of NumPy arrays (default :func:`convert_to_numpy`).
        prepare_batch_fn (callable or None): Gets the dict of the batch entries
            named in ``key_mapping`` and returns it ready for the model. By
            default they are prepared as
            :meth:`~researchutils.chainer.models.AbstractChainerNetwork.prepare_batch`
            prepares a training batch (floating arrays as float32, integer
            ones kept, anything else refused) and sent to the model's device.

    Example:
        >>> import chainer.links as L
        >>> predictor = Predictor(L.Linear(3, 2), {"x": "data"})
        >>> predictor.predict({"data": numpy.ones((4, 3))})["pred"].shape
        (4, 2)
    """

    def __init__(
            self, model: chainer.Link, key_mapping: dict[str, str],
            convert_batch_to_npy_fn: Callable[[dict[str, Any]], dict[str, Any]] = convert_to_numpy,
            prepare_batch_fn: Callable[[dict[str, Array]], Mapping[str, VariableOrArray]] | None
            = None) -> None:
        if not isinstance(model, chainer.Link):
            raise TypeError('model must be a chainer.Link, got {!r}'.format(type(model).__name__))
        if (not isinstance(key_mapping, dict) or not key_mapping
                or not all(isinstance(k, str) and isinstance(v, str)
                           for k, v in key_mapping.items())):
            raise ValueError('key_mapping must be a non-empty dict from model argument names to '
                             'batch keys, e.g. {{"x": "data"}}, got {!r}'.format(key_mapping))
        if not callable(convert_batch_to_npy_fn):
            raise TypeError('convert_batch_to_npy_fn must be callable, got {!r}'.format(
                convert_batch_to_npy_fn))
        if prepare_batch_fn is not None and not callable(prepare_batch_fn):
            raise TypeError('prepare_batch_fn must be callable or None, got {!r}'.format(
                prepare_batch_fn))
        self.model = model
        self.key_mapping = dict(key_mapping)
        self.convert_batch_to_npy_fn = convert_batch_to_npy_fn
        self.prepare_batch_fn = prepare_batch_fn or self._send_to_model_device

    def _send_to_model_device(self, batch: Mapping[str, VariableOrArray]) -> dict[str, Array]:
        return send_arrays(batch, {}, self.model.device)

    def check_batch_keys(self, keys: Iterable[str]) -> None:
        """Raises if a batch with ``keys`` lacks an entry that ``key_mapping`` names.

        Args:
            keys (iterable of str): The keys of the batches to predict on.

        Raises:
            KeyError: The message names the missing key and the batch keys.

        Example:
            >>> import chainer.links as L
            >>> try:
            ...     Predictor(L.Linear(3, 2), {"x": "image"}).check_batch_keys(["data"])
            ... except KeyError as error:
            ...     print("batch key 'image'" in str(error))
            True
        """
        keys = list(keys)
        for key in self.key_mapping.values():
            if key not in keys:
                raise KeyError('key_mapping {!r} names the batch key {!r}, but the batches have '
                               'the keys {}: fix key_mapping'.format(self.key_mapping, key, keys))

    def predict(self, batch: Mapping[str, Array]) -> dict[str, Any]:
        """Returns the model's predictions for one batch, as a dict of NumPy arrays.

        Args:
            batch (dict): Batch key to array, arrays stacked along axis 0.

        Returns:
            dict: Output name to NumPy array.

        Example:
            >>> import chainer.links as L
            >>> out = Predictor(L.Linear(2, 1), {"x": "data"}).predict({"data": numpy.ones((3, 2))})
            >>> type(out["pred"]).__name__
            'ndarray'
        """
        self.check_batch_keys(batch)
        inputs = self.prepare_batch_fn({key: batch[key] for key in set(self.key_mapping.values())})
        with chainer.using_config('train', False), chainer.no_backprop_mode():
            outputs = self.model(**{arg: inputs[key] for arg, key in self.key_mapping.items()})
        if not isinstance(outputs, dict):
            outputs = {'pred': outputs}
        return self.convert_batch_to_npy_fn(outputs)

    def predict_data_mgr(self, manager: DataManager, batchsize: int | None = None,
                         metrics: Mapping[str, Callable[..., object]] = {},  # noqa: B006
                         metric_keys: Mapping[str, Sequence[str]] | None = None
                         ) -> Iterator[tuple[dict[str, Any], dict[str, float]]]:
        """Yields the predictions and metric values of each batch of a DataManager.

        A generator: only one batch is in memory at a time. Each metric is a
        NumPy function called as ``metric(*values)``, where each value is the
        prediction or else the batch entry named by ``metric_keys[name]``
        (default ``("pred", "label")``).

        Args:
            manager (DataManager): The batches (one epoch).
            batchsize (int or None): Overrides the manager's batch size.
            metrics (dict): Name to metric function on NumPy arrays.
            metric_keys (dict or None): Name to the keys of the metric's
                arguments.

        Yields:
            tuple: ``(preds, metric_vals)``: a dict of NumPy arrays and a dict
            of floats.

        Example:
            >>> import chainer.links as L
            >>> from researchutils.chainer.data_loading import DataManager
            >>> data = [{"data": numpy.ones(2), "label": numpy.zeros(1)}] * 5
            >>> mae = lambda pred, label: numpy.abs(pred - label).mean()
            >>> stream = Predictor(L.Linear(2, 1), {"x": "data"}).predict_data_mgr(
            ...     DataManager(data, 2), metrics={"MAE": mae})
            >>> [preds["pred"].shape[0] for preds, _ in stream]
            [2, 2, 1]
        """
        for _, preds, metric_vals in self._predict_batches(manager, batchsize, metrics,
                                                          metric_keys):
            yield preds, metric_vals

    def _predict_batches(self, manager: DataManager, batchsize: int | None,
                         metrics: Mapping[str, Callable[..., object]],
                         metric_keys: Mapping[str, Sequence[str]] | None
                         ) -> Iterator[tuple[dict[str, Array], dict[str, Any], dict[str, float]]]:
        """Yields ``(batch, preds, metric_vals)`` for each batch of ``manager``."""
        metric_keys = self._check_metrics(metrics, metric_keys)
        if batchsize is not None and batchsize != manager.batch_size:
            manager = manager.replace(batch_size=batchsize)
        for batch_index, batch in enumerate(manager):
            preds = self.predict(batch)
            metric_vals = {}
            for name, metric in metrics.items():
                arguments: list[object] = []
                for key in metric_keys[name]:
                    if key in preds:
                        arguments.append(preds[key])
                    elif key in batch:
                        arguments.append(batch[key])
                    else:
                        raise KeyError('metric {!r} needs {!r}, which is neither a prediction {} '
                                       'nor a batch entry {}: fix metric_keys'.format(
                                           name, key, sorted(preds), sorted(batch)))
                try:
                    value = metric(*arguments)
                except Exception as error:
                    _add_note(error, 'raised by metric {!r} on batch {} ({} examples)'.format(
                        name, batch_index, _batch_length(batch)))
                    raise
                metric_vals[name] = to_float(value, 'metric', name)
            yield batch, preds, metric_vals

    @staticmethod
    def _check_metrics(metrics: Mapping[str, Callable[..., object]],
                       metric_keys: Mapping[str, Sequence[str]] | None
                       ) -> Mapping[str, Sequence[str]]:
        if not isinstance(metrics, dict) or not all(callable(m) for m in metrics.values()):
            raise TypeError('metrics must be a dict from names to functions, got {!r}'.format(
                metrics))
        if metric_keys is None:
            return {name: ('pred', 'label') for name in metrics}
        missing = [name for name in metrics if name not in metric_keys]
        if missing:
            raise KeyError('metric_keys has no entry for the metrics {}'.format(missing))
        return metric_keys

    def metric_sums(self, manager: DataManager, metrics: Mapping[str, Callable[..., object]],
                    metric_keys: Mapping[str, Sequence[str]] | None = None,
                    batchsize: int | None = None) -> tuple[dict[str, float], int]:
        """Returns each metric summed over batches weighted by batch size, and the count.

        Used to combine the metrics of several shards (ChainerMN ranks) exactly.

        Args:
            manager (DataManager): The batches.
            metrics (dict): Name to metric function on NumPy arrays.
            metric_keys (dict or None): As in :meth:`predict_data_mgr`.
            batchsize (int or None): Overrides the manager's batch size.

        Returns:
            tuple: ``(sums, count)``, a dict of floats and the number of examples.

        Example:
            >>> import chainer.links as L
            >>> from researchutils.chainer.data_loading import DataManager
            >>> data = [{"data": numpy.ones(2), "label": numpy.zeros(1)}] * 3
            >>> one = lambda pred, label: 1.0
            >>> Predictor(L.Linear(2, 1), {"x": "data"}).metric_sums(
            ...     DataManager(data, 2), {"one": one})
            ({'one': 3.0}, 3)
        """
        sums, count, _ = self._reduce(manager, metrics, metric_keys, batchsize)
        return sums, count

    def _reduce(self, manager: DataManager, metrics: Mapping[str, Callable[..., object]],
                metric_keys: Mapping[str, Sequence[str]] | None, batchsize: int | None,
                keep_preds: bool = False, verbose: bool = False
                ) -> tuple[dict[str, float], int, list[dict[str, Any]]]:
        sums = {name: 0. for name in metrics}
        count = 0
        kept = []
        if verbose:
            n_batches = len(manager if batchsize is None
                            else manager.replace(batch_size=batchsize))
        for index, (batch, preds, metric_vals) in enumerate(
                self._predict_batches(manager, batchsize, metrics, metric_keys)):
            # The input batch, not an output: a model may also return scalars.
            size = _batch_length(batch)
            count += size
            for name, value in metric_vals.items():
                sums[name] += value * size
            if keep_preds:
                kept.append(preds)
            if verbose:
                print('\rpredicting: {}/{} batches'.format(index + 1, n_batches), end='',
                      file=sys.stderr, flush=True)
        if verbose:
            print(file=sys.stderr)
        return sums, count, kept

    def evaluate(self, manager: DataManager, metrics: Mapping[str, Callable[..., object]],
                 metric_keys: Mapping[str, Sequence[str]] | None = None,
                 batchsize: int | None = None) -> dict[str, float]:
        """Returns dataset-level metrics, reducing the stream without keeping predictions.

        Each metric is averaged over batches weighted by their size: exact for
        metrics that are means over examples (MSE, accuracy), not for others
        (AUC).

        Args:
            manager (DataManager): The batches.
            metrics (dict): Name to metric function on NumPy arrays.
            metric_keys (dict or None): As in :meth:`predict_data_mgr`.
            batchsize (int or None): Overrides the manager's batch size.

        Returns:
            dict: Metric name to float.

        Example:
            >>> import chainer.links as L
            >>> from researchutils.chainer.data_loading import DataManager
            >>> data = [{"data": numpy.ones(2), "label": numpy.zeros(1)}] * 3
            >>> model = L.Linear(2, 1, initialW=0, initial_bias=0)
            >>> Predictor(model, {"x": "data"}).evaluate(
            ...     DataManager(data, 2), {"MAE": lambda p, y: numpy.abs(p - y).mean()})
            {'MAE': 0.0}
        """
        sums, count = self.metric_sums(manager, metrics, metric_keys, batchsize)
        return {name: total / count for name, total in sums.items()}

    def predict_all(self, manager: DataManager,
                    metrics: Mapping[str, Callable[..., object]] = {},  # noqa: B006
                    metric_keys: Mapping[str, Sequence[str]] | None = None,
                    batchsize: int | None = None, verbose: bool = False
                    ) -> tuple[dict[str, Any], dict[str, float]]:
        """Returns every prediction over ``manager`` and the dataset-level metrics.

        The predictions of all batches are kept and joined, so memory grows
        with the dataset; :meth:`evaluate` keeps none.

        Args:
            manager (DataManager): The batches.
            metrics (dict): Name to metric function on NumPy arrays.
            metric_keys (dict or None): As in :meth:`predict_data_mgr`.
            batchsize (int or None): Overrides the manager's batch size.
            verbose (bool): Show the progress (batches done) on stderr.

        Returns:
            tuple: ``(preds, metric_vals)``: each output of the model as one
            NumPy array over the whole dataset, in the manager's order, and
            each metric averaged as in :meth:`evaluate`.

        Example:
            >>> import chainer.links as L
            >>> from researchutils.chainer.data_loading import DataManager
            >>> data = [{"data": numpy.ones(2), "label": numpy.zeros(1)}] * 3
            >>> model = L.Linear(2, 1, initialW=0, initial_bias=0)
            >>> preds, metric_vals = Predictor(model, {"x": "data"}).predict_all(
            ...     DataManager(data, 2), {"MAE": lambda p, y: numpy.abs(p - y).mean()})
            >>> preds["pred"].shape, metric_vals
            ((3, 1), {'MAE': 0.0})
        """
        sums, count, kept = self._reduce(manager, metrics, metric_keys, batchsize,
                                         keep_preds=True, verbose=verbose)
        return _concatenate(kept), {name: total / count for name, total in sums.items()}
