"""A real MLflow tracking server for tests, on 127.0.0.1 and a free port, stopped after.

:class:`MLflowServer` runs ``python -m mlflow server`` with a SQLite store and an artifact
folder of its own, one uvicorn worker, telemetry off and MLflow's job runner off
(``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``: without it the server starts six job
consumers and takes twice as long to answer), in a process group of its own, which
:meth:`~MLflowServer.stop` ends whole (SIGTERM, then SIGKILL). The server also gets SIGTERM
when the test process dies (``PR_SET_PDEATHSIG``).

The full ``mlflow`` package (the server) is large (with its pandas, pyarrow, scipy and
scikit-learn), and the tests need it only to run the server, not to talk to it (the
``mlflow-skinny`` client of each stack does that). :func:`find_server_python` finds an
interpreter that has it: ``RESEARCHUTILS_TEST_MLFLOW_PYTHON``, else this one, else a
sibling venv of this one (``.venv-3.13``, ``.venv-3.12``, ``.venv``), so one stack's venv
serves the others (the Makefile installs it in the newest stack's).

:func:`mlflow_server` is the session fixture: one server a test session (the suite's
tests that use it run on one pytest-xdist worker, tests/conftest.py), skipped cleanly
where no interpreter has the server. :class:`DelayingProxy` stands between a client and
the server to make it slow, answer errors or be down. Tested by
tests/support/test_mlflow_server.py.
"""
import contextlib
import ctypes
import http.server
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

START_TIMEOUT = 180.
STOP_TIMEOUT = 30.
PYTHON_VARIABLE = 'RESEARCHUTILS_TEST_MLFLOW_PYTHON'
_SIBLING_VENVS = ('.venv-3.13', '.venv-3.12', '.venv')
_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_HAS_SERVER = ('import importlib.metadata as m, importlib.util as u; m.distribution("mlflow"); '
               'assert u.find_spec("uvicorn") and u.find_spec("sqlalchemy")')


def _has_server(python):
    if not python or not os.access(python, os.X_OK):
        return False
    done = subprocess.run([python, '-c', _HAS_SERVER], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120)
    return done.returncode == 0


def find_server_python():
    """An interpreter with the full ``mlflow`` (its server), or None."""
    chosen = os.environ.get(PYTHON_VARIABLE)
    if chosen:
        return chosen if _has_server(chosen) else None
    parent = os.path.dirname(os.path.abspath(sys.prefix))
    candidates = [sys.executable] + [os.path.join(parent, venv, 'bin', 'python')
                                     for venv in _SIBLING_VENVS]
    for python in candidates:
        if _has_server(python):
            return python
    return None


def free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def group_members(pgid):
    """The processes of group ``pgid`` that run (zombies left out), from /proc."""
    members = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/{}/stat'.format(entry)) as stream:
                    fields = stream.read().rsplit(')', 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != 'Z' and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def _die_with_parent():
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def answers(url, timeout=2.0):
    """Whether ``url``/health answers OK."""
    try:
        with urllib.request.urlopen(url + '/health', timeout=timeout) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


class MLflowServer(object):
    """``with MLflowServer(folder) as server: server.url``: a tracking server of its own.

    Args:
        folder (str): Where the SQLite store, the artifacts and the log go.
        python (str): The interpreter with the full mlflow; None finds one.

    Attributes:
        url (str): ``http://127.0.0.1:<port>``.
        process (subprocess.Popen): The server, while it runs.
    """

    def __init__(self, folder, python=None):
        self.folder = os.path.abspath(str(folder))
        self.python = python or find_server_python()
        self.port = None
        self.url = None
        self.process = None
        self.log_path = os.path.join(self.folder, 'mlflow-server.log')

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Starts the server; returns once ``/health`` answers.

        Raises:
            RuntimeError: No interpreter has the server, or it exited (with its log).
            TimeoutError: It did not answer within START_TIMEOUT.
        """
        if self.python is None:
            raise RuntimeError('no Python here has the full mlflow package (the server): '
                               'pip install mlflow, or set ' + PYTHON_VARIABLE)
        os.makedirs(self.folder, exist_ok=True)
        self.port = free_port()
        self.url = 'http://127.0.0.1:{}'.format(self.port)
        environment = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION='false',
                           MLFLOW_DISABLE_TELEMETRY='true', DO_NOT_TRACK='true',
                           PYTHONUNBUFFERED='1')
        environment.pop('MLFLOW_TRACKING_URI', None)
        command = [self.python, '-m', 'mlflow', 'server', '--host', '127.0.0.1',
                   '--port', str(self.port), '--workers', '1',
                   '--backend-store-uri', 'sqlite:///' + os.path.join(self.folder, 'mlflow.db'),
                   '--default-artifact-root', os.path.join(self.folder, 'artifacts')]
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.folder, env=environment, start_new_session=True,
                preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while not answers(self.url):
                if self.process.poll() is not None:
                    raise RuntimeError('the MLflow server exited ({}) while starting; log:\n{}'
                                       .format(self.process.returncode, self.log_tail()))
                if time.monotonic() > deadline:
                    raise TimeoutError('the MLflow server did not answer {}/health within {} '
                                       's; log:\n{}'.format(self.url, START_TIMEOUT,
                                                            self.log_tail()))
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        """Ends the server's whole process group: SIGTERM, then SIGKILL after STOP_TIMEOUT."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        # The group's other processes (uvicorn's worker) too, whatever the leader did.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + STOP_TIMEOUT
        while group_members(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    @staticmethod
    def group_alive(pgid):
        """Whether any process of group ``pgid`` still runs (a zombie waiting for its
        parent to reap it runs no more)."""
        return bool(group_members(pgid))

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, errors='replace') as stream:
                return ''.join(stream.readlines()[-lines:])
        except OSError:
            return ''


class DelayingProxy(object):
    """A loopback HTTP proxy in front of a server, that can be slow, fail or be down.

    ``with DelayingProxy(server.url) as proxy: MlflowClient(proxy.url)``. Each
    request is passed on after :attr:`delay` seconds; :meth:`fail` answers the
    next ``times`` requests with an HTTP status of the test's choosing (None:
    until :meth:`recover`); :meth:`down` closes every connection unanswered
    until :meth:`recover`. :attr:`requests` counts what reached it.
    """

    def __init__(self, target, delay=0.0):
        self.target = target.rstrip('/')
        self.delay = delay
        self.requests = 0
        self.passed = 0
        self._lock = threading.Lock()
        self._status = None
        self._remaining = 0
        self._down = False
        self._httpd = None

    def __enter__(self):
        handler = type('Handler', (_ProxyHandler,), {'proxy': self})
        self._httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={'poll_interval': 0.05},
                         name='DelayingProxy', daemon=True).start()
        self.url = 'http://127.0.0.1:{}'.format(self._httpd.server_address[1])
        return self

    def __exit__(self, *exc_info):
        self._httpd.shutdown()
        self._httpd.server_close()

    def fail(self, status=503, times=None):
        with self._lock:
            self._status, self._remaining = status, times

    def down(self):
        with self._lock:
            self._down = True

    def recover(self):
        with self._lock:
            self._status, self._remaining, self._down = None, 0, False

    def _fault(self):
        """What to do with a request: None (pass it on), 'down' or an HTTP status."""
        with self._lock:
            self.requests += 1
            if self._down:
                return 'down'
            if self._status is not None:
                status = self._status
                if self._remaining is not None:
                    self._remaining -= 1
                    if self._remaining <= 0:
                        self._status = None
                return status
            return None


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    proxy = None
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def _handle(self):
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else None
        fault = self.proxy._fault()
        if fault == 'down':
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None:
            payload = b'<html>proxy error</html>'
            self.send_response(fault)
            self.send_header('Content-Type', 'text/html')
            self.send_header('Content-Length', str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if self.proxy.delay:
            time.sleep(self.proxy.delay)
        headers = {key: value for key, value in self.headers.items()
                   if key.lower() not in ('host', 'connection', 'content-length')}
        request = urllib.request.Request(self.proxy.target + self.path, data=body,
                                         headers=headers, method=self.command)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, reply, reply_headers = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            with error:
                status, reply, reply_headers = error.code, error.read(), error.headers
        with self.proxy._lock:
            self.proxy.passed += 1
        self.send_response(status)
        for key, value in reply_headers.items():
            if key.lower() not in ('transfer-encoding', 'connection', 'content-length',
                                   'date', 'server'):
                self.send_header(key, value)
        self.send_header('Content-Length', str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle


@pytest.fixture(scope='session')
def mlflow_server(tmp_path_factory):
    """One MLflow server for the test session; skips where none can run here."""
    python = find_server_python()
    if python is None:
        pytest.skip('no Python here has the full mlflow package (the server): pip install '
                    'mlflow in one of the venvs, or set ' + PYTHON_VARIABLE)
    folder = tempfile.mkdtemp(prefix='mlflow-', dir=str(tmp_path_factory.getbasetemp()))
    with MLflowServer(folder, python) as server:
        yield server
