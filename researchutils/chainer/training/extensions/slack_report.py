"""SlackReport: a training run's progress in a Slack thread, never slowing or breaking it.

The extension's call on the training thread only formats text and puts it on
a bounded queue; a background thread posts it with ``slack_sdk.WebClient``,
retrying what can be retried. slack_sdk is imported only when a
:class:`SlackReport` is made from a token.
"""
import collections
import http.client
import logging
import os
import re
import socket
import sys
import threading
import time
import traceback
import warnings

import chainer
from chainer.training import extension
from chainer.training.extensions import log_report as log_report_module

from researchutils._checks import (
    check_bool,
    check_int,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_timeout,
)

__all__ = ['SlackReport']

logger = logging.getLogger(__name__)

_CHANNEL_ID = re.compile(r'^[CGD][A-Z0-9]{8,}$')
# Slack's error codes look like this; anything else in "error" is slack_sdk describing an
# answer that was not Slack's JSON (a proxy's or a captive portal's page).
_SLACK_ERROR_CODE = re.compile(r'^[a-z0-9_]+$')
# Slack errors after which this run cannot post anything: stop trying.
_FATAL_ERRORS = frozenset([
    'invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired',
    'no_permission', 'org_login_required', 'channel_not_found', 'not_in_channel',
    'is_archived', 'missing_scope'])
_FENCE = '```'
# Room taken by the opening and closing fences of a code block and their newlines.
_FENCE_CHARS = 2 * len(_FENCE) + 2
_FIRST_COLUMNS = ('epoch', 'iteration')
# Seconds the poster thread waits with nothing to post before it ends.
_IDLE_EXIT = 60.0
_LAST_COLUMNS = ('elapsed_time',)


# Formatting -------------------------------------------------------------------

def _cell(value):
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    try:
        return '{:.6g}'.format(float(value))
    except (TypeError, ValueError):
        pass
    try:
        return str(value)
    except Exception:
        # A value that cannot show itself must not cost the rest of its row.
        return '?'


def _infer_entries(rows):
    keys = set()
    for row in rows:
        keys.update(row.keys())
    first = [key for key in _FIRST_COLUMNS if key in keys]
    last = [key for key in _LAST_COLUMNS if key in keys]
    middle = sorted(keys.difference(first, last))
    return first + middle + last


def _table_lines(entries, rows):
    cells = [[_cell(row[entry]) if entry in row else '' for entry in entries] for row in rows]
    widths = [max([len(entry)] + [len(line[i]) for line in cells])
              for i, entry in enumerate(entries)]
    lines = [[entry for entry in entries]] + cells
    return ['  '.join(text.ljust(width) for text, width in zip(line, widths)).rstrip()
            for line in lines]


def _trim(text, limit):
    return text if len(text) <= limit else text[:max(0, limit - 1)] + '\u2026'


def _split_message(title, lines, limit, repeated_lines=0):
    """Splits ``title`` + a code block of ``lines`` into texts of at most ``limit`` chars.

    The first ``repeated_lines`` lines (a table header) head every block; a
    line too long for one message is trimmed.
    """
    title = _trim(title, limit // 2) if title else ''
    head = [_trim(line, limit // 3) for line in lines[:repeated_lines]]
    body = lines[repeated_lines:] or ([] if head else [''])
    texts = []
    current = []

    def room(prefix):
        used = len(prefix) + _FENCE_CHARS + sum(len(line) + 1 for line in head)
        return limit - used

    def render(prefix, block):
        return prefix + _FENCE + '\n' + '\n'.join(head + block) + '\n' + _FENCE

    prefix = title + '\n' if title else ''
    for line in body:
        line = _trim(line, max(1, room(prefix) - 1))
        if current and len(render(prefix, current + [line])) > limit:
            texts.append(render(prefix, current))
            prefix, current = '', []
            line = _trim(line, max(1, room(prefix) - 1))
        current.append(line)
    texts.append(render(prefix, current))
    return texts


def _describe_error(error):
    """Returns (HTTP status or None, Slack error code or None, Retry-After or None).

    The code is None when the answer was not Slack's JSON (an HTTP 5xx page, a
    proxy's HTML, an empty or cut body), whatever its status.
    """
    response = getattr(error, 'response', None)
    if response is None:
        return None, None, None
    status = getattr(response, 'status_code', None)
    code = None
    try:
        code = response.get('error')
    except Exception:  # the body was not JSON (an HTTP 5xx page)
        pass
    if not (isinstance(code, str) and _SLACK_ERROR_CODE.match(code)):
        code = None
    retry_after = None
    for key, value in (getattr(response, 'headers', None) or {}).items():
        if key.lower() == 'retry-after':
            value = value[0] if isinstance(value, (list, tuple)) else value
            try:
                retry_after = max(0.0, float(value))
            except (TypeError, ValueError):
                pass
    return status, code, retry_after


# The background poster -------------------------------------------------------

class _Text(object):
    """Messages of one report; ``root`` marks the run's start message."""

    def __init__(self, texts, root=False):
        self.texts = texts
        self.root = root


class _Rows(object):
    """New LogReport rows. Row reports that wait in the queue together go out as one table,
    so a slow Slack gets fewer, longer messages instead of a growing backlog."""

    def __init__(self, entries, rows, limit):
        self.entries = entries
        self.rows = rows
        self.limit = limit

    def joins(self, other):
        return isinstance(other, _Rows) and other.entries == self.entries


class _File(object):
    def __init__(self, filename, data):
        self.filename = filename
        self.data = data


class _Outbox(object):
    """A bounded FIFO between the training thread and the poster."""

    def __init__(self, size):
        self._items = collections.deque()
        self._size = size
        self._closed = False
        self._condition = threading.Condition()
        self.accepted = 0  # messages ever accepted

    def offer(self, item, bounded=True):
        """Appends ``item`` unless the outbox is full (or closed); never blocks."""
        with self._condition:
            if self._closed or (bounded and len(self._items) >= self._size):
                return False
            self._items.append(item)
            self.accepted += _count(item)
            self._condition.notify()
            return True

    def take_following(self, predicate):
        """Removes and returns the items at the front for which ``predicate`` holds."""
        taken = []
        with self._condition:
            while self._items and predicate(self._items[0]):
                taken.append(self._items.popleft())
        return taken

    def take(self, timeout):
        """The next item; None when closed and empty, or after ``timeout`` seconds."""
        with self._condition:
            if not self._items and not self._closed:
                self._condition.wait(timeout)
            return self._items.popleft() if self._items else None

    @property
    def finished(self):
        with self._condition:
            return self._closed and not self._items

    @property
    def empty(self):
        with self._condition:
            return not self._items

    def close(self):
        with self._condition:
            self._closed = True
            self._condition.notify_all()


def _count(item):
    """Messages an item stands for in the delivered/dropped accounting (a row report is one)."""
    return len(item.texts) if isinstance(item, _Text) else 1


class _Poster(object):
    """Posts items from an outbox to Slack on a daemon thread, retrying with backoff.

    The thread starts with the first item and ends when the outbox is closed
    and empty, or after ``idle_exit`` seconds with nothing to post (the next
    item starts it again), so it never outlives a run that was not finalized.
    """

    def __init__(self, client, channel, threaded, outbox, max_retries, retry_backoff,
                 max_retry_backoff, idle_exit=_IDLE_EXIT):
        self.client = client
        self.channel = channel
        self.threaded = threaded
        self.outbox = outbox
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self.delivered = 0
        self._thread_ts = None
        self._lock = threading.Lock()
        self._abort = threading.Event()
        self._channel_id = None
        self._post_channel = None
        self._disabled = None
        self._failing = False
        self._dropped_in_outage = 0
        self._thread = None
        self._thread_lock = threading.Lock()
        self._idle_exit = idle_exit

    @property
    def thread_ts(self):
        with self._lock:
            return self._thread_ts

    @thread_ts.setter
    def thread_ts(self, value):
        with self._lock:
            self._thread_ts = value

    def start(self):
        """Starts the thread unless it is running; call after offering an item."""
        with self._thread_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name='SlackReport',
                                                daemon=True)
                self._thread.start()

    def close(self, timeout):
        """Waits up to ``timeout`` s for the outbox to empty; returns messages not posted.

        After the timeout the poster gives up what is left; a request under
        way finishes on its own, unwaited for (the thread is a daemon).
        """
        self.outbox.close()
        if not self.outbox.finished:
            self.start()
        with self._thread_lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                self._abort.set()
        with self._lock:
            return self.outbox.accepted - self.delivered

    def _run(self):
        idle_since = time.monotonic()
        while not self.outbox.finished:
            item = self.outbox.take(timeout=min(1.0, self._idle_exit))
            if item is None:
                if time.monotonic() - idle_since < self._idle_exit:
                    continue
                with self._thread_lock:
                    # An item offered before start() is seen here, so none is stranded.
                    if self.outbox.empty:
                        self._thread = None
                        return
                continue
            idle_since = time.monotonic()
            if isinstance(item, _Text):
                for index, text in enumerate(item.texts):
                    if not self._deliver(self._post_text, text, item.root and index == 0):
                        break
                    self._credit(1)
            elif isinstance(item, _Rows):
                group = [item] + self.outbox.take_following(item.joins)
                rows = [row for report in group for row in report.rows]
                try:
                    entries = item.entries if item.entries is not None else _infer_entries(rows)
                    texts = _split_message('', _table_lines(entries, rows), item.limit,
                                           repeated_lines=1)
                except Exception:
                    # Cells already fall back to '?'; this guard only keeps an unforeseen
                    # formatting bug from killing the thread and every later message.
                    logger.exception('SlackReport: log rows could not be formatted; they are '
                                     'dropped')
                    continue
                if all(self._deliver(self._post_text, text, False) for text in texts):
                    self._credit(len(group))
            elif self._deliver(self._upload, item):
                self._credit(1)

    def _credit(self, messages):
        with self._lock:
            self.delivered += messages

    def _deliver(self, send, *args):
        """Sends one message, retrying; returns whether it was posted."""
        attempt = 0
        while True:
            if self._disabled is not None or self._abort.is_set():
                return False
            try:
                send(*args)
            except _Skip:
                return False
            except Exception as error:
                wait = self._wait_before_retry(error, attempt)
                if wait is None or self._abort.wait(wait):
                    return False
                attempt += 1
                continue
            if self._failing:
                logger.warning('SlackReport: Slack answers again; posting resumed (%d '
                               'message(s) dropped meanwhile)', self._dropped_in_outage)
                self._failing = False
            return True

    def _wait_before_retry(self, error, attempt):
        """Seconds to wait before retrying after ``error``, or None to give up."""
        status, code, retry_after = _describe_error(error)
        if status == 429 or code == 'ratelimited':
            wait = 1.0 if retry_after is None else retry_after
            logger.warning('SlackReport: rate limited by Slack; retrying in %.1f s', wait)
            return wait
        if code in _FATAL_ERRORS:
            self._disabled = code
            logger.warning('SlackReport: Slack refused with %r (channel %r); nothing more will '
                           'be posted by this run', code, self.channel)
            return None
        # An answer that is not Slack's JSON, whatever its status, comes from something in
        # between (a proxy, a captive portal): an outage, as a 5xx or a lost connection is.
        transient = (status is not None and (status >= 500 or code is None)) or (
            status is None and isinstance(error, (OSError, http.client.HTTPException)))
        if not transient:
            logger.warning('SlackReport: a message could not be posted and is dropped: %s: %s',
                           type(error).__name__, error)
            return None
        if not self._failing:
            # One warning per outage; what it drops is counted by the RuntimeWarning at
            # finalize and by the message when Slack answers again.
            logger.warning('SlackReport: Slack is unreachable or answers what is not its API '
                           '(%s: %s); retrying in the background, dropping a message after '
                           '%d retries', type(error).__name__, error, self.max_retries)
            self._failing = True
            self._dropped_in_outage = 0
        if attempt >= self.max_retries:
            self._dropped_in_outage += 1
            logger.debug('SlackReport: a message is dropped after %d attempts: %s: %s',
                         attempt + 1, type(error).__name__, error)
            return None
        return min(self.retry_backoff * 2 ** attempt, self.max_retry_backoff)

    def _resolve_channel(self):
        """Finds the channel's ID once (names through conversations.list)."""
        if self._post_channel is not None:
            return self._post_channel
        name = self.channel.lstrip('#')
        if _CHANNEL_ID.match(name):
            self._channel_id = self._post_channel = name
            return name
        cursor = None
        while True:
            try:
                response = self.client.conversations_list(
                    types='public_channel,private_channel', exclude_archived=True,
                    limit=200, cursor=cursor)
            except Exception as error:
                if _describe_error(error)[1] != 'missing_scope':
                    raise
                logger.warning('SlackReport: the token may not list channels (channels:read); '
                               'posting to %r by name, and files cannot be uploaded', name)
                self._post_channel = '#' + name
                return self._post_channel
            for channel in response.get('channels') or []:
                if channel.get('name') == name:
                    self._channel_id = self._post_channel = channel['id']
                    return self._post_channel
            cursor = (response.get('response_metadata') or {}).get('next_cursor')
            if not cursor:
                self._disabled = 'channel_not_found'
                logger.warning('SlackReport: no channel named %r is visible to the bot; '
                               'nothing will be posted by this run', name)
                raise _Skip()

    def _post_text(self, text, root):
        channel = self._resolve_channel()
        thread_ts = self.thread_ts if self.threaded else None
        response = self.client.chat_postMessage(
            channel=channel, text=text, thread_ts=thread_ts, unfurl_links=False)
        if root and self.threaded and thread_ts is None:
            self.thread_ts = response.get('ts')

    def _upload(self, item):
        self._resolve_channel()
        if self._channel_id is None:
            raise _Skip()
        self.client.files_upload_v2(
            channel=self._channel_id, file=item.data, filename=item.filename,
            title=item.filename, thread_ts=self.thread_ts if self.threaded else None)


class _Skip(Exception):
    """Raised by a send that cannot succeed (the reason is logged already); not retried."""


# The extension ---------------------------------------------------------------

def _make_client(token_or_client, request_timeout):
    if token_or_client is None:
        token_or_client = os.environ.get('SLACK_BOT_TOKEN')
        if not token_or_client:
            raise ValueError('token_or_client is None and the SLACK_BOT_TOKEN environment '
                             'variable is not set: pass a bot token (xoxb-...) or a '
                             'slack_sdk.WebClient')
    if isinstance(token_or_client, str):
        if not token_or_client:
            raise ValueError("token_or_client must be a non-empty token, got ''")
        try:
            from slack_sdk import WebClient
        except ImportError as error:
            raise ImportError('SlackReport needs slack_sdk: pip install researchutils[slack]'
                              ) from error
        return WebClient(token=token_or_client, timeout=request_timeout)
    if not callable(getattr(token_or_client, 'chat_postMessage', None)):
        raise TypeError('token_or_client must be a Slack bot token, a slack_sdk.WebClient or '
                        'None, got {!r}'.format(token_or_client))
    return token_or_client


class SlackReport(extension.Extension):
    """Trainer extension posting a run's progress to a Slack thread, in the background.

    Each call posts the rows :class:`~chainer.training.extensions.LogReport`
    added since the previous call, as an aligned table. The run's start
    (host, process id, command line, output folder) opens a thread; reports,
    uploaded images and the end of the run are replies in it. The end is
    ``finished`` after a complete run, ``interrupted`` after a
    KeyboardInterrupt, or, after a crash, an error message with the
    exception's type, message and traceback (and no ``finished`` message).

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
            thread, with ``conversations.list``.
        log_report (str or LogReport): Name of the trainer's LogReport, or a
            LogReport to drive (as PrintReport does).
        comm: A ChainerMN communicator (anything with ``rank`` and ``size``):
            only rank 0 posts reports and the start and end messages; an
            error on any rank is posted, naming the rank.
        thread (bool): Post every message of the run as a reply in the thread
            of its start message. False posts each into the channel.
        upload (list of str): Files to upload (with ``files_upload_v2``) into
            the thread whenever they change, e.g. ``['loss.png']`` written by
            PlotReport; relative paths are under the trainer's ``out``.
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

    def __init__(self, token_or_client=None, entries=None, channel='general',
                 log_report='LogReport', *, comm=None, thread=True, upload=(), queue_size=64,
                 flush_timeout=10.0, max_retries=8, retry_backoff=1.0, max_retry_backoff=30.0,
                 request_timeout=30.0, max_message_chars=3900):
        if entries is not None:
            if isinstance(entries, str) or not all(isinstance(e, str) for e in entries):
                raise TypeError('entries must be a list of str or None, got {!r}'.format(entries))
            entries = list(entries)
        if not isinstance(channel, str) or not channel.lstrip('#'):
            raise ValueError('channel must be a channel name or ID, got {!r}'.format(channel))
        if not isinstance(log_report, (str, log_report_module.LogReport)):
            raise TypeError('log_report must be the name of a LogReport or a LogReport, got '
                            '{!r}'.format(log_report))
        if comm is not None and not (isinstance(getattr(comm, 'rank', None), int)
                                     and isinstance(getattr(comm, 'size', None), int)):
            raise TypeError('comm must be a ChainerMN communicator (with int rank and size), '
                            'got {!r}'.format(comm))
        if isinstance(upload, str) or not all(isinstance(f, str) for f in upload):
            raise TypeError('upload must be a list of file names, got {!r}'.format(upload))
        thread = check_bool(thread, 'thread')
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
        self._poster_arguments = (channel, thread, queue_size, max_retries, retry_backoff,
                                  max_retry_backoff)
        self._trainer = None
        self._start_run()

    def _start_run(self):
        """Resets the state of one run: a new queue and poster (so a new thread in Slack)."""
        channel, thread, queue_size, max_retries, retry_backoff, max_retry_backoff = (
            self._poster_arguments)
        self._poster = _Poster(self.client, channel, thread, _Outbox(queue_size), max_retries,
                               retry_backoff, max_retry_backoff)
        self._posted_rows = 0
        self._uploaded = {}
        self._crashed = False
        self._finalized = False
        self._start_pending = False
        self._start_iteration = 0

    @property
    def thread_ts(self):
        """Timestamp of the run's Slack thread (str), or None until its start is posted.

        Example:
            >>> report.thread_ts  # doctest: +SKIP
            '1700000000.000100'
        """
        return self._poster.thread_ts

    @property
    def _rank_zero(self):
        return self._comm is None or self._comm.rank == 0

    def _where(self):
        host = socket.gethostname()
        if self._comm is None:
            return 'on {}'.format(host)
        return 'on {} (rank {} of {})'.format(host, self._comm.rank, self._comm.size)

    def _enqueue(self, title, lines, root=False):
        # Start, error and end messages: never refused for a full queue (rows are).
        texts = _split_message(title, lines, self._max_message_chars)
        self._poster.outbox.offer(_Text(texts, root), bounded=False)

    def initialize(self, trainer):
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
        self._start_pending = self._rank_zero

    def _enqueue_start(self, trainer):
        """Queues the start message, once per run, ahead of everything else of the run."""
        if not self._start_pending:
            return
        self._start_pending = False
        if self._start_iteration:
            title = ':arrows_counterclockwise: Training resumed at iteration {} {}'.format(
                self._start_iteration, self._where())
        else:
            title = ':rocket: Training started {}'.format(self._where())
        lines = ['host:    {}'.format(socket.gethostname()),
                 'pid:     {}'.format(os.getpid()),
                 'command: {}'.format(' '.join([sys.executable] + sys.argv)),
                 'out:     {}'.format(os.path.abspath(trainer.out))]
        self._enqueue(title, lines, root=True)

    def __call__(self, trainer):
        """Formats the LogReport rows added since the last call and enqueues them."""
        if not self._rank_zero:
            return
        try:
            self._enqueue_start(trainer)
            self._report_rows(trainer, bounded=True)
            self._report_files(trainer)
            self._poster.start()
        except Exception:
            logger.exception('SlackReport: a report could not be formatted; training goes on')

    def _log(self, trainer):
        log_report = self._log_report
        if isinstance(log_report, str):
            log_report = trainer.get_extension(log_report)
        else:
            log_report(trainer)
        return log_report.log

    def _report_rows(self, trainer, bounded):
        rows = self._log(trainer)[self._posted_rows:]
        if not rows:
            return
        rows = [dict(row) for row in rows]  # the poster reads them on its own thread
        if self._poster.outbox.offer(_Rows(self._entries, rows, self._max_message_chars),
                                     bounded=bounded):
            self._posted_rows += len(rows)

    def _report_files(self, trainer):
        for filename in self._upload:
            path = os.path.join(trainer.out, filename)
            try:
                status = os.stat(path)
            except OSError:
                continue
            signature = (status.st_mtime_ns, status.st_size)
            if self._uploaded.get(filename) == signature:
                continue
            with open(path, 'rb') as f:
                data = f.read()
            if self._poster.outbox.offer(_File(os.path.basename(filename), data)):
                self._uploaded[filename] = signature

    def on_error(self, trainer, exc, tb):
        """Posts the exception's type, message and traceback (from any rank)."""
        self._crashed = True
        try:
            self._enqueue_start(trainer)
            title = ':x: Training failed at iteration {} {}: {}: {}'.format(
                trainer.updater.iteration, self._where(), type(exc).__name__, exc)
            lines = ''.join(traceback.format_exception(type(exc), exc, tb)).rstrip().split('\n')
            self._enqueue(title, lines)
        except Exception:
            logger.exception('SlackReport: the error message could not be formatted')
        self._poster.start()

    def finalize(self):
        """Posts the end of the run and waits up to ``flush_timeout`` s for the queue."""
        if self._finalized or self._trainer is None:
            return
        self._finalized = True
        trainer = self._trainer
        interrupt = sys.exc_info()[1]
        try:
            self._enqueue_start(trainer)
            if self._rank_zero and not self._crashed and trainer is not None:
                self._report_rows(trainer, bounded=False)
                self._report_files(trainer)
                where = 'at iteration {} (epoch {}, {:.1f} s)'.format(
                    trainer.updater.iteration, trainer.updater.epoch, trainer.elapsed_time)
                if interrupt is not None and not isinstance(interrupt, Exception):
                    title = ':warning: Training interrupted ({}) {}'.format(
                        type(interrupt).__name__, where)
                else:
                    title = ':white_check_mark: Training finished {}'.format(where)
                self._enqueue(title, [os.path.abspath(trainer.out)])
        except Exception:
            logger.exception('SlackReport: the final message could not be formatted')
        undelivered = self._poster.close(self._flush_timeout)
        if undelivered:
            warnings.warn('SlackReport: {} message(s) could not be posted to Slack and were '
                          'dropped (the logged warnings say why; finalize waited at most '
                          'flush_timeout={} s)'.format(undelivered, self._flush_timeout),
                          RuntimeWarning)

    def serialize(self, serializer):
        """Saves the thread's timestamp and how many log rows were posted."""
        if self._finalized and isinstance(serializer, chainer.Deserializer):
            self._start_run()  # the state loaded belongs to the next run, not the finished one
        self._posted_rows = int(serializer('_posted_rows', self._posted_rows))
        thread_ts = serializer('_thread_ts', self._poster.thread_ts or '')
        self._poster.thread_ts = str(thread_ts) or None
        if isinstance(serializer, chainer.Deserializer) and self._start_pending:
            # Loaded between initialize and the first report (snapshot autoload):
            # Trainer.serialize restores the updater before the extensions, so this is the
            # iteration the run resumes at.
            self._start_iteration = self._trainer.updater.iteration
        if isinstance(self._log_report, log_report_module.LogReport):
            self._log_report.serialize(serializer['_log_report'])
