"""The PostgreSQL server of tests/support/postgres_server.py: real server, real clients."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from tests.support import postgres_server as pg
from tests.support.processes import REPO

needs_postgres = pytest.mark.skipif(pg.missing() is not None, reason=str(pg.missing()))


def uid_of(pid):
    with open('/proc/{}/status'.format(pid)) as stream:
        for line in stream:
            if line.startswith('Uid:'):
                return int(line.split()[1])
    raise AssertionError('no Uid line for process {}'.format(pid))


def refused(port):
    try:
        socket.create_connection(('127.0.0.1', port), timeout=10).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_session_server_keeps_what_a_real_client_writes(postgres_server, postgres_database):
    psycopg = pytest.importorskip('psycopg')
    url = postgres_server.url(postgres_database)
    with psycopg.connect(url) as connection:
        connection.execute('CREATE TABLE trials (number integer PRIMARY KEY, value real)')
        connection.execute('INSERT INTO trials VALUES (0, 0.5), (1, 0.25)')
    with psycopg.connect(url) as connection:
        rows = connection.execute('SELECT number, value FROM trials ORDER BY number').fetchall()
        where = connection.execute('SELECT current_database(), inet_server_port()').fetchone()
    assert rows == [(0, 0.5), (1, 0.25)]
    assert where == (postgres_database, postgres_server.port)
    assert postgres_server.clients(postgres_database) == {'127.0.0.1'}


def test_each_test_database_is_a_new_empty_one(postgres_server, postgres_database):
    other = postgres_server.create_database()
    assert other != postgres_database
    assert postgres_server.psql('SELECT count(*) FROM pg_tables WHERE schemaname = '
                                "'public'", other).strip() == '0'


def test_a_wrong_password_is_refused(postgres_server):
    psycopg = pytest.importorskip('psycopg')
    url = postgres_server.url().replace(postgres_server.password, 'not-the-password')
    with pytest.raises(psycopg.OperationalError, match='password authentication failed'):
        psycopg.connect(url).close()


def test_the_server_never_runs_as_root(postgres_server):
    uid = uid_of(postgres_server.process.pid)
    if os.geteuid() == 0:
        assert uid == pg.server_user().pw_uid != 0
        assert os.stat(postgres_server.data_dir).st_uid == uid
    else:
        assert uid == os.geteuid()


@needs_postgres
def test_a_stopped_server_leaves_no_process_port_or_data_folder(tmp_path):
    psycopg = pytest.importorskip('psycopg')
    server = pg.PostgresServer(tmp_path)
    with server:
        connection = psycopg.connect(server.url())  # a backend process of its own
        processes = server.processes()
        backend = connection.info.backend_pid
        data_dir = server.data_dir
    assert backend in processes and server.process is None
    assert len(processes) >= 3, processes  # postmaster, backend, checkpointer...
    assert pg.alive(processes) == {}
    assert not os.path.exists(data_dir)
    assert refused(server.port)
    connection.close()


def shared_memory_ids():
    with open('/proc/sysvipc/shm') as stream:
        return {int(line.split()[1]) for line in stream.readlines()[1:]}


@needs_postgres
def test_a_server_killed_outright_leaves_no_process_or_shared_memory(tmp_path):
    server = pg.PostgresServer(tmp_path)
    with server:
        processes = server.processes()
        segment = server.shared_memory_id()
        assert segment in shared_memory_ids()
        # Its dynamic shared memory is in its data folder, which goes with it.
        assert os.listdir(os.path.join(server.data_dir, 'pg_dynshmem'))
        data_dir = server.data_dir
        server.process.kill()  # no chance to clean up, as under the OOM killer
        server.process.wait(timeout=60)
    assert pg.alive(processes) == {}
    assert segment not in shared_memory_ids()
    assert not os.path.exists(data_dir)


@needs_postgres
def test_a_failing_test_stops_its_server_all_the_same(tmp_path):
    class Failure(Exception):
        pass
    server = pg.PostgresServer(tmp_path)
    with pytest.raises(Failure):
        with server:
            processes = server.processes()
            raise Failure
    assert processes and pg.alive(processes) == {}


@needs_postgres
def test_a_port_taken_before_the_server_binds_is_retried_on_another(tmp_path, monkeypatch):
    with socket.socket() as holder:
        holder.bind(('127.0.0.1', 0))
        holder.listen()
        taken = holder.getsockname()[1]
        ports = iter([taken])
        real_free_port = pg._free_port
        monkeypatch.setattr(pg, '_free_port', lambda: next(ports, None) or real_free_port())
        with pg.PostgresServer(tmp_path) as server:
            assert server.port != taken
            assert server.psql('SELECT 1').strip() == '1'
    with open(server.log_path) as stream:
        assert 'Address already in use' in stream.read()


@needs_postgres
def test_an_address_it_cannot_listen_on_fails_the_start_with_the_log_and_nothing_left(
        tmp_path):
    # TEST-NET-3: no interface of this machine has it, so binding fails (nothing is sent).
    server = pg.PostgresServer(tmp_path, networks=[('203.0.113.7', '203.0.113.0/24')])
    with pytest.raises(RuntimeError, match='could not bind.*203.0.113.7'):
        server.start()
    assert server.process is None and server._own_data_parent is None


DYING_SESSION = '''
import json, sys
from tests.support import postgres_server as pg
server = pg.PostgresServer(sys.argv[1])
server.start()
print(json.dumps({'processes': server.processes(), 'data_dir': server.data_dir}), flush=True)
sys.stdin.read()
'''


@pytest.fixture
def private_data_root(monkeypatch):
    """A data root of this test's own (readable by the server's account), for this process
    and the sessions it starts: other workers' sessions, which remove the folders of dead
    sessions under the shared root, never see it."""
    root = tempfile.mkdtemp(prefix='researchutils-test-root-', dir=pg._data_root())
    os.chmod(root, 0o755)
    monkeypatch.setenv(pg.ROOT_VARIABLE, root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@needs_postgres
def test_a_test_process_killed_outright_takes_its_server_along(tmp_path, private_data_root):
    session = subprocess.Popen([sys.executable, '-c', DYING_SESSION, str(tmp_path)],
                               cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        started = json.loads(session.stdout.readline())
    finally:
        session.kill()
        session.communicate()
    assert started['data_dir'].startswith(private_data_root + os.sep)
    processes = {int(pid): start for pid, start in started['processes'].items()}
    deadline = time.monotonic() + 60
    while pg.alive(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = pg.alive(processes)
    for pid in left:  # the test fails; the server is not left running all the same
        os.kill(pid, signal.SIGKILL)
    assert left == {}
    # Its data folder outlived it; the next session that makes a folder removes it.
    assert os.path.exists(started['data_dir'])
    pg._remove_leftovers()
    assert not os.path.exists(started['data_dir'])


def test_without_the_binaries_the_reason_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(pg, 'SEARCH_DIRS', str(tmp_path / 'none' / '*' / 'bin'))
    monkeypatch.setenv('PATH', str(tmp_path))
    assert pg.find_bin_dir() is None
    assert 'apt-get install postgresql' in pg.missing()
