"""SlackReport: a training run's progress in a Slack thread, never slowing or breaking it.

The extension decides what to say and when, as PrintReport does with the rows
of a LogReport; the texts come from ``_slack_messages`` and a
``_slack_poster.SlackPoster`` posts them from a background thread through a
bounded queue, retrying what can be retried. slack_sdk is imported only when
a :class:`SlackReport` is made from a token.
"""
from __future__ import annotations

import functools
import logging
import os
import stat
import sys
import warnings
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import chainer
from chainer.training import extension
from chainer.training.extensions import log_report as log_report_module

from researchutils._checks import (
    check_bool,
    check_comm,
    check_int,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_str_list,
    check_timeout,
)
from researchutils.chainer.training._ranks import is_rank_zero
from researchutils.chainer.training.extensions import _slack_messages as messages
from researchutils.chainer.training.extensions._slack_poster import SlackPoster, channel_key
from researchutils.chainer.training.extensions.preemption_snapshot import Preempted

if TYPE_CHECKING:  # slack_sdk is imported when a SlackReport is made from a token
    import slack_sdk

__all__ = ['SlackReport']

logger = logging.getLogger(__name__)


def _check_token_or_client(token_or_client: str | slack_sdk.WebClient | None
                           ) -> str | slack_sdk.WebClient:
    """The token (None: ``SLACK_BOT_TOKEN``) or the client given, checked; nothing is made."""
    if token_or_client is None:
        token_or_client = os.environ.get('SLACK_BOT_TOKEN')
        if not token_or_client:
            raise ValueError('token_or_client is None and the SLACK_BOT_TOKEN environment '
                             'variable is not set: pass a bot token (xoxb-...) or a '
                             'slack_sdk.WebClient')
    if isinstance(token_or_client, str):
        if not token_or_client:
            raise ValueError("token_or_client must be a non-empty token, got ''")
    elif not callable(getattr(token_or_client, 'chat_postMessage', None)):
        raise TypeError('token_or_client must be a Slack bot token, a slack_sdk.WebClient or '
                        'None, got {!r}'.format(token_or_client))
    return token_or_client


def _make_client(token_or_client: str | slack_sdk.WebClient, request_timeout: float
                 ) -> slack_sdk.WebClient:
    """A ``slack_sdk.WebClient`` for a checked token, or the client given."""
    if not isinstance(token_or_client, str):
        return token_or_client
    try:
        from slack_sdk import WebClient
    except ImportError as error:
        raise ImportError('SlackReport needs slack_sdk: pip install researchutils[slack]'
                          ) from error
    return WebClient(token=token_or_client, timeout=request_timeout)


class SlackReport(extension.Extension):
    """Trainer extension posting a run's progress to a Slack thread, in the background.

    Each call posts the rows :class:`~chainer.training.extensions.LogReport`
    added since the previous call, as an aligned table. The run's start
    (host, process id, command line, output folder) opens a thread; reports,
    uploaded images and the end of the run are replies in it. The end is
    ``finished`` after a complete run, ``preempted`` (by which signal, at
    which iteration, and the snapshot the run resumes from when run again)
    after :class:`~researchutils.chainer.training.extensions.PreemptionSnapshot`
    stopped it, ``interrupted`` after a KeyboardInterrupt, or, after a
    crash, an error message with the exception's type, message and traceback
    (and no ``finished`` message).

    Posting happens on a daemon thread fed by a bounded queue: the call on
    the training thread only copies the new rows and enqueues them; the table
    is laid out on the posting thread, and reports that waited in the queue
    together (Slack slower than the reports) go out as one table, so a slow
    Slack sees fewer, longer messages rather than a growing backlog. The thread starts with the
    first report, error or end of the run (the start message goes out
    then, saying "resumed" when a snapshot was loaded before the run or by
    ``snapshot(autoload=True)``), so a run that fails while its extensions
    are initialized leaves no thread behind; it ends at ``finalize``, or
    after a minute with nothing to post. Connection errors,
    timeouts, HTTP 5xx and answers that are not Slack's JSON (a proxy's or
    captive portal's page, even with HTTP 200) are retried with exponential
    backoff, and an outage logs one warning however many messages it costs;
    HTTP 429 waits ``Retry-After``, whatever its body; a rejected token or an
    unknown channel is logged once and stops posting. No Slack failure ever raises into training. At
    ``finalize`` the queue gets ``flush_timeout`` seconds to empty; whatever
    could not be posted is then counted in one :class:`RuntimeWarning`.

    What comes from the run (metric names and values, exception messages,
    tracebacks, paths, the command line) is posted with ``&``, ``<`` and ``>``
    escaped, so a ``<!channel>`` in it shows as text and notifies no one.

    The thread's timestamp and the number of rows posted are serialized, so
    a run resumed from a snapshot continues its thread without repeating
    rows. One SlackReport may serve several runs in turn (the folds of
    :meth:`~researchutils.chainer.training.ChainerExperiment.kfold`): each
    run after a finished one starts a thread of its own.

    Args:
        token_or_client: A Slack bot token, a ``slack_sdk.WebClient`` (or an
            object with its interface), or None to read ``SLACK_BOT_TOKEN``.
            The token needs ``chat:write``, and ``channels:read`` /
            ``groups:read`` to find a channel by name and ``files:write`` to
            upload.
        entries (list of str): Log keys to show, in order; None shows every
            key seen (epoch and iteration first, elapsed_time last). A key
            missing from a row is a blank cell.
        channel (str): Channel name (``'general'`` or ``'#general'``) or ID
            (``'C0123456789'``). A name is looked up once, on the background
            thread, with ``conversations.list``. A name Slack does not allow
            (upper case, a space or another character than lower case
            letters, digits, ``-`` and ``_``, over 80 characters, empty) or
            ``'#'`` before an ID is refused with a ValueError.
        log_report (str or LogReport): Name of the trainer's LogReport, or a
            LogReport to drive (as PrintReport does).
        comm: A ChainerMN communicator (anything with ``rank`` and ``size``):
            only rank 0 posts reports and the start and end messages; an
            error on any rank is posted, naming the rank.
        thread (bool): Post every message of the run as a reply in the thread
            of its start message. False posts each into the channel.
        upload (list of str): Files to upload (with ``files_upload_v2``) into
            the thread whenever they change, e.g. ``['loss.png']`` written by
            PlotReport; paths are relative to the trainer's ``out`` (an
            absolute path or one with ``..`` is refused). A file not there
            yet is skipped; one that cannot be read (a folder, a read error)
            costs only its own upload, with one logged warning.
        queue_size (int): Reports the queue holds. When it is full, the rows
            stay pending and go with the next report that fits.
        flush_timeout (float): Seconds ``finalize`` waits for the queue to
            empty (finite, > 0, as every time below).
        max_retries (int): Retries of one message after a connection error,
            a timeout or HTTP 5xx before it is dropped (HTTP 429 is retried
            until ``finalize``).
        retry_backoff (float): Seconds before the first retry; doubled at
            each next one (> 0).
        max_retry_backoff (float): Upper bound of the wait between retries.
        request_timeout (float): HTTP timeout of the client made from a
            token (a given client keeps its own).
        max_message_chars (int): Longer texts are split into several
            messages, and single over-long lines trimmed.

    Example:
        >>> from chainer.training import extensions
        >>> from researchutils.chainer.training.extensions import SlackReport
        >>> trainer.extend(extensions.LogReport())  # doctest: +SKIP
        >>> trainer.extend(SlackReport(channel='experiments',  # doctest: +SKIP
        ...                            entries=['epoch', 'main/loss', 'elapsed_time']),
        ...                trigger=(1, 'epoch'))
    """

    trigger = 1, 'epoch'
    default_name = 'SlackReport'

    def __init__(self, token_or_client: str | slack_sdk.WebClient | None = None,
                 entries: Sequence[str] | None = None, channel: str = 'general',
                 log_report: str | log_report_module.LogReport = 'LogReport', *,
                 comm: Any = None, thread: bool = True, upload: Sequence[str] = (),
                 queue_size: int = 64, flush_timeout: float = 10.0, max_retries: int = 8,
                 retry_backoff: float = 1.0, max_retry_backoff: float = 30.0,
                 request_timeout: float = 30.0, max_message_chars: int = 3900) -> None:
        # Checked in the signature's order, so the first wrong argument is the one named.
        token_or_client = _check_token_or_client(token_or_client)
        if entries is not None:
            entries = check_str_list(entries, 'entries')
        channel_key(channel)  # refuses what no Slack channel can be, before anything starts
        if not isinstance(log_report, (str, log_report_module.LogReport)):
            raise TypeError('log_report must be the name of a LogReport or a LogReport, got '
                            '{!r}'.format(log_report))
        check_comm(comm)
        thread = check_bool(thread, 'thread')
        upload = check_str_list(upload, 'upload')
        for filename in upload:
            parts = filename.replace(os.sep, '/').split('/')
            if not filename or os.path.isabs(filename) or '..' in parts or '\0' in filename:
                raise ValueError('upload holds {!r}: upload names files under the trainer\'s '
                                 'out folder, by a relative path without ".." or a NUL '
                                 'byte'.format(filename))
        queue_size = check_positive_int(queue_size, 'queue_size')
        flush_timeout = check_timeout(flush_timeout, 'flush_timeout')
        max_retries = check_non_negative_int(max_retries, 'max_retries')
        retry_backoff = check_positive_float(retry_backoff, 'retry_backoff')
        max_retry_backoff = check_positive_float(max_retry_backoff, 'max_retry_backoff')
        request_timeout = check_timeout(request_timeout, 'request_timeout')
        # Slack truncates texts over 40000 characters.
        max_message_chars = check_int(max_message_chars, 'max_message_chars', minimum=200,
                                      maximum=40000)
        self.client = _make_client(token_or_client, request_timeout)
        self._entries = entries
        self._log_report = log_report
        self._comm = comm
        self._upload = list(upload)
        self._flush_timeout = flush_timeout
        self._max_message_chars = max_message_chars
        self._new_poster = functools.partial(
            SlackPoster, self.client, channel, threaded=thread, queue_size=queue_size,
            max_retries=max_retries, retry_backoff=retry_backoff,
            max_retry_backoff=max_retry_backoff)
        self._trainer: chainer.training.Trainer | None = None
        self._start_run()

    def _start_run(self) -> None:
        """Resets the state of one run: a new queue and poster (so a new thread in Slack)."""
        self._poster = self._new_poster()
        self._posted_rows = 0
        self._uploaded: dict[str, tuple[int, int]] = {}  # (st_mtime_ns, st_size) uploaded
        self._unreadable: set[str] = set()  # upload names warned about in this run
        self._crashed = False
        self._finalized = False
        self._start_pending = False
        self._start_iteration = 0

    @property
    def thread_ts(self) -> str | None:
        """Timestamp of the run's Slack thread (str), or None until its start is posted.

        Example:
            >>> report.thread_ts  # doctest: +SKIP
            '1700000000.000100'
        """
        return self._poster.thread_ts

    def initialize(self, trainer: chainer.training.Trainer) -> None:
        """Notes the run's start; its message is queued with the first report (rank 0).

        The message says whether the run started or resumed, decided at the
        first report, error or end: Chainer's ``snapshot(autoload=True)``
        loads the snapshot in its own ``initialize``, after this one, and
        the iteration it restores is what makes the run a resumed one.

        No thread starts here: Chainer calls ``initialize`` outside the
        try/finally of its loop, so when a later extension's ``initialize``
        raises, neither ``on_error`` nor ``finalize`` runs. The poster starts
        with the first report, error or ``finalize``.

        Called again after ``finalize`` (the same SlackReport given to the
        trainers of several runs, as :meth:`ChainerExperiment.kfold
        <researchutils.chainer.training.ChainerExperiment.kfold>` and
        ``grid_search`` do), it starts a fresh run: a new queue, poster and
        Slack thread, and all of the new trainer's log rows.
        """
        if self._finalized:
            self._start_run()
        self._trainer = trainer
        if isinstance(self._log_report, str):
            try:
                trainer.get_extension(self._log_report)
            except ValueError:
                raise ValueError('log_report {!r} names no extension of the trainer; extend the '
                                 'trainer with a LogReport first'.format(self._log_report)
                                 ) from None
        self._start_iteration = trainer.updater.iteration
        self._start_pending = is_rank_zero(self._comm)

    def _post_start(self, trainer: chainer.training.Trainer) -> None:
        """Queues the start message, once per run, ahead of everything else of the run."""
        if self._start_pending:
            self._start_pending = False
            self._poster.post(messages.start_texts(
                messages.location(self._comm), self._start_iteration, trainer.out,
                self._max_message_chars), root=True)

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        """Queues the LogReport rows added since the last call (and changed files)."""
        if not is_rank_zero(self._comm):
            return
        try:
            self._post_start(trainer)
            self._post_rows(trainer, bounded=True)
            self._post_files(trainer)
        except Exception:
            logger.exception('SlackReport: a report could not be formatted; training goes on')

    def _post_rows(self, trainer: chainer.training.Trainer, bounded: bool) -> None:
        # As PrintReport: read the LogReport by name, or drive the one given.
        log_report = self._log_report
        if isinstance(log_report, str):
            log_report = trainer.get_extension(log_report)
        else:
            log_report(trainer)
        rows = [dict(row) for row in log_report.log[self._posted_rows:]]  # read on another thread
        if rows and self._poster.post_rows(self._entries, rows, self._max_message_chars,
                                           bounded=bounded):
            self._posted_rows += len(rows)

    def _post_files(self, trainer: chainer.training.Trainer) -> None:
        for filename in self._upload:
            changed = self._read_if_changed(filename, os.path.join(trainer.out, filename))
            if changed is not None:
                signature, data = changed
                if self._poster.upload(os.path.basename(filename), data):
                    self._uploaded[filename] = signature

    def _read_if_changed(self, filename: str, path: str
                         ) -> tuple[tuple[int, int], bytes] | None:
        """(signature, bytes) of the file to upload if it changed since its upload, else None.

        The file is opened once and its size and time read from the open
        file, so one replaced or removed meanwhile is read whole or not at
        all. One not there (not written yet) is skipped; one that cannot be
        read (a folder, a FIFO, a read error) costs only its own upload and
        one warning, however many reports find it so.
        """
        try:
            # Non-blocking: opening a FIFO must not wait for a writer on the training thread.
            fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0)
                         | getattr(os, 'O_BINARY', 0))
        except FileNotFoundError:
            return None
        except OSError as error:
            self._warn_unreadable(filename, path, error)
            return None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                kind = 'a folder' if stat.S_ISDIR(status.st_mode) else 'no regular file'
                self._warn_unreadable(filename, path, 'it is ' + kind)
                return None
            signature = (status.st_mtime_ns, status.st_size)
            if self._uploaded.get(filename) == signature:
                return None
            with open(fd, 'rb', closefd=False) as file:
                data = file.read()
        except OSError as error:
            self._warn_unreadable(filename, path, error)
            return None
        finally:
            os.close(fd)
        self._unreadable.discard(filename)
        return signature, data

    def _warn_unreadable(self, filename: str, path: str, reason: str | Exception) -> None:
        if filename not in self._unreadable:
            self._unreadable.add(filename)
            if isinstance(reason, Exception):
                reason = '{}: {}'.format(type(reason).__name__, reason)
            logger.warning('SlackReport: %s (upload %r) cannot be uploaded (%s); the other '
                           'messages and files still go', path, filename, reason)

    def on_error(self, trainer: chainer.training.Trainer, exc: Exception,
                 tb: TracebackType | None) -> None:
        """Posts the exception's type, message and traceback (from any rank)."""
        self._crashed = True
        try:
            self._post_start(trainer)
            self._poster.post(messages.error_texts(
                messages.location(self._comm), trainer.updater.iteration, exc, tb,
                self._max_message_chars))
        except Exception:
            logger.exception('SlackReport: the error message could not be formatted')

    def finalize(self) -> None:
        """Posts the end of the run and waits up to ``flush_timeout`` s for the queue."""
        if self._finalized or self._trainer is None:
            return
        self._finalized = True
        trainer = self._trainer
        # Chainer calls finalize in a finally block: a KeyboardInterrupt or a Preempted
        # (not an Exception, which on_error reported) is what interrupted the run.
        interrupt = sys.exc_info()[1]
        if isinstance(interrupt, Exception):
            interrupt = None
        try:
            self._post_start(trainer)
            if is_rank_zero(self._comm) and not self._crashed:
                self._post_rows(trainer, bounded=False)
                self._post_files(trainer)
                updater = trainer.updater
                if isinstance(interrupt, Preempted):
                    texts = messages.preempted_texts(
                        interrupt.iteration, updater.epoch, trainer.elapsed_time,
                        interrupt.signal_name, interrupt.path, interrupt.code,
                        self._max_message_chars)
                else:
                    texts = messages.end_texts(
                        updater.iteration, updater.epoch, trainer.elapsed_time, trainer.out,
                        interrupt, self._max_message_chars)
                self._poster.post(texts)
        except Exception:
            logger.exception('SlackReport: the final message could not be formatted')
        undelivered = self._poster.close(self._flush_timeout)
        if undelivered:
            warnings.warn('SlackReport: {} message(s) could not be posted to Slack and were '
                          'dropped (the logged warnings say why; finalize waited at most '
                          'flush_timeout={} s)'.format(undelivered, self._flush_timeout),
                          RuntimeWarning)

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        """Saves the thread's timestamp and how many log rows were posted."""
        loading = isinstance(serializer, chainer.Deserializer)
        if self._finalized and loading:
            self._start_run()  # the state loaded belongs to the next run, not the finished one
        self._posted_rows = int(serializer('_posted_rows', self._posted_rows))
        thread_ts = serializer('_thread_ts', self._poster.thread_ts or '')
        self._poster.thread_ts = str(thread_ts) or None
        if loading and self._start_pending:
            # Loaded between initialize (which set the trainer) and the first report
            # (snapshot autoload): Trainer.serialize restores the updater before the
            # extensions, so this is the iteration the run resumes at.
            trainer = cast('chainer.training.Trainer', self._trainer)
            self._start_iteration = trainer.updater.iteration
        if isinstance(self._log_report, log_report_module.LogReport):
            self._log_report.serialize(serializer['_log_report'])
