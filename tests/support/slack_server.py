"""A loopback HTTP server speaking the part of the Slack Web API SlackReport uses.

Point the real ``slack_sdk.WebClient`` at it with ``base_url=server.base_url``
(:meth:`SlackServer.client` does that). It answers ``auth.test``,
``chat.postMessage``, ``conversations.list``, ``files.getUploadURLExternal``,
the upload URL that method hands out, and ``files.completeUploadExternal``;
it records every request and what was posted, and can be told to misbehave:

* :meth:`SlackServer.slow` - answer after a delay;
* :meth:`SlackServer.fail` - answer HTTP 500, HTTP 429 with ``Retry-After``,
  HTTP 200 with a page that is not the API's JSON (a proxy's), or drop the
  connection without an answer, for the next ``times`` requests (or until
  :meth:`SlackServer.recover`), optionally with a body of the test's choosing;
* :meth:`SlackServer.reject_token` - answer ``invalid_auth`` to every call;
* :meth:`SlackServer.refuse` - answer a given Slack error to one method.

Example::

    with SlackServer() as server:
        client = server.client()
        client.chat_postMessage(channel='#general', text='hi')
        assert server.messages[0]['text'] == 'hi'
"""
import http.server
import itertools
import json
import threading
import time
import urllib.parse

TOKEN = 'xoxb-loopback-test-token'
# Slack truncates or refuses longer texts; the server refuses them.
MAX_TEXT_CHARS = 40000
DEFAULT_CHANNELS = (('C0000000001', 'general'), ('C0000000002', 'random'),
                    ('C0000000003', 'experiments'))


class SlackServer(object):
    """Loopback Slack Web API; use as a context manager or call start/stop.

    Args:
        channels: ``(id, name)`` pairs of the workspace's channels.
        token: The one bot token the server accepts.
    """

    def __init__(self, channels=DEFAULT_CHANNELS, token=TOKEN):
        self.token = token
        self.channels = [{'id': cid, 'name': name} for cid, name in channels]
        self.requests = []    # every request: dict(method, params, status, time, ...)
        self.messages = []    # every chat.postMessage that succeeded
        self.uploads = []     # every file shared by files.completeUploadExternal
        self._pending_files = {}
        self._lock = threading.Condition()
        self._delay = 0.0
        self._slow_remaining = None
        self._faults = []     # [kind, remaining (None: forever), retry_after, method]
        self._accept_token = True
        self._refusals = {}
        self._ts = itertools.count(1)
        self._file_ids = itertools.count(1)
        self._release = threading.Event()
        self._httpd = None
        self._thread = None

    # lifecycle --------------------------------------------------------------

    def start(self):
        handler = type('Handler', (_Handler,), {'slack': self})
        self._httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={'poll_interval': 0.05},
                                        name='SlackServer', daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stops serving; slow answers still pending are released at once."""
        if self._httpd is not None:
            self._release.set()
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    @property
    def port(self):
        return self._httpd.server_address[1]

    @property
    def base_url(self):
        """``base_url`` for ``slack_sdk.WebClient``: ``http://127.0.0.1:PORT/api/``."""
        return 'http://127.0.0.1:%d/api/' % self.port

    def client(self, token=None, timeout=2, **kwargs):
        """A real ``slack_sdk.WebClient`` aimed at this server.

        slack_sdk's own connection-error retry is off unless ``retry_handlers``
        is given, so a test sees only the retries of the code under test.
        """
        from slack_sdk import WebClient
        kwargs.setdefault('retry_handlers', [])
        return WebClient(token=self.token if token is None else token,
                         base_url=self.base_url, timeout=timeout, **kwargs)

    # behaviour --------------------------------------------------------------

    def slow(self, seconds, times=None):
        """Delays the next ``times`` answers (None: all) by ``seconds`` (0 restores speed)."""
        with self._lock:
            self._delay = float(seconds)
            self._slow_remaining = times

    def fail(self, kind, times=None, retry_after=1, method=None, body=None):
        """Makes the next ``times`` requests (None: all, until :meth:`recover`) fail.

        Args:
            kind: ``'500'`` (HTTP 500), ``'429'`` (HTTP 429 with ``Retry-After:
                retry_after``), ``'200'`` (HTTP 200 with an HTML page instead
                of the API's JSON, as a captive portal or proxy answers) or
                ``'drop'`` (close the connection unanswered).
            method: Only requests to this API method (``'chat.postMessage'``,
                ``'upload'`` for the upload URL) fail; None: any.
            body (str or None): The answer's body instead of the kind's usual
                one (``''``, broken JSON, a proxy's page); not for ``'drop'``.
        """
        if kind not in ('500', '429', '200', 'drop'):
            raise ValueError('kind must be "500", "429", "200" or "drop", got {!r}'.format(kind))
        with self._lock:
            self._faults.append([kind, times, retry_after, method, body])

    def recover(self):
        """Ends every fault and slowness and accepts the token again."""
        with self._lock:
            self._faults = []
            self._delay = 0.0
            self._accept_token = True
            self._refusals = {}

    def refuse(self, method, error):
        """Answers ``{"ok": false, "error": error}`` to every later call of ``method``.

        For example ``refuse('conversations.list', 'missing_scope')`` plays a token
        without ``channels:read``.
        """
        with self._lock:
            self._refusals[method] = error

    def reject_token(self):
        """Answers ``invalid_auth`` to every API call from now on."""
        with self._lock:
            self._accept_token = False

    # observation ------------------------------------------------------------

    def wait_for(self, predicate, timeout=5.0):
        """Waits until ``predicate(server)`` holds; raises AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError('SlackServer: condition not met within %.1f s; '
                                         'requests so far: %r' % (timeout, self.calls()))
                self._lock.wait(min(remaining, 0.05))

    def calls(self, method=None):
        """The API method names requested so far (only ``method`` ones if given)."""
        with self._lock:
            return [r['method'] for r in self.requests if method in (None, r['method'])]

    def texts(self):
        """Texts of the messages posted so far, in order."""
        with self._lock:
            return [m['text'] for m in self.messages]

    # request handling (called by _Handler on the server's threads) -----------

    def _take_delay(self):
        with self._lock:
            delay = self._delay
            if self._slow_remaining is not None:
                self._slow_remaining -= 1
                if self._slow_remaining <= 0:
                    self._delay, self._slow_remaining = 0.0, None
            return delay

    def _take_fault(self, method):
        with self._lock:
            for fault in self._faults:
                kind, remaining, retry_after, only, body = fault
                if only is not None and only != method:
                    continue
                if remaining is not None:
                    if remaining <= 0:
                        continue
                    fault[1] -= 1
                return kind, retry_after, body
        return None, None, None

    def _record(self, entry):
        with self._lock:
            self.requests.append(entry)
            self._lock.notify_all()

    def _channel(self, key):
        key = (key or '').lstrip('#')
        for channel in self.channels:
            if key in (channel['id'], channel['name']):
                return channel
        return None

    def _next_ts(self):
        return '1700000000.%06d' % next(self._ts)

    def _api(self, method, params, authorization):
        """Returns (status, headers, body dict) for one API call."""
        if not self._accept_token or authorization != 'Bearer ' + self.token:
            error = 'invalid_auth' if authorization else 'not_authed'
            return 200, {}, {'ok': False, 'error': error}
        with self._lock:
            refusal = self._refusals.get(method)
        if refusal is not None:
            return 200, {}, {'ok': False, 'error': refusal}
        handler = getattr(self, '_api_' + method.replace('.', '_'), None)
        if handler is None:
            return 200, {}, {'ok': False, 'error': 'unknown_method'}
        return 200, {}, handler(params)

    def _api_auth_test(self, params):
        return {'ok': True, 'url': 'http://127.0.0.1/', 'team': 'Loopback', 'team_id': 'T0',
                'user': 'researchutils', 'user_id': 'U0', 'bot_id': 'B0'}

    def _api_chat_postMessage(self, params):
        channel = self._channel(params.get('channel'))
        if channel is None:
            return {'ok': False, 'error': 'channel_not_found'}
        text = params.get('text') or ''
        if not text:
            return {'ok': False, 'error': 'no_text'}
        if len(text) > MAX_TEXT_CHARS:
            return {'ok': False, 'error': 'msg_too_long'}
        thread_ts = params.get('thread_ts')
        with self._lock:
            ts = self._next_ts()
            message = {'channel': channel['id'], 'text': text, 'ts': ts,
                       'thread_ts': thread_ts}
            self.messages.append(message)
            self._lock.notify_all()
        return {'ok': True, 'channel': channel['id'], 'ts': ts,
                'message': {'text': text, 'ts': ts, 'thread_ts': thread_ts}}

    def _api_conversations_list(self, params):
        limit = int(params.get('limit') or 100)
        start = int(params.get('cursor') or 0)
        page = self.channels[start:start + limit]
        following = start + limit
        next_cursor = str(following) if following < len(self.channels) else ''
        return {'ok': True, 'channels': page,
                'response_metadata': {'next_cursor': next_cursor}}

    def _api_files_getUploadURLExternal(self, params):
        if not params.get('filename') or not params.get('length'):
            return {'ok': False, 'error': 'invalid_arguments'}
        file_id = 'F%010d' % next(self._file_ids)
        with self._lock:
            self._pending_files[file_id] = {'filename': params['filename'],
                                            'length': int(params['length']), 'data': None}
        return {'ok': True, 'file_id': file_id,
                'upload_url': 'http://127.0.0.1:%d/upload/v1/%s' % (self.port, file_id)}

    def _upload(self, file_id, data):
        with self._lock:
            pending = self._pending_files.get(file_id)
            if pending is None or pending['length'] != len(data):
                return 400, 'invalid upload'
            pending['data'] = data
        return 200, 'OK - %d' % len(data)

    def _api_files_completeUploadExternal(self, params):
        files = json.loads(params.get('files') or '[]')
        channel = None
        if params.get('channel_id'):
            channel = self._channel(params['channel_id'])
            if channel is None or channel['id'] != params['channel_id']:
                return {'ok': False, 'error': 'channel_not_found'}
        shared = []
        with self._lock:
            for item in files:
                pending = self._pending_files.get(item.get('id'))
                if pending is None or pending['data'] is None:
                    return {'ok': False, 'error': 'file_not_found'}
            for item in files:
                pending = self._pending_files.pop(item['id'])
                upload = {'id': item['id'], 'title': item.get('title'),
                          'filename': pending['filename'], 'data': pending['data'],
                          'channel': channel and channel['id'],
                          'thread_ts': params.get('thread_ts'),
                          'initial_comment': params.get('initial_comment')}
                self.uploads.append(upload)
                shared.append({'id': item['id'], 'title': item.get('title'),
                               'name': pending['filename']})
            self._lock.notify_all()
        return {'ok': True, 'files': shared}


class _Handler(http.server.BaseHTTPRequestHandler):
    slack = None  # set on the subclass made by SlackServer.start
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.do_POST()

    def do_POST(self):
        slack = self.slack
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else b''
        if url.path.startswith('/upload/v1/'):
            method = 'upload'
        elif url.path.startswith('/api/'):
            method = url.path[len('/api/'):]
        else:
            method = url.path
        params = {} if method == 'upload' else _parse_params(
            self.headers.get('Content-Type', ''), body, url.query)
        entry = {'method': method, 'params': params, 'time': time.monotonic(),
                 'headers': dict(self.headers.items())}
        delay = slack._take_delay()
        if delay:
            slack._release.wait(delay)
        kind, retry_after, fault_body = slack._take_fault(method)
        if kind == 'drop':
            entry['status'] = 'dropped'
            slack._record(entry)
            self.close_connection = True
            return
        if kind == '500':
            status, headers, payload = 500, {}, b'Internal Server Error'
        elif kind == '429':
            status, headers = 429, {'Retry-After': str(retry_after)}
            payload = json.dumps({'ok': False, 'error': 'ratelimited'}).encode()
        elif kind == '200':
            status, headers = 200, {}
            payload = b'<html><body>Sign in to continue</body></html>'
        elif method == 'upload':
            status, text = slack._upload(url.path.rsplit('/', 1)[-1], body)
            headers, payload = {}, text.encode()
        else:
            status, headers, result = slack._api(method, params,
                                                 self.headers.get('Authorization'))
            payload = json.dumps(result).encode()
            entry['response'] = result
        if kind is not None and fault_body is not None:
            payload = fault_body.encode('utf-8')
        entry['status'] = status
        slack._record(entry)
        self.send_response(status)
        content_type = {b'{': 'application/json; charset=utf-8',
                        b'<': 'text/html; charset=utf-8'}.get(payload[:1],
                                                              'text/plain; charset=utf-8')
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(payload)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)


def _parse_params(content_type, body, query):
    params = dict(urllib.parse.parse_qsl(query))
    if content_type.startswith('application/json'):
        params.update(json.loads(body.decode('utf-8') or '{}'))
    elif content_type.startswith('application/x-www-form-urlencoded'):
        params.update(urllib.parse.parse_qsl(body.decode('utf-8')))
    return params
