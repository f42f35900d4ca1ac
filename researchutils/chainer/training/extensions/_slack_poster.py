"""SlackPoster: SlackReport's messages sent to Slack from a daemon thread, with retries.

The training thread hands messages to :class:`SlackPoster` and returns at
once; they wait in the bounded queue of a ``_background.BackgroundWriter`` (the thread and
retry loop the reporting extensions share) until the poster's thread sends them with a
``slack_sdk.WebClient``. A connection error, a timeout,
HTTP 5xx or an answer that is not Slack's JSON is retried with backoff, HTTP
429 after its ``Retry-After``; an error that no retry can cure (a rejected
token, an unknown channel) stops posting. Each is logged once, and nothing
raises into training.
"""
from __future__ import annotations

import http.client
import logging
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias, TypeGuard

from researchutils.chainer.training.extensions import _slack_messages
from researchutils.chainer.training.extensions._background import BackgroundWriter, Skip

if TYPE_CHECKING:  # slack_sdk is imported when a SlackReport is made from a token
    import slack_sdk

__all__ = ['SlackPoster', 'channel_key']

# Users configure SlackReport's logging by the name of its public module.
logger = logging.getLogger('researchutils.chainer.training.extensions.slack_report')

_CHANNEL_ID = re.compile(r'^[CGD][A-Z0-9]{8,}$')
# Slack's rule for channel names: lower case letters, digits, '-' and '_', at most 80
# characters (letters of scripts without case, such as Japanese or Hindi, are allowed too).
_MAX_CHANNEL_NAME_CHARS = 80
_CHANNEL_NAME_PUNCTUATION = '-_'
# Slack's error codes look like this; anything else in "error" is slack_sdk describing an
# answer that was not Slack's JSON (a proxy's or a captive portal's page).
_SLACK_ERROR_CODE = re.compile(r'^[a-z0-9_]+$')
# Slack errors after which this run cannot post anything: stop trying.
_FATAL_ERRORS = frozenset([
    'invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired',
    'no_permission', 'org_login_required', 'channel_not_found', 'not_in_channel',
    'is_archived', 'missing_scope'])


def channel_key(channel: str) -> str:
    """What ``channel`` is to Slack: a channel ID as given, or a name without its ``'#'``.

    A value no Slack channel can ever have is refused here, so that a run is
    never started that could post nothing: a name with a space, an upper
    case letter or another character than a lower case letter, a digit,
    ``-`` or ``_``, a name over 80 characters, an empty one, and a ``'#'``
    before an ID (IDs, like ``'C0123ABCD'``, take none).

    Raises:
        TypeError: ``channel`` is not a str.
        ValueError: ``channel`` is neither a channel ID nor a name Slack allows.

    Example:
        >>> channel_key('#general'), channel_key('C0123ABCD')
        ('general', 'C0123ABCD')
        >>> channel_key('my channel')
        Traceback (most recent call last):
        ...
        ValueError: channel must be a channel ID ... got 'my channel': a name holds no ' '
    """
    if not isinstance(channel, str):
        raise TypeError('channel must be a channel ID or name (str), got {!r}'.format(channel))
    if _CHANNEL_ID.match(channel):
        return channel
    message = ("channel must be a channel ID ('C0123ABCD') or a Slack channel name "
               "('general' or '#general'), got {!r}: ".format(channel))
    name = channel[1:] if channel.startswith('#') else channel
    if _CHANNEL_ID.match(name):
        raise ValueError(message + "a channel ID takes no '#'")
    if not name:
        raise ValueError(message + 'the name is empty')
    if len(name) > _MAX_CHANNEL_NAME_CHARS:
        raise ValueError(message + 'a name has at most {} characters, this one {}'.format(
            _MAX_CHANNEL_NAME_CHARS, len(name)))
    for character in name:
        if character.lower() != character:
            raise ValueError(message + 'a name is lower case')
        # Letters, digits and the marks that scripts such as Devanagari combine with them.
        if not (unicodedata.category(character)[0] in 'LNM'
                or character in _CHANNEL_NAME_PUNCTUATION):
            raise ValueError(message + 'a name holds no {!r}'.format(character))
    if all(character in _CHANNEL_NAME_PUNCTUATION for character in name):
        raise ValueError(message + 'a name needs a letter or a digit')
    return name


# What waits in the queue ------------------------------------------------------

class _Texts(object):
    """The texts of one message; ``root`` marks the run's start message."""

    def __init__(self, texts: list[str], root: bool) -> None:
        self.texts = texts
        self.root = root
        self.messages = len(texts)  # what the delivered/dropped accounting counts


class _Rows(object):
    """New LogReport rows. Row reports that wait in the queue together go out as one table,
    so a slow Slack gets fewer, longer messages instead of a growing backlog."""

    messages = 1

    def __init__(self, entries: Sequence[str] | None, rows: Sequence[Mapping[str, object]],
                 limit: int) -> None:
        self.entries = entries
        self.rows = rows
        self.limit = limit

    def joins(self, other: _Item) -> TypeGuard[_Rows]:
        return isinstance(other, _Rows) and other.entries == self.entries


class _File(object):
    messages = 1

    def __init__(self, filename: str, data: bytes) -> None:
        self.filename = filename
        self.data = data


# What waits in the queue: one of the three above.
_Item: TypeAlias = _Texts | _Rows | _File


def _describe_error(error: BaseException) -> tuple[int | None, str | None, float | None]:
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


class SlackPoster(BackgroundWriter[_Item]):
    """Posts one run's messages to a Slack channel from a daemon thread named SlackReport.

    :meth:`post`, :meth:`post_rows` and :meth:`upload` queue a message and
    start the thread unless it runs; they never block. The thread ends when
    :meth:`close` has been called and the queue is empty, or after
    ``idle_timeout`` seconds with nothing to post (the next message starts it
    again), so it never outlives a run that was not finalized.

    Args:
        client: A ``slack_sdk.WebClient`` (or an object with its interface).
        channel (str): Channel name (``'general'``, ``'#general'``) or ID;
            a name is looked up once, on the thread. One that Slack cannot
            have is refused (see :func:`channel_key`).
        threaded (bool): Post every message as a reply to the start message.
        queue_size (int): Row reports and files the queue holds.
        max_retries (int): Retries of a message during an outage.
        retry_backoff (float): Seconds before the first retry, then doubled.
        max_retry_backoff (float): Upper bound of the wait between retries.
        idle_timeout (float): Seconds the thread waits with nothing to post
            before it ends. SlackReport keeps the default; tests shorten it
            to see the thread end and start again.

    Example:
        >>> poster = SlackPoster(client, 'general')  # doctest: +SKIP
        >>> poster.post(['hello'], root=True)  # doctest: +SKIP
        >>> poster.close(timeout=10.0)  # messages not posted  # doctest: +SKIP
        0
    """

    def __init__(self, client: slack_sdk.WebClient, channel: str, threaded: bool = True,
                 queue_size: int = 64, max_retries: int = 8, retry_backoff: float = 1.0,
                 max_retry_backoff: float = 30.0, idle_timeout: float = 60.0) -> None:
        self._channel_key = channel_key(channel)
        super().__init__('SlackReport', queue_size, max_retries=max_retries,
                         retry_backoff=retry_backoff, max_retry_backoff=max_retry_backoff,
                         idle_timeout=idle_timeout)
        self.client = client
        self.channel = channel
        self.threaded = threaded
        self._thread_ts: str | None = None
        self._lock = threading.Lock()
        self._channel_id: str | None = None
        self._post_channel: str | None = None
        self._failing = False
        self._dropped_in_outage = 0

    @property
    def thread_ts(self) -> str | None:
        """Timestamp of the start message (str), or None until it is posted."""
        with self._lock:
            return self._thread_ts

    @thread_ts.setter
    def thread_ts(self, value: str | None) -> None:
        with self._lock:
            self._thread_ts = value

    def post(self, texts: list[str], root: bool = False) -> None:
        """Queues the texts of one message, even when the queue is full.

        ``root`` marks the start message, whose timestamp opens the thread.
        """
        self.offer(_Texts(texts, root), bounded=False)

    def post_rows(self, entries: Sequence[str] | None, rows: Sequence[Mapping[str, object]],
                  limit: int, bounded: bool = True) -> bool:
        """Queues LogReport ``rows`` as a table (see ``table_texts``); False when full.

        Rows queued together with the same ``entries`` go out as one table.
        """
        return self.offer(_Rows(entries, rows, limit), bounded)

    def upload(self, filename: str, data: bytes) -> bool:
        """Queues ``data`` (bytes) as a file upload into the thread; False when full."""
        return self.offer(_File(filename, data), bounded=True)

    def write(self, item: _Item) -> None:
        if isinstance(item, _Texts):
            self._send_texts(item)
        elif isinstance(item, _Rows):
            self._send_rows(item)
        elif self.deliver(self._upload, item):
            self.credit(1)

    def _send_texts(self, item: _Texts) -> None:
        for index, text in enumerate(item.texts):
            if not self.deliver(self._post_text, text, item.root and index == 0):
                return
            self.credit(1)

    def _send_rows(self, item: _Rows) -> None:
        group = [item] + self.queue.take_following(item.joins)
        try:
            texts = _slack_messages.table_texts(
                item.entries, [row for report in group for row in report.rows], item.limit)
        except Exception:
            # Cells already fall back to '?'; this guard only keeps an unforeseen
            # formatting bug from killing the thread and every later message.
            logger.exception('SlackReport: log rows could not be formatted; they are dropped')
            return
        if all(self.deliver(self._post_text, text, False) for text in texts):
            self.credit(len(group))

    def recovered(self) -> None:
        if self._failing:
            logger.warning('SlackReport: Slack answers again; posting resumed (%d '
                           'message(s) dropped meanwhile)', self._dropped_in_outage)
            self._failing = False

    def wait_before_retry(self, error: Exception, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``error``, or None to give up."""
        status, code, retry_after = _describe_error(error)
        if status == 429 or code == 'ratelimited':
            wait = 1.0 if retry_after is None else retry_after
            logger.warning('SlackReport: rate limited by Slack; retrying in %.1f s', wait)
            return wait
        if code in _FATAL_ERRORS:
            self.disabled = code
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
        return self.backoff(attempt)

    def _resolve_channel(self) -> str:
        """Finds the channel's ID once (names through conversations.list)."""
        if self._post_channel is not None:
            return self._post_channel
        name = self._channel_key
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
                self.disabled = 'channel_not_found'
                logger.warning('SlackReport: no channel named %r is visible to the bot; '
                               'nothing will be posted by this run', name)
                raise Skip()

    def _post_text(self, text: str, root: bool) -> None:
        channel = self._resolve_channel()
        thread_ts = self.thread_ts if self.threaded else None
        response = self.client.chat_postMessage(
            channel=channel, text=text, thread_ts=thread_ts, unfurl_links=False)
        if root and self.threaded and thread_ts is None:
            self.thread_ts = response.get('ts')

    def _upload(self, item: _File) -> None:
        self._resolve_channel()
        if self._channel_id is None:
            raise Skip()
        self.client.files_upload_v2(
            channel=self._channel_id, file=item.data, filename=item.filename,
            title=item.filename, thread_ts=self.thread_ts if self.threaded else None)
