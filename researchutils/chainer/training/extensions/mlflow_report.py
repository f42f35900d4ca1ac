"""MLflowReport: a run's LogReport values and hyper-parameters in an MLflow run, in the background.

The extension takes the rows a LogReport added (``_tracking.LogRows``) and queues them; a
``_background.BackgroundWriter`` thread sends them with ``MlflowClient.log_batch`` to one
run, named by its id, so the training loop never waits on the server. The run is found by
a key made on the training thread when the run starts (a tag, ``researchutils.run_key``),
so the key and, once known, the run id go into the Trainer's snapshot at once, and a
resumed run appends to the same MLflow run. A server that is slow, answers errors or is
down gets retries with back-off; what could not be sent when the run ends is written to
a file in the trainer's ``out`` folder (:data:`UNSENT_PREFIX`), which :func:`send_unsent`
(or ``python -m researchutils.chainer.training.extensions.mlflow_report FILE``) sends
later. mlflow (``mlflow-skinny`` suffices) is imported when a run starts.
Tests: tests/chainer/training/extensions/test_mlflow_report.py and
test_mlflow_report_faults.py.
"""
from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import chainer
from chainer.training import extension
from chainer.training.extensions import log_report as log_report_module

from researchutils import _files
from researchutils._checks import (
    check_comm,
    check_non_negative_int,
    check_path,
    check_positive_float,
    check_positive_int,
    check_str,
    check_timeout,
)
from researchutils.chainer.training._mlflow_runs import (
    PARENT_TAG,
    end_run,
    find_or_create_run,
    mlflow_client_class,
)
from researchutils.chainer.training._ranks import is_rank_zero
from researchutils.chainer.training.extensions import _tracking
from researchutils.chainer.training.extensions._background import BackgroundWriter
from researchutils.chainer.training.extensions.preemption_snapshot import Preempted

__all__ = ['MLflowReport', 'send_unsent']

logger = logging.getLogger(__name__)

# What could not be sent: <out>/mlflow_unsent_<run key>.json.
UNSENT_PREFIX = 'mlflow_unsent_'
UNSENT_FORMAT = 'researchutils.MLflowReport.unsent/1'
_SEND_COMMAND = 'python -m researchutils.chainer.training.extensions.mlflow_report'
# MLflow's limits (mlflow.utils.validation): names of at most 250 characters of letters,
# digits and '_-. /', that stay the same as paths; parameter values of at most 6000
# characters, tag values of 8000.
_NAME_CHARACTERS = re.compile(r'[^\w\-. /]')
_MAX_NAME = 250
_MAX_PARAM_VALUE = 6000
_MAX_TAG_VALUE = 8000
_STATUS_FINISHED, _STATUS_FAILED, _STATUS_KILLED = 'FINISHED', 'FAILED', 'KILLED'


def _mlflow_name(name: str) -> str:
    """``name`` as MLflow accepts a metric or parameter name: a character it refuses becomes
    ``_``, a name that would change as a path (``a//b``, ``/a``, ``a/``) is made one that
    does not, and a longer one than 250 characters is cut.

    Example:
        >>> _mlflow_name('main/loss'), _mlflow_name('val/acc@1'), _mlflow_name('/a//b/')
        ('main/loss', 'val/acc_1', 'a/b')
    """
    name = _NAME_CHARACTERS.sub('_', name)
    parts = [part for part in name.split('/') if part not in ('', '.')]
    name = '/'.join(part if part != '..' else '__' for part in parts) or '_'
    name = name[:_MAX_NAME].rstrip('/')
    if posixpath.normpath(name) != name:  # a cut left a '/.' or the like
        name = name.replace('/', '_')
    return name


class _Batch(object):
    """Metrics ``[key, value, timestamp ms, step]``, params and tags for one run."""

    def __init__(self, metrics: list[list[Any]] | None = None,
                 params: dict[str, str] | None = None,
                 tags: dict[str, str] | None = None) -> None:
        self.metrics = metrics or []
        self.params = params or {}
        self.tags = tags or {}
        self.messages = 1

    def joins(self, other: object) -> bool:
        return isinstance(other, _Batch)

    def to_json(self) -> dict[str, Any]:
        return {'metrics': self.metrics, 'params': self.params, 'tags': self.tags}


class _End(object):
    """The run's end: its status and time."""

    messages = 1

    def __init__(self, status: str, end_time: int) -> None:
        self.status = status
        self.end_time = end_time


def _permanent(error: Exception) -> bool:
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


class _Sender(BackgroundWriter[Any]):
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

    @property
    def run_id(self) -> str | None:
        with self.lock:
            return self.run['run_id']

    def write(self, item: Any) -> None:
        group = [item]
        if isinstance(item, _Batch):
            group += self.queue.take_following(item.joins)
        with self.lock:
            self.in_flight = group
        try:
            sent = self.deliver(self._send, group)
        except _Refused:
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
                if isinstance(item, _End):
                    end_run(self.client, run_id, item.status, item.end_time)
            self._log(run_id, [item for item in group if isinstance(item, _Batch)])
        except Exception as error:
            if _permanent(error):
                logger.warning('MLflowReport: MLflow refused what it was sent (%s: %s); '
                               'it is dropped', type(error).__name__, error)
                raise _Refused() from error
            raise

    def _log(self, run_id: str, batches: list[_Batch]) -> None:
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
        with self.lock:
            self.run['run_id'] = run_id
        self._run_ready = True
        return str(run_id)

    def wait_before_retry(self, error: Exception, attempt: int) -> float | None:
        if isinstance(error, _Refused):
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
            logger.warning('MLflowReport: MLflow answers again')
            self._failing = False

    def left(self) -> list[Any]:
        """What was not sent: given up, being sent when close gave up, still queued."""
        with self.lock:
            return self.unsent + self.in_flight + self.queue.drain()


class _Refused(Exception):
    """MLflow refused a request: retrying cannot help."""


def _unsent_path(out: str, run_key: str) -> str:
    return os.path.join(out, '{}{}.json'.format(UNSENT_PREFIX, run_key))


def _write_unsent(path: str, run: Mapping[str, Any], items: Sequence[Any]) -> int:
    """Adds ``items`` to the file of what was not sent (made when there is none); returns
    how many metrics it now holds."""
    data: dict[str, Any] = {
        'format': UNSENT_FORMAT,
        'about': ('What MLflowReport could not send to the MLflow run below before the '
                  'training run ended. Send it with: {} {}'.format(_SEND_COMMAND, path)),
        'tracking_uri': run['tracking_uri'], 'experiment_name': run['experiment_name'],
        'run_name': run.get('run_name'), 'run_key': run['run_key'], 'run_id': run['run_id'],
        'tags': dict(run.get('tags') or {}), 'batches': [], 'end': None}
    if os.path.exists(path):
        with open(path, encoding='utf-8') as stream:
            earlier = json.load(stream)
        data['batches'] = earlier.get('batches', [])
        data['run_id'] = data['run_id'] or earlier.get('run_id')
    for item in items:
        if isinstance(item, _Batch):
            data['batches'].append(item.to_json())
        else:
            data['end'] = {'status': item.status, 'end_time': item.end_time}
    _files.write_text(path, json.dumps(data, indent=1))
    return sum(len(batch['metrics']) for batch in data['batches'])


def send_unsent(path: str | os.PathLike[str], tracking_uri: str | None = None) -> int:
    """Sends to MLflow what an :class:`MLflowReport` could not, then removes the file.

    The file (``mlflow_unsent_<key>.json`` in the trainer's ``out`` folder)
    names its run: the run is found by its id or key, and made when the server
    never saw it. Metrics keep their steps and times, so sending one twice adds
    no point to MLflow's charts.

    Args:
        path (str or os.PathLike): The file.
        tracking_uri (str): The server; None: the one the file names.

    Returns:
        int: The metric values sent.

    Raises:
        ValueError: The file is not one MLflowReport wrote.
        mlflow.exceptions.MlflowException: The server refused or is still down;
            the file is kept.

    Example:
        >>> send_unsent('result/mlflow_unsent_0123abcd.json')  # doctest: +SKIP
        120
    """
    path = check_path(path, 'path')
    tracking_uri = check_str(tracking_uri, 'tracking_uri', allow_empty=False, allow_none=True)
    with open(path, encoding='utf-8') as stream:
        data = json.load(stream)
    if not isinstance(data, dict) or data.get('format') != UNSENT_FORMAT:
        raise ValueError('{} is not a file of what MLflowReport could not send (format {!r}, '
                         'expected {!r})'.format(path, data.get('format') if isinstance(
                             data, dict) else None, UNSENT_FORMAT))
    run = dict(data)
    run['tracking_uri'] = tracking_uri or data['tracking_uri']
    client = mlflow_client_class('MLflowReport')(tracking_uri=run['tracking_uri'])
    sender = _Sender(client, run, 1, 0, 1.0, 1.0)
    run_id = sender._ensure_run()
    batches = [_Batch(batch['metrics'], batch['params'], batch['tags'])
               for batch in data['batches']]
    sender._log(run_id, batches)
    if data.get('end'):
        end_run(client, run_id, data['end']['status'], data['end']['end_time'])
    os.unlink(path)
    return sum(len(batch.metrics) for batch in batches)


class MLflowReport(extension.Extension):
    """Trainer extension logging what LogReport observes to an MLflow run, in the background.

    At each trigger, the rows the LogReport added since the last call are
    queued as metrics (each at its row's iteration, or epoch, as its step),
    and a daemon thread sends them with ``MlflowClient.log_batch`` to the
    run's id; batches that waited in the queue together go as one request,
    so a slow server sees fewer, larger requests. The run's hyper-parameters
    are logged once, as MLflow parameters. At the end the run is marked
    ``FINISHED``, ``KILLED`` (a preemption by
    :class:`~researchutils.chainer.training.extensions.PreemptionSnapshot`,
    a KeyboardInterrupt) or ``FAILED`` (an exception). Everything queued is
    sent before the Trainer's run ends: ``finalize`` waits up to
    ``flush_timeout`` seconds.

    A run is known by a key made when it starts (the tag
    ``researchutils.run_key``), and by its id once the server gave one; both
    are saved in the Trainer's snapshot, so a run resumed from it (after a
    preemption, say) appends to the same MLflow run and sets it running
    again. A run started afresh, even in a folder that holds an earlier
    run, opens a new MLflow run. Under ChainerMN (``comm``) only rank 0
    logs.

    Faults stop nothing: a connection error, a timeout or HTTP 5xx is
    retried with exponential back-off (after the retries MLflow's client
    makes itself, which ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` and
    ``MLFLOW_HTTP_REQUEST_TIMEOUT`` set); what is still not sent when the run
    ends is written to ``mlflow_unsent_<key>.json`` in the trainer's ``out``
    folder, with one :class:`RuntimeWarning` naming it, and
    :func:`send_unsent` or ``python -m
    researchutils.chainer.training.extensions.mlflow_report FILE`` sends it
    later. Metric names MLflow refuses are renamed (characters it refuses become ``_``,
    logged once); NaN and infinite values are sent as they are, which
    MLflow's documentation allows (its SQL stores keep NaN and store
    infinities as the largest float). See docs/tutorials/tracking.rst.

    Args:
        tracking_uri (str): The MLflow server (``http://host:5000``) or store;
            None: MLflow's default (``MLFLOW_TRACKING_URI``).
        experiment_name (str): The MLflow experiment, made when missing;
            None: MLflow's Default experiment.
        run_name (str): The run's name; None lets MLflow choose one.
        entries (list of str): LogReport keys to log; None logs every number
            of each row (but ``epoch``, ``iteration`` and ``elapsed_time``).
        parameters: The run's hyper-parameters: a
            :class:`~researchutils.chainer.training.Parameters`, a dict (nested
            dicts are flattened to ``"model/n_units"``) or None.
        log_report (str or LogReport): Name of the trainer's LogReport, or a
            LogReport to drive.
        tags (dict): Tags of the run (str to str).
        parent_run_id (str): The run this one is a child of (MLflow's
            ``mlflow.parentRunId`` tag), or None.
        step (str): ``'iteration'`` or ``'epoch'``.
        comm: A ChainerMN communicator, or None.
        queue_size (int): Reports the queue holds; when it is full, rows wait
            for the next report.
        flush_timeout (float): Seconds ``finalize`` waits for the queue.
        max_retries (int): Retries of one request before it is kept for the
            file.
        retry_backoff (float): Seconds before the first retry, then doubled.
        max_retry_backoff (float): Upper bound of the wait between retries.

    Raises:
        ImportError: mlflow is missing (``pip install researchutils[mlflow]``),
            when the run starts.

    Example:
        >>> from researchutils.chainer.training.extensions import MLflowReport
        >>> trainer.extend(MLflowReport('http://127.0.0.1:5000',  # doctest: +SKIP
        ...                             experiment_name='mnist', parameters={'lr': 0.01}))
    """

    trigger = 1, 'epoch'
    default_name = 'MLflowReport'

    def __init__(self, tracking_uri: str | None = None, experiment_name: str | None = None,
                 run_name: str | None = None, entries: Sequence[str] | None = None,
                 parameters: object = None,
                 log_report: str | log_report_module.LogReport = 'LogReport', *,
                 tags: Mapping[str, str] | None = None, parent_run_id: str | None = None,
                 step: str = 'iteration', comm: Any = None, queue_size: int = 64,
                 flush_timeout: float = 30.0, max_retries: int = 8,
                 retry_backoff: float = 1.0, max_retry_backoff: float = 30.0) -> None:
        for name, value in (('tracking_uri', tracking_uri), ('experiment_name', experiment_name),
                            ('run_name', run_name), ('parent_run_id', parent_run_id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError('{} must be a non-empty str or None, got {!r}'.format(
                    name, value))
        self._rows = _tracking.LogRows(_tracking.check_log_report(log_report),
                                       _tracking.check_entries(entries),
                                       _tracking.check_step(step))
        self._parameters = {_mlflow_name(name): str(value)[:_MAX_PARAM_VALUE] for name, value
                            in _tracking.flat_hyperparameters(parameters).items()}
        if tags is not None and not (isinstance(tags, Mapping) and all(
                isinstance(key, str) and isinstance(value, str) for key, value in tags.items())):
            raise TypeError('tags must be a dict of str to str or None, got {!r}'.format(tags))
        self._tags = {key: value[:_MAX_TAG_VALUE] for key, value in (tags or {}).items()}
        if parent_run_id is not None:
            self._tags[PARENT_TAG] = parent_run_id
        self._tracking_uri = tracking_uri
        self._experiment_name = experiment_name
        self._run_name = run_name
        self._comm = check_comm(comm)
        self._sender_arguments = (
            check_positive_int(queue_size, 'queue_size'),
            check_non_negative_int(max_retries, 'max_retries'),
            check_positive_float(retry_backoff, 'retry_backoff'),
            check_positive_float(max_retry_backoff, 'max_retry_backoff'))
        self._flush_timeout = check_timeout(flush_timeout, 'flush_timeout')
        self._renamed: dict[str, str] = {}
        self._trainer: chainer.training.Trainer | None = None
        self._start_run()

    def _start_run(self) -> None:
        self._run: dict[str, Any] = {
            'tracking_uri': self._tracking_uri, 'experiment_name': self._experiment_name,
            'run_name': self._run_name, 'run_key': uuid.uuid4().hex, 'run_id': None,
            'tags': self._tags}
        self._sender: _Sender | None = None
        self._resumed = False
        self._pending: list[list[Any]] = []  # metrics waiting for room in the queue
        self._pending_rows = 0  # the rows they come from
        self._failed = False
        self._finalized = False
        self._rows.taken = 0

    @property
    def run_id(self) -> str | None:
        """The MLflow run's id (str), once the server gave it; else None.

        Example:
            >>> report.run_id  # doctest: +SKIP
            '5f3c0a...'
        """
        if self._sender is not None:
            return self._sender.run_id
        run_id = self._run['run_id']
        return None if run_id is None else str(run_id)

    @property
    def run_key(self) -> str:
        """The key of the run (the ``researchutils.run_key`` tag), known from its start."""
        return str(self._run['run_key'])

    def initialize(self, trainer: chainer.training.Trainer) -> None:
        """Checks the LogReport and mlflow; a second run after ``finalize`` opens a new MLflow
        run (the folds of a k-fold)."""
        if self._finalized:
            self._start_run()
        self._trainer = trainer
        self._rows.check(trainer, 'MLflowReport')
        if is_rank_zero(self._comm):
            mlflow_client_class('MLflowReport')

    def _open(self) -> _Sender:
        if self._sender is None:
            client = mlflow_client_class('MLflowReport')(tracking_uri=self._tracking_uri)
            self._sender = _Sender(client, self._run, *self._sender_arguments)
            # Parameters once: MLflow refuses a parameter logged again with another value.
            # Tags again when resumed: a retried trial of a search updates its number.
            self._sender.offer(_Batch(params={} if self._resumed else dict(self._parameters),
                                      tags=dict(self._tags)), bounded=False)
        return self._sender

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        """Queues the rows LogReport added since the last call (rank 0)."""
        if is_rank_zero(self._comm):
            self._queue_rows(trainer, bounded=True)

    def _queue_rows(self, trainer: chainer.training.Trainer, bounded: bool) -> None:
        sender = self._open()
        now = int(time.time() * 1000)
        for step, values in self._rows.new(trainer):
            self._pending_rows += 1
            self._pending += [[self._name(key), value, now, step] for key, value in
                              values.items()]
        if self._pending and sender.offer(_Batch(self._pending), bounded=bounded):
            self._pending, self._pending_rows = [], 0

    def _name(self, key: str) -> str:
        name = self._renamed.get(key)
        if name is None:
            name = self._renamed[key] = _mlflow_name(key)
            if name != key:
                logger.warning('MLflowReport: MLflow refuses the metric name %r; it is logged '
                               'as %r', key, name)
        return name

    def on_error(self, trainer: chainer.training.Trainer, exc: Exception,
                 tb: Any) -> None:
        """Notes the run failed (it ends as ``FAILED``)."""
        self._failed = True

    def finalize(self) -> None:
        """Sends what is left and the run's end; waits up to ``flush_timeout`` s, then writes
        what was not sent to ``mlflow_unsent_<key>.json``."""
        if self._finalized or self._trainer is None:
            return
        self._finalized = True
        if not is_rank_zero(self._comm):
            return
        interrupt = sys.exc_info()[1]
        if self._failed:
            status = _STATUS_FAILED
        elif isinstance(interrupt, (Preempted, KeyboardInterrupt)):
            status = _STATUS_KILLED
        elif interrupt is not None and not isinstance(interrupt, Exception):
            status = _STATUS_KILLED
        else:
            status = _STATUS_FINISHED
        sender = self._open()
        self._queue_rows(self._trainer, bounded=False)
        sender.offer(_End(status, int(time.time() * 1000)), bounded=False)
        sender.close(self._flush_timeout)
        left = sender.left()
        if sender.refused:
            warnings.warn('MLflowReport: MLflow refused {} request(s) of this run (the logged '
                          'warnings say why)'.format(sender.refused), RuntimeWarning)
        if left:
            path = _unsent_path(self._trainer.out, self.run_key)
            try:
                metrics = _write_unsent(path, self._run, left)
            except (OSError, ValueError) as error:
                # finalize must not raise, or the other extensions' finalize would not run.
                warnings.warn('MLflowReport: what could not be sent to MLflow could not be '
                              'kept in {} either ({}: {}); it is lost'.format(
                                  path, type(error).__name__, error), RuntimeWarning)
                return
            warnings.warn('MLflowReport: {} metric value(s) could not be sent to MLflow at {} '
                          'before the run ended; they are kept in {}: send them with `{} {}`'
                          .format(metrics, self._tracking_uri, path, _SEND_COMMAND, path),
                          RuntimeWarning)

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        """Saves the run's key and id and the LogReport rows taken."""
        loading = isinstance(serializer, chainer.Deserializer)
        if loading:
            if self._finalized:
                self._start_run()
            self._resumed = True
        else:
            # Rows still waiting for room in the queue are read again after a resume.
            self._rows.taken -= self._pending_rows
            self._pending, self._pending_rows = [], 0
        self._run['run_key'] = str(serializer('_run_key', self._run['run_key']))
        run_id = str(serializer('_run_id', self.run_id or ''))
        if loading:
            self._run['run_id'] = run_id or None
        self._rows.serialize(serializer)


def _main(arguments: Sequence[str]) -> int:
    if len(arguments) not in (1, 2) or arguments[0] in ('-h', '--help'):
        print('usage: {} FILE [TRACKING_URI]\n\nSends to MLflow what MLflowReport could not '
              '(FILE: a mlflow_unsent_<key>.json), then removes FILE.'.format(_SEND_COMMAND))
        return 2
    sent = send_unsent(arguments[0], arguments[1] if len(arguments) == 2 else None)
    print('{} metric value(s) sent from {}'.format(sent, arguments[0]))
    return 0


if __name__ == '__main__':
    sys.exit(_main(sys.argv[1:]))
