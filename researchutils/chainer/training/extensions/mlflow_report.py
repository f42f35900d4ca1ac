"""MLflowReport: a run's LogReport values and hyper-parameters in an MLflow run, in the background.

The extension takes the rows a LogReport added (``_tracking.LogRows``) and queues them; the
sending thread (``_mlflow_sender.Sender``) sends them with ``MlflowClient.log_batch`` to one
run, named by its id, so the training loop never waits on the server. The run is found by
a key made on the training thread when the run starts (a tag, ``researchutils.run_key``),
so the key and, once known, the run id go into the Trainer's snapshot at once, and a
resumed run appends to the same MLflow run. A server that is slow, answers errors or is
down gets retries with back-off; what could not be sent when the run ends is written to
a file in the trainer's ``out`` folder (``_mlflow_unsent``), which :func:`send_unsent`
(or ``python -m researchutils.chainer.training.extensions.mlflow_report FILE``) sends
later. Names MLflow refuses are made ones it takes (``_mlflow_names``). mlflow
(``mlflow-skinny`` suffices) is imported when a run starts.
Tests: tests/chainer/training/extensions/test_mlflow_report.py and
test_mlflow_report_faults.py.
"""
from __future__ import annotations

import logging
import os
import sys
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import chainer
from chainer.training import extension
from chainer.training.extensions import log_report as log_report_module

from researchutils._checks import (
    check_comm,
    check_non_negative_int,
    check_path,
    check_positive_float,
    check_positive_int,
    check_str,
    check_timeout,
)
from researchutils.chainer.training._mlflow_runs import PARENT_TAG, mlflow_client_class
from researchutils.chainer.training._ranks import is_rank_zero
from researchutils.chainer.training.extensions import _tracking
from researchutils.chainer.training.extensions._mlflow_names import (
    MAX_NAME,
    MAX_PARAM_VALUE,
    MAX_TAG_VALUE,
    mlflow_name,
)
from researchutils.chainer.training.extensions._mlflow_sender import (
    STATUS_FAILED,
    STATUS_FINISHED,
    STATUS_KILLED,
    Batch,
    End,
    Sender,
)
from researchutils.chainer.training.extensions._mlflow_unsent import (
    SEND_COMMAND,
    read_unsent,
    resend,
    unsent_path,
    write_unsent,
)
from researchutils.chainer.training.extensions.preemption_snapshot import Preempted

__all__ = ['MLflowReport', 'send_unsent']

logger = logging.getLogger(__name__)


def send_unsent(path: str | os.PathLike[str], tracking_uri: str | None = None) -> int:
    """Sends to MLflow what an :class:`MLflowReport` could not, then removes the file.

    The file (``mlflow_unsent_<key>.json`` in the trainer's ``out`` folder)
    names its run and the store the run used: the run is found by its id or
    key, and made when the server never saw it. Only the points the run lacks
    are sent (a metric at a step it holds is skipped, so sending a file twice
    adds nothing), and the run's end only while the run stands where the file
    left it; a run that moved on (resumed and finished, say) keeps its status,
    and a logged warning says what was skipped. See docs/tutorials/tracking.rst.

    Args:
        path (str or os.PathLike): The file.
        tracking_uri (str): The store; None: the one the file names.

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
    sent = resend(read_unsent(path), tracking_uri)
    os.unlink(path)
    return sent


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

    Faults stop nothing: a connection error, a timeout, HTTP 5xx or 429 is
    retried with exponential back-off (after the retries MLflow's client
    makes itself, which ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` and
    ``MLFLOW_HTTP_REQUEST_TIMEOUT`` set); what is still not sent when the run
    ends is written to ``mlflow_unsent_<key>.json`` in the trainer's ``out``
    folder, with one :class:`RuntimeWarning` naming it, and
    :func:`send_unsent` or ``python -m
    researchutils.chainer.training.extensions.mlflow_report FILE`` sends it
    later; a store that refuses the run (MLflow 3's file store) is handled
    the same way. Metric names MLflow refuses are renamed (characters it
    refuses become ``_``, logged once), and two names never merge (a stable
    suffix); NaN and infinite values are sent as they are, which
    MLflow's documentation allows (its SQL stores keep NaN and store
    infinities as the largest float). See docs/tutorials/tracking.rst.

    Args:
        tracking_uri (str): The MLflow server (``http://host:5000``) or store;
            None: ``MLFLOW_TRACKING_URI``, else MLflow's default, resolved when the
            run starts (:attr:`tracking_uri`).
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
        parameter_names = _tracking.DistinctNames(mlflow_name, MAX_NAME, logger, 'MLflowReport',
                                                  ('MLflow', 'parameter'))
        self._parameters = {parameter_names(name): str(value)[:MAX_PARAM_VALUE] for name, value
                            in _tracking.flat_hyperparameters(parameters).items()}
        if tags is not None and not (isinstance(tags, Mapping) and all(
                isinstance(key, str) and isinstance(value, str) for key, value in tags.items())):
            raise TypeError('tags must be a dict of str to str or None, got {!r}'.format(tags))
        self._tags = {key: value[:MAX_TAG_VALUE] for key, value in (tags or {}).items()}
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
        self._name = _tracking.DistinctNames(mlflow_name, MAX_NAME, logger, 'MLflowReport',
                                             ('MLflow', 'metric'))
        self._trainer: chainer.training.Trainer | None = None
        self._start_run()

    def _start_run(self) -> None:
        self._run: dict[str, Any] = {
            'tracking_uri': self._tracking_uri, 'experiment_name': self._experiment_name,
            'run_name': self._run_name, 'run_key': uuid.uuid4().hex, 'run_id': None,
            'tags': self._tags}
        self._sender: Sender | None = None
        self._resumed = False
        self._pending: list[list[Any]] = []  # metrics waiting for room in the queue
        self._pending_rows = 0  # the rows they come from
        self._failed = False
        self._finalized = False
        self._last_step = -1  # the last step this try reported; -1: none
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
            # Resolved now, whatever the environment is when the file is sent later.
            import mlflow
            self._run['tracking_uri'] = self._tracking_uri or mlflow.get_tracking_uri()

    @property
    def tracking_uri(self) -> str | None:
        """The MLflow store of the run (str), resolved when it starts (the argument,
        ``MLFLOW_TRACKING_URI`` or MLflow's default); before: the argument."""
        return self._run['tracking_uri']

    def _open(self) -> Sender:
        if self._sender is None:
            client = None
            try:
                client = mlflow_client_class('MLflowReport')(
                    tracking_uri=self._run['tracking_uri'])
            except ImportError:
                raise
            except Exception as error:
                # A store that refuses (MLflow 3's file store) is an outage without end:
                # the run goes on, and what it reports is kept for the file.
                refusal = '{}: {}'.format(type(error).__name__, error)
                logger.warning('MLflowReport: the MLflow store %s refuses this run (%s); '
                               'what it reports is kept in %s', self._run['tracking_uri'],
                               refusal, self._unsent_path())
            self._sender = Sender(client, self._run, *self._sender_arguments)
            if client is None:
                self._sender.disabled = refusal
            if self._resumed:
                assert self._trainer is not None
                self._sender.resumed_after = self._rows.last_step_taken(self._trainer)
            # Parameters once: MLflow refuses a parameter logged again with another value.
            # Tags again when resumed: a retried trial of a search updates its number.
            self._sender.offer(Batch(params={} if self._resumed else dict(self._parameters),
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
            self._last_step = max(self._last_step, step)
            self._pending += [[self._name(key), value, now, step] for key, value in
                              values.items()]
        if self._pending and sender.offer(Batch(self._pending), bounded=bounded):
            self._pending, self._pending_rows = [], 0

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
            status = STATUS_FAILED
        elif isinstance(interrupt, (Preempted, KeyboardInterrupt)):
            status = STATUS_KILLED
        elif interrupt is not None and not isinstance(interrupt, Exception):
            status = STATUS_KILLED
        else:
            status = STATUS_FINISHED
        sender = self._open()
        self._queue_rows(self._trainer, bounded=False)
        sender.offer(End(status, int(time.time() * 1000)), bounded=False)
        sender.close(self._flush_timeout, notice=self._notice_wait)
        left = sender.left()
        if sender.refused:
            warnings.warn('MLflowReport: MLflow refused {} request(s) of this run (the logged '
                          'warnings say why)'.format(sender.refused), RuntimeWarning)
        if left:
            path = self._unsent_path()
            try:
                metrics = write_unsent(path, self._run, left, self._last_step)
            except (OSError, ValueError) as error:
                # finalize must not raise, or the other extensions' finalize would not run.
                warnings.warn('MLflowReport: what could not be sent to MLflow could not be '
                              'kept in {} either ({}: {}); it is lost'.format(
                                  path, type(error).__name__, error), RuntimeWarning)
                return
            warnings.warn('MLflowReport: {} metric value(s) could not be sent to MLflow at {} '
                          'before the run ended; they are kept in {}: send them with `{} {}`'
                          .format(metrics, self._run['tracking_uri'], path, SEND_COMMAND,
                                  path), RuntimeWarning)

    def _unsent_path(self) -> str:
        assert self._trainer is not None
        return unsent_path(self._trainer.out, self.run_key)

    def _notice_wait(self, seconds: float) -> None:
        logger.warning('MLflowReport: the run has ended; waiting up to %.0f s more '
                       '(flush_timeout) for MLflow at %s to take what is still queued, then '
                       'it is kept in %s', seconds, self._run['tracking_uri'],
                       self._unsent_path())

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
              '(FILE: a mlflow_unsent_<key>.json), then removes FILE.'.format(SEND_COMMAND))
        return 2
    sent = send_unsent(arguments[0], arguments[1] if len(arguments) == 2 else None)
    print('{} metric value(s) sent from {}'.format(sent, arguments[0]))
    return 0


if __name__ == '__main__':
    sys.exit(_main(sys.argv[1:]))
