"""PredictorEvaluator: NumPy validation metrics over a DataManager, as an extension.

The Predictor and DataManager classes are imported when one is made, not with this module:
importing an extension loads neither the data managers nor their worker processes. Its tests
are in ``tests/chainer/training/extensions/test_predictor_evaluator.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import chainer
import numpy

from researchutils._checks import check_str_list

if TYPE_CHECKING:  # imported when an evaluator is made, not with this module
    from researchutils.chainer.data_loading import DataManager
    from researchutils.chainer.training.predictor import Predictor


class PredictorEvaluator(chainer.training.Extension):
    """Reports validation metrics (``val/<name>``) computed by a Predictor.

    At each epoch end the :class:`~researchutils.chainer.training.Predictor`
    predicts over every batch of ``manager`` (test mode, no graph) and each
    metric, a function of NumPy arrays, is averaged over the examples
    (batches weighted by their size). With a ChainerMN communicator each
    rank evaluates its own shard and the sums are added over the ranks, so
    every rank reports the metric of the whole validation set. The priority
    is ``PRIORITY_WRITER``: LogReport and
    :class:`~researchutils.chainer.training.extensions.BestModelSaver` see
    the values of the same epoch.

    Args:
        predictor (Predictor): Predicts with the trained model.
        manager (DataManager): The validation batches.
        metrics (dict): Name to NumPy metric function.
        metric_keys (dict or None): Name to the batch keys the metric gets;
            None: ``("pred", "label")``.
        comm: A ChainerMN communicator, or None.

    Raises:
        TypeError: An argument is wrong; the first wrong one, in the signature's
            order, is named.

    Example:
        >>> import chainer.links as L
        >>> from researchutils.chainer.data_loading import DataManager
        >>> from researchutils.chainer.training import Predictor
        >>> data = [{'data': numpy.ones(2), 'label': numpy.zeros(1)}] * 3
        >>> evaluator = PredictorEvaluator(Predictor(L.Linear(2, 1), {'x': 'data'}),
        ...                                DataManager(data, 2), {'one': lambda pred, label: 1.})
        >>> observation = {}
        >>> with chainer.reporter.Reporter().scope(observation):
        ...     evaluator(trainer=None)
        >>> observation
        {'val/one': 1.0}
    """

    trigger = (1, 'epoch')
    priority = chainer.training.PRIORITY_WRITER
    name = 'validation'

    def __init__(self, predictor: Predictor, manager: DataManager,
                 metrics: dict[str, Callable[..., float]],
                 metric_keys: dict[str, Sequence[str]] | None = None, comm: Any = None) -> None:
        from researchutils.chainer.data_loading import DataManager
        from researchutils.chainer.training.predictor import Predictor
        if not isinstance(predictor, Predictor):
            raise TypeError('predictor must be a Predictor, got {!r}'.format(
                type(predictor).__name__))
        if not isinstance(manager, DataManager):
            raise TypeError('manager must be a DataManager of the validation examples, got '
                            '{!r}'.format(type(manager).__name__))
        if not isinstance(metrics, dict) or not metrics or not all(
                callable(metric) for metric in metrics.values()):
            raise TypeError('metrics must be a non-empty dict from names to NumPy metric '
                            'functions, got {!r}'.format(metrics))
        if metric_keys is not None and not isinstance(metric_keys, dict):
            raise TypeError('metric_keys must be None or a dict from metric names to batch '
                            'keys, got {!r}'.format(metric_keys))
        for metric, keys in (metric_keys or {}).items():
            check_str_list(keys, 'metric_keys[{!r}]'.format(metric))
        if comm is not None and not hasattr(comm, 'mpi_comm'):
            raise TypeError('comm must be a ChainerMN communicator (with mpi_comm) or None, '
                            'got {!r}'.format(comm))
        self._predictor, self._manager = predictor, manager
        self._metrics, self._metric_keys = metrics, metric_keys
        self._comm = comm

    def finalize(self) -> None:
        """Stops the worker processes the manager kept between validation passes.

        The Trainer calls it when its run ends, however it ends; the manager stays
        usable (a later pass starts new workers).
        """
        self._manager.finalize()

    def __call__(self, trainer: chainer.training.Trainer | None) -> None:
        sums, count = self._predictor.metric_sums(self._manager, self._metrics,
                                                  self._metric_keys)
        names = sorted(sums)
        totals = numpy.array([sums[name] for name in names] + [count], dtype=numpy.float64)
        if self._comm is not None:
            totals = self._comm.mpi_comm.allreduce(totals)
        chainer.reporter.report({'val/' + name: float(totals[i] / totals[-1])
                                 for i, name in enumerate(names)})
