"""MLflowReport's sending thread: batches of metrics and a run's end, sent to one MLflow run.

A :class:`Sender` is a ``_background.BackgroundWriter``: it takes the :class:`Batch` items
the training thread queued (with those queued behind them, as one request) and the run's
:class:`End`, finds or makes the run on first use, and retries with back-off what a server
that is slow, down or answering 5xx or 429 did not take. What MLflow refuses outright (any
other 4xx) is dropped with a logged warning; what was not sent when the run ends is given to
the caller (:meth:`Sender.left`) for the file of ``_mlflow_unsent``. Tests:
tests/chainer/training/extensions/test_mlflow_report.py and test_mlflow_report_faults.py.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from researchutils.chainer.training._mlflow_runs import end_run, find_or_create_run
from researchutils.chainer.training.extensions._background import BackgroundWriter
from researchutils.chainer.training.extensions._mlflow_names import MAX_TAG_VALUE

__all__ = ['REPEATED_STEPS_TAG', 'STATUS_FAILED', 'STATUS_FINISHED', 'STATUS_KILLED', 'Batch',
           'End', 'Refused', 'Sender']

# The messages are MLflowReport's: they go to its module's logger, where users look.
logger = logging.getLogger('researchutils.chainer.training.extensions.mlflow_report')

STATUS_FINISHED, STATUS_FAILED, STATUS_KILLED = 'FINISHED', 'FAILED', 'KILLED'
#: The tag listing the steps that a resumed run logged again (tutorial: tracking.rst).
REPEATED_STEPS_TAG = 'researchutils.repeated_steps'


class Batch(object):
    """Metrics ``[key, value, timestamp ms, step]``, params and tags for one run."""

    def __init__(self, metrics: list[list[Any]] | None = None,
                 params: dict[str, str] | None = None,
                 tags: dict[str, str] | None = None) -> None:
        self.metrics = metrics or []
        self.params = params or {}
        self.tags = tags or {}
        self.messages = 1

    def joins(self, other: object) -> bool:
        return isinstance(other, Batch)

    def to_json(self) -> dict[str, Any]:
        return {'metrics': self.metrics, 'params': self.params, 'tags': self.tags}


class End(object):
    """The run's end: its status and time."""

    messages = 1

    def __init__(self, status: str, end_time: int) -> None:
        self.status = status
        self.end_time = end_time


def permanent(error: Exception) -> bool:
    """Whether no retry can cure ``error``: MLflow refused the request itself (HTTP 4xx but
    429, a rate limit). A connection error, a timeout or HTTP 5xx is worth retrying."""
    status = getattr(error, 'get_http_status_code', None)
    if status is None:
        return False
    try:
        code = int(status())
    except Exception:
        return False
    return 400 <= code < 500 and code not in (408, 429)


class Sender(BackgroundWriter[Any]):
    """Sends one run's batches and end to MLflow from the thread; keeps what it could not."""

    def __init__(self, client: Any, run: dict[str, Any], queue_size: int, max_retries: int,
                 retry_backoff: float, max_retry_backoff: float) -> None:
        super().__init__('MLflowReport', queue_size, max_retries=max_retries,
                         retry_backoff=retry_backoff, max_retry_backoff=max_retry_backoff)
        self.client = client
        self.run = run  # tracking_uri, experiment_name, run_name, run_key, run_id, tags
        self.lock = threading.Lock()
        self.unsent: list[Any] = []  # items given up (kept for the file)
        self.in_flight: list[Any] = []  # items being sent now
        self.refused = 0  # items MLflow refused (not kept: it would refuse them again)
        self._run_ready = False  # the run exists and runs
        self._failing = False
        # Resumed: the step of the last row the snapshot had taken (steps past it that the
        # run holds were left by a try that went on after the snapshot).
        self.resumed_after: int | None = None

    @property
    def run_id(self) -> str | None:
        with self.lock:
            return self.run['run_id']

    def write(self, item: Any) -> None:
        group = [item]
        if isinstance(item, Batch):
            group += self.queue.take_following(item.joins)
        with self.lock:
            self.in_flight = group
        try:
            sent = self.deliver(self._send, group)
        except Refused:
            with self.lock:
                self.in_flight = []
            self.refused += len(group)
            return
        with self.lock:
            self.in_flight = []
            if sent:
                self.credit(len(group))
            else:
                self.unsent += group

    def _send(self, group: list[Any]) -> None:
        try:
            run_id = self._ensure_run()
            for item in group:
                if isinstance(item, End):
                    end_run(self.client, run_id, item.status, item.end_time)
            self._log(run_id, [item for item in group if isinstance(item, Batch)])
        except Exception as error:
            if permanent(error):
                logger.warning('MLflowReport: MLflow at %s refused what it was sent (%s: %s); '
                               'it is dropped', self.run['tracking_uri'], type(error).__name__,
                               error)
                raise Refused() from error
            raise

    def _log(self, run_id: str, batches: list[Batch]) -> None:
        from mlflow.entities import Metric, Param, RunTag
        metrics = [Metric(key, value, timestamp, step)
                   for batch in batches for key, value, timestamp, step in batch.metrics]
        params = [Param(key, value) for batch in batches for key, value in batch.params.items()]
        tags = [RunTag(key, value) for batch in batches for key, value in batch.tags.items()]
        # MlflowClient splits a batch into requests within MLflow's limits (1000 values,
        # 100 parameters, 100 tags a request).
        self.client.log_batch(run_id, metrics=metrics, params=params, tags=tags)

    def _ensure_run(self) -> str:
        """The run's id: the one known (from a snapshot: set running again), else the run
        tagged with the key, else a new run."""
        with self.lock:
            run_id = self.run['run_id']
        if self._run_ready:
            return str(run_id)
        if run_id is not None:
            self.client.update_run(run_id, status='RUNNING')
        else:
            run_id = find_or_create_run(self.client, self.run)
        if self.resumed_after is not None:
            self._mark_repeated_steps(str(run_id), self.resumed_after)
        with self.lock:
            self.run['run_id'] = run_id
        self._run_ready = True
        return str(run_id)

    def _mark_repeated_steps(self, run_id: str, resumed_after: int) -> None:
        """Tags the run with the steps past ``resumed_after`` that it holds already: MLflow
        cannot delete a point, so these steps will show the values of both tries."""
        run = self.client.get_run(run_id)
        steps = {metric.step for key in run.data.metrics
                 for metric in self.client.get_metric_history(run_id, key)
                 if metric.step > resumed_after}
        if not steps:
            return
        earlier = run.data.tags.get(REPEATED_STEPS_TAG, '')
        steps.update(int(step) for step in earlier.split(',') if step.strip().isdigit())
        text = ','.join(str(step) for step in sorted(steps))
        if len(text) > MAX_TAG_VALUE:
            text = text[:MAX_TAG_VALUE].rsplit(',', 1)[0]
        self.client.set_tag(run_id, REPEATED_STEPS_TAG, text)
        logger.warning('MLflowReport: run %s at %s already holds steps %s, logged by a try '
                       'that went on after the snapshot this run resumes from; MLflow keeps '
                       'points, so these steps will show both tries\' values (tag %s)', run_id,
                       self.run['tracking_uri'], text, REPEATED_STEPS_TAG)

    def wait_before_retry(self, error: Exception, attempt: int) -> float | None:
        if isinstance(error, Refused):
            raise error
        if not self._failing:
            logger.warning('MLflowReport: MLflow at %s does not answer as it should (%s: %s); '
                           'retrying in the background', self.run['tracking_uri'],
                           type(error).__name__, error)
            self._failing = True
        if attempt >= self.max_retries:
            return None
        return self.backoff(attempt)

    def recovered(self) -> None:
        if self._failing:
            logger.warning('MLflowReport: MLflow at %s answers again', self.run['tracking_uri'])
            self._failing = False

    def left(self) -> list[Any]:
        """What was not sent: given up, being sent when close gave up, still queued."""
        with self.lock:
            return self.unsent + self.in_flight + self.queue.drain()


class Refused(Exception):
    """MLflow refused a request: retrying cannot help."""
