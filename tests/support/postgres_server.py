"""A real PostgreSQL server for tests, on a private port and data folder, stopped after.

:class:`PostgresServer` runs Debian's PostgreSQL (``initdb`` and ``postgres`` from
``/usr/lib/postgresql/<version>/bin``, the newest found, else from ``PATH``) with a data
folder, a port and a password of its own, so it never meets the distribution's ``main``
cluster on 5432 or another test session's server. Clients connect over TCP with that
password (``scram-sha-256``): from 127.0.0.1, and from the subnets given as ``networks``
(the bridge of :mod:`tests.support.netns_hosts`, on whose address it then listens too).
:meth:`~PostgresServer.create_database` makes a fresh database (cheap: a test takes one of
its own from the session's server, :func:`postgres_database`).

PostgreSQL refuses to run as root. When the tests do, ``initdb`` and the server run as the
``postgres`` system user (``nobody`` where there is none), and the data folder is theirs.
The data folder is a private ``mkdtemp`` folder (mode 0700) on the RAM file system
(``/dev/shm``; else the temporary directory), not under pytest's tmp path: pytest keeps its
tree (``/tmp/pytest-of-root``) closed to other users, and closes it again whenever any
pytest session starts, so the server user could not reach a folder there; and a cluster is
about a thousand files, which this machine's disk takes seconds to write. ``initdb`` runs
once a process; each server starts from a copy of that cluster (a fraction of a second).
The folder given (a test's tmp path) holds the server's log. The data folder is removed when
the server stops, the template when the process exits, and what a killed session left
(its pid in the name, the process gone) when the next one makes a folder.

Readiness is waited for as an event: ``pg_isready`` answering "accepting connections" on
every listen address, with a generous deadline, while watching that the server has not
exited (its log's tail is then in the error). A port found taken when the server binds
(free ports are only free until used) is retried with another one. :meth:`stop` asks for a
fast shutdown (SIGINT), waits for the server and every process it started to be gone, and
only then escalates (SIGQUIT, SIGKILL; a killed server's shared memory segment is removed
then, and its dynamic shared memory lives in its data folder); the server also gets SIGINT
if the test process dies (``PR_SET_PDEATHSIG``), so no server outlives its session.

:func:`missing` says why no server can start here, for a clean skip. Tested by
tests/support/test_postgres_server.py.
"""
import atexit
import contextlib
import ctypes
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from tests.support import leftovers

START_TIMEOUT = 120.
STOP_TIMEOUT = 60.
USER = 'researchutils'  # the database superuser the tests connect as
SEARCH_DIRS = '/usr/lib/postgresql/*/bin'  # Debian's layout, one folder a major version
_BINARIES = ('initdb', 'postgres', 'pg_isready', 'psql')
_PORT_ATTEMPTS = 5
_PR_SET_PDEATHSIG = 1
_FOLDER_PREFIX = 'researchutils-postgres-'
ROOT_VARIABLE = 'RESEARCHUTILS_TEST_POSTGRES_ROOT'
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_templates = {}


def find_bin_dir():
    """The folder holding PostgreSQL's server programs (newest Debian version first), or None."""
    candidates = sorted(glob.glob(SEARCH_DIRS), key=_version_key, reverse=True)
    on_path = shutil.which('postgres')
    if on_path:
        candidates.append(os.path.dirname(os.path.realpath(on_path)))
    for folder in candidates:
        if all(os.access(os.path.join(folder, name), os.X_OK) for name in _BINARIES):
            return folder
    return None


def _version_key(folder):
    version = os.path.basename(os.path.dirname(folder))
    return [int(part) for part in re.findall(r'[0-9]+', version)]


def server_user():
    """The unprivileged account the server runs as when the tests run as root."""
    for name in ('postgres', 'nobody'):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    return None


def missing():
    """Why no PostgreSQL server can start here, or None when one can."""
    if find_bin_dir() is None:
        return ('PostgreSQL is not installed ({} not found in /usr/lib/postgresql/*/bin or on '
                'PATH; apt-get install postgresql)'.format(', '.join(_BINARIES)))
    if os.geteuid() == 0 and server_user() is None:
        return 'running as root with no postgres or nobody account to run the server as'
    return None


def _free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _die_with_parent():
    """In the server's child process: a fast shutdown when the test process dies. (Only a
    call into libc, looked up beforehand: the child of a threaded process must not import.)"""
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)


def process_start(pid):
    """When process ``pid`` started (clock ticks since boot), or None when it is gone: with
    the pid it tells a process from a later one given the same number."""
    try:
        with open('/proc/{}/stat'.format(pid)) as stream:
            fields = stream.read().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]) if fields[0] != 'Z' else None


def descendants(pid):
    """The processes below ``pid`` (children, theirs...), as ``{pid: start time}``."""
    parents = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open('/proc/{}/stat'.format(entry)) as stream:
                    parents[int(entry)] = int(stream.read().rsplit(')', 1)[1].split()[1])
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                start = process_start(child)
                if start is not None:
                    found[child] = start
                    frontier.append(child)
    return found


def alive(processes):
    """Those of ``{pid: start time}`` that still run (the same process, not a later one)."""
    return {pid: start for pid, start in processes.items() if process_start(pid) == start}


def _as_account(account, folder):
    """Popen arguments that run a program as ``account`` (None: as we run), in ``folder``,
    with an environment of its own."""
    arguments = {'cwd': folder, 'env': leftovers.tagged(
        {'PATH': os.defpath, 'LC_ALL': 'C', 'LANG': 'C'})}
    if account is not None:
        arguments.update(user=account.pw_uid, group=account.pw_gid, extra_groups=[])
    return arguments


def _data_root():
    """Where the clusters live: the RAM file system when there is one (a cluster is about a
    thousand files, which a disk can take seconds to copy), else the temporary directory;
    ``RESEARCHUTILS_TEST_POSTGRES_ROOT`` names another (the test of the leftovers' removal
    keeps its session's folders there, out of the way of other workers' sessions, which
    would remove them first)."""
    chosen = os.environ.get(ROOT_VARIABLE)
    if chosen:
        return chosen
    if os.path.isdir('/dev/shm') and os.access('/dev/shm', os.W_OK | os.X_OK):
        return '/dev/shm'
    return tempfile.gettempdir()


def _private_folder(account, kind):
    """A new folder of the system's temporary directory, only ``account``'s (None: ours),
    named after this process so that a later session can tell it was left behind."""
    _remove_leftovers()
    folder = tempfile.mkdtemp(prefix='{}{}-{}-'.format(_FOLDER_PREFIX, os.getpid(), kind),
                              dir=_data_root())
    if account is not None:
        os.chown(folder, account.pw_uid, account.pw_gid)
    return folder


def _remove_leftovers():
    """Removes the folders of sessions whose process is gone (killed before cleaning up)."""
    pattern = re.compile(re.escape(_FOLDER_PREFIX) + r'([0-9]+)-')
    root = _data_root()
    for name in os.listdir(root):
        found = pattern.match(name)
        if found and process_start(int(found.group(1))) is None:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _cluster_template(bin_dir, account):
    """``(data folder, password)`` of a cluster made by initdb once a process (initdb takes
    seconds; a copy of its result, a fraction of one), removed when the process exits."""
    key = (bin_dir, None if account is None else account.pw_uid)
    if key not in _templates:
        folder = _private_folder(account, 'template')
        atexit.register(shutil.rmtree, folder, True)
        password = secrets.token_hex(16)
        password_file = os.path.join(folder, 'password')
        with open(os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                  'w') as stream:
            stream.write(password + '\n')
        if account is not None:
            os.chown(password_file, account.pw_uid, account.pw_gid)
        try:
            done = subprocess.run(
                [os.path.join(bin_dir, 'initdb'), '-D', os.path.join(folder, 'data'),
                 '-U', USER, '--pwfile=' + password_file, '--auth=scram-sha-256',
                 '--encoding=UTF8', '--no-locale', '--no-sync'],
                capture_output=True, text=True, timeout=START_TIMEOUT,
                stdin=subprocess.DEVNULL, **_as_account(account, folder))
        finally:
            os.unlink(password_file)
        if done.returncode != 0:
            raise RuntimeError('initdb failed ({}):\n{}{}'.format(done.returncode, done.stdout,
                                                                  done.stderr))
        _templates[key] = (os.path.join(folder, 'data'), password)
    return _templates[key]


class PostgresServer(object):
    """A PostgreSQL server of its own: ``with PostgresServer(folder) as server: ...``.

    Args:
        folder (str): Where the server's log goes (and its data, unless running as root).
        networks (sequence): ``(address, subnet)`` pairs: the server also listens on
            ``address`` and accepts clients from ``subnet`` (``"10.1.2.0/24"``).

    Attributes:
        port (int): The TCP port, on 127.0.0.1 and every network address.
        password (str): The password of :data:`USER`.
        process (subprocess.Popen): The postmaster, while it runs.
    """

    def __init__(self, folder, networks=()):
        self.folder = os.path.abspath(str(folder))
        self.networks = [(str(address), str(subnet)) for address, subnet in networks]
        self.addresses = ['127.0.0.1'] + [address for address, _ in self.networks]
        self.bin_dir = find_bin_dir()
        self.password = None  # the cluster's, known when it is made
        self.port = None
        self.process = None
        self.data_dir = None
        self.log_path = os.path.join(self.folder, 'postgres.log')
        self._log_start = 0
        self._own_data_parent = None
        self._account = server_user() if os.geteuid() == 0 else None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def _program(self, name):
        return os.path.join(self.bin_dir, name)

    def _client_env(self):
        return dict(os.environ, PGPASSWORD=self.password, PGCONNECT_TIMEOUT='10')

    def start(self):
        """Makes the cluster (initdb) and starts the server; returns once it accepts.

        Raises:
            RuntimeError: initdb or the server failed (the message holds its output).
            TimeoutError: The server did not accept connections within START_TIMEOUT.
        """
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        os.makedirs(self.folder, exist_ok=True)
        try:
            self._init_cluster()
            for _ in range(_PORT_ATTEMPTS):
                self.port = _free_port()
                if self._launch():
                    return
                # Another process took the port between our probe and the server's bind.
                self._stop_postmaster()
            raise RuntimeError('the server found its port taken {} times over; log:\n{}'.format(
                _PORT_ATTEMPTS, self.log_tail()))
        except BaseException:
            self.stop()
            raise

    def _init_cluster(self):
        """The server's data folder: a copy of this process's initdb'd cluster."""
        template, self.password = _cluster_template(self.bin_dir, self._account)
        self._own_data_parent = _private_folder(self._account, 'data')
        parent = self._own_data_parent
        self.data_dir = os.path.join(parent, 'data')
        shutil.copytree(template, self.data_dir, symlinks=True)
        rules = ['host all all 127.0.0.1/32 scram-sha-256'] + [
            'host all all {} scram-sha-256'.format(subnet) for _, subnet in self.networks]
        with open(os.path.join(self.data_dir, 'pg_hba.conf'), 'w') as stream:
            stream.write('# Only TCP, only these clients, only with the password.\n'
                         + '\n'.join(rules) + '\n')
        if self._account is not None:
            for folder, _, files in os.walk(self.data_dir):
                for path in [folder] + [os.path.join(folder, name) for name in files]:
                    os.lchown(path, self._account.pw_uid, self._account.pw_gid)

    def _launch(self):
        """Starts the postmaster on ``self.port``; True once it accepts on every address,
        False when the port was taken on one of them."""
        settings = {
            'listen_addresses': ','.join(self.addresses), 'port': self.port,
            'unix_socket_directories': '',  # TCP only: no socket file in a shared folder
            # A test server: durability is not wanted, speed is.
            'fsync': 'off', 'synchronous_commit': 'off', 'full_page_writes': 'off',
            'max_connections': 100, 'shared_buffers': '32MB',
            # Dynamic shared memory in the data folder (pg_dynshmem), not in /dev/shm: a
            # server that had to be killed leaves nothing that outlives its folder.
            'dynamic_shared_memory_type': 'mmap',
            # Where each connection came from, for clients() and for whoever reads the log.
            'log_connections': 'on',
        }
        command = [self._program('postgres'), '-D', self.data_dir]
        for name, value in settings.items():
            command += ['-c', '{}={}'.format(name, value)]
        with open(self.log_path, 'ab') as log:
            self._log_start = log.tell()
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
                **_as_account(self._account, os.path.dirname(self.data_dir)))
        # The server binds every address before it logs that it is ready; then each address
        # must answer (another server could answer on a port this one failed to bind).
        deadline = time.monotonic() + START_TIMEOUT
        waiting = list(self.addresses)
        while 'ready to accept connections' not in self._new_log() or waiting:
            if self.process.poll() is not None or self._bind_failures():
                return self._taken_port()
            if 'ready to accept connections' in self._new_log() and self._ready(waiting[0]):
                waiting.pop(0)
                continue
            if time.monotonic() > deadline:
                raise TimeoutError('the PostgreSQL server did not accept connections on {} '
                                   'port {} within {} s; log:\n{}'.format(
                                       waiting, self.port, START_TIMEOUT, self.log_tail()))
            time.sleep(0.05)
        return not self._bind_failures() or self._taken_port()

    def _bind_failures(self):
        return [line for line in self._new_log().splitlines() if 'could not bind' in line]

    def _taken_port(self):
        """False when the server stopped or went on without an address because the port was
        taken (to be retried); any other failure raises."""
        failures = self._bind_failures()
        if failures and all('Address already in use' in line for line in failures):
            return False
        raise RuntimeError('the PostgreSQL server {} while starting; log:\n{}'.format(
            'could not listen on every address' if failures else 'exited ({})'.format(
                self.process.returncode), self.log_tail()))

    def _new_log(self):
        """What the server logged since its latest start."""
        try:
            with open(self.log_path, 'rb') as stream:
                stream.seek(self._log_start)
                return stream.read().decode(errors='replace')
        except OSError:
            return ''

    def _ready(self, address):
        done = subprocess.run([self._program('pg_isready'), '-q', '-h', address, '-p',
                               str(self.port), '-U', USER, '-d', 'postgres', '-t', '5'],
                              env=self._client_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=60)
        return done.returncode == 0

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, errors='replace') as stream:
                return ''.join(stream.readlines()[-lines:])
        except OSError:
            return ''

    def url(self, database='postgres', host='127.0.0.1', driver=None):
        """The SQLAlchemy URL of ``database`` as seen from ``host`` (a listen address)."""
        scheme = 'postgresql' if driver is None else 'postgresql+' + driver
        return '{}://{}:{}@{}:{}/{}'.format(scheme, USER, self.password, host, self.port,
                                           database)

    def psql(self, sql, database='postgres'):
        """Runs ``sql`` with psql; returns its unaligned output (rows, ``|`` between
        columns)."""
        done = subprocess.run(
            [self._program('psql'), '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
             '-h', '127.0.0.1', '-p', str(self.port), '-U', USER, '-d', database, '-c', sql],
            env=self._client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=120)
        if done.returncode != 0:
            raise RuntimeError('psql {!r} failed: {}'.format(sql, done.stderr))
        return done.stdout

    def clients(self, database):
        """The addresses that connected to ``database``, read from the server's log (each
        line begins with the backend's ``[pid]``: a connection's lines come in order)."""
        received, found = {}, set()
        with open(self.log_path, errors='replace') as stream:
            for line in stream:
                match = re.search(r'\[([0-9]+)\] LOG:  connection received: host=(\S+)',
                                  line)
                if match:
                    received[match.group(1)] = match.group(2)
                    continue
                match = re.search(r'\[([0-9]+)\] LOG:  connection authorized: .*'
                                  r'database=(\S+)', line)
                if match and match.group(2) == database and match.group(1) in received:
                    found.add(received[match.group(1)])
        return found

    def create_database(self, name=None):
        """Makes an empty database (a fresh name unless given); returns its name."""
        name = name or 'test_' + secrets.token_hex(6)
        if not re.fullmatch(r'[a-z_][a-z0-9_]*', name):
            raise ValueError('database name {!r}: lower-case letters, digits and _'.format(name))
        self.psql('CREATE DATABASE {}'.format(name))
        return name

    def processes(self):
        """The server's processes (postmaster and backends) as ``{pid: start time}``."""
        if self.process is None or self.process.poll() is not None:
            return {}
        found = descendants(self.process.pid)
        start = process_start(self.process.pid)
        if start is not None:
            found[self.process.pid] = start
        return found

    def _stop_postmaster(self):
        process, self.process = self.process, None
        if process is None:
            return
        started = descendants(process.pid)
        segment = self.shared_memory_id()
        for sig, patience in ((signal.SIGINT, STOP_TIMEOUT), (signal.SIGQUIT, STOP_TIMEOUT),
                              (signal.SIGKILL, STOP_TIMEOUT)):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=patience)
                break
        # The postmaster ends its backends before it exits; one that outlived it (only after a
        # SIGKILL) is ended here.
        deadline = time.monotonic() + STOP_TIMEOUT
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in alive(started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if process.returncode == -signal.SIGKILL and segment is not None:
            # A postmaster that exits removes its System V segment; a killed one cannot.
            subprocess.run(['ipcrm', '-m', str(segment)], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=60)

    def shared_memory_id(self):
        """The id of the server's System V shared memory segment (``postmaster.pid``'s
        seventh line: key, id), or None."""
        try:
            with open(os.path.join(self.data_dir, 'postmaster.pid')) as stream:
                return int(stream.read().splitlines()[6].split()[1])
        except (OSError, TypeError, IndexError, ValueError):
            return None

    def stop(self):
        """Stops the server and its processes, removes its data folder; safe to call twice."""
        self._stop_postmaster()
        if self._own_data_parent is not None:
            shutil.rmtree(self._own_data_parent, ignore_errors=True)
            self._own_data_parent = None


@pytest.fixture(scope='session')
def postgres_server(tmp_path_factory, host_network):
    """The session's PostgreSQL server (skips where none can start); it also serves the
    namespace hosts of ``host_network`` when there is one."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    networks = [] if host_network is None else [(host_network.server_address,
                                                 host_network.subnet)]
    with PostgresServer(tmp_path_factory.mktemp('postgres'), networks=networks) as server:
        yield server


@pytest.fixture
def postgres_database(postgres_server):
    """A fresh database of the session's server, for one test; its name."""
    return postgres_server.create_database()
