"""The claim of a folder (training/_ownership.py) on real files, with real processes as owners."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest

from researchutils.chainer.training import _ownership
from researchutils.chainer.training._ownership import OWNER_FILE, FolderInUseError, hold

# Each test takes a second or two; a claim that never ends (a broken wait) fails in bounded time.
pytestmark = pytest.mark.timeout(20)

# A process that holds FOLDER until its standard input closes; says "held" once it does.
_HOLDER = """
import sys
from researchutils.chainer.training._ownership import hold
with hold(sys.argv[1]):
    print('held', flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path):
    """Starts a process holding ``tmp_path/exp``; yields it; ends it."""
    process = subprocess.Popen([sys.executable, '-c', _HOLDER, str(tmp_path / 'exp')],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == 'held\n'
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdin.close()
    process.stdout.close()


def _record(folder):
    with open(os.path.join(folder, OWNER_FILE)) as f:
        return json.load(f)


def test_a_held_folder_records_its_owner_and_is_released_after(tmp_path):
    folder = str(tmp_path / 'exp')
    with hold(folder):
        record = _record(folder)
        assert record['host'] == socket.gethostname() and record['pid'] == os.getpid()
        assert abs(record['heartbeat'] - time.time()) < 60
        assert record['since'][:4].isdigit()
    assert os.listdir(folder) == []


def test_holding_is_reentrant_in_one_process(tmp_path):
    folder = str(tmp_path / 'exp')
    with hold(folder):
        with hold(folder):
            assert os.path.exists(os.path.join(folder, OWNER_FILE))
        assert os.path.exists(os.path.join(folder, OWNER_FILE))
    assert not os.path.exists(os.path.join(folder, OWNER_FILE))


def test_the_claim_is_released_when_the_run_raises(tmp_path):
    folder = str(tmp_path / 'exp')
    with pytest.raises(KeyError, match='users error'):
        with hold(folder):
            raise KeyError('users error')
    with hold(folder):
        pass


def test_a_live_owner_refuses_another_at_once_naming_folder_owner_and_since(tmp_path, holder):
    folder = str(tmp_path / 'exp')
    record = _record(folder)
    started = time.monotonic()
    with pytest.raises(FolderInUseError) as raised:
        with hold(folder):
            pytest.fail('entered a folder that another process holds')
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert folder in message and 'pid {} on host {}'.format(holder.pid,
                                                             socket.gethostname()) in message
    assert 'since {}'.format(record['since']) in message
    assert _record(folder) == record  # the owner's claim untouched


def test_a_wait_that_runs_out_says_so_then_refuses(tmp_path, holder):
    folder = str(tmp_path / 'exp')
    with pytest.warns(RuntimeWarning, match='held by another run.*waiting up to 0.5 s'):
        with pytest.raises(FolderInUseError, match='held by another run'):
            with hold(folder, wait=0.5):
                pytest.fail('entered a held folder')
    assert _record(folder)['pid'] == holder.pid


def test_waiting_ends_with_the_owner(tmp_path, holder):
    folder = str(tmp_path / 'exp')

    def end_the_owner_once_waited_for(said):
        while not said:
            time.sleep(0.005)
        holder.stdin.close()

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always')
        ender = threading.Thread(target=end_the_owner_once_waited_for, args=(said,))
        ender.start()
        with hold(folder, wait=60):
            assert _record(folder)['pid'] == os.getpid()
        ender.join()
    assert holder.wait() == 0
    assert [str(warning.message) for warning in said if 'waiting up to 60 s' in str(
        warning.message) and folder in str(warning.message)], said


def test_a_killed_owners_claim_is_taken_over(tmp_path, holder):
    folder = str(tmp_path / 'exp')
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert _record(folder)['pid'] == holder.pid
    with hold(folder):
        assert _record(folder)['pid'] == os.getpid()
    assert not os.path.exists(os.path.join(folder, OWNER_FILE))


def test_a_pid_given_to_another_process_is_not_the_owner(tmp_path):
    folder = tmp_path / 'exp'
    folder.mkdir()
    # This very process, but recorded as started at another moment: a reused pid.
    (folder / OWNER_FILE).write_text(json.dumps({
        'host': socket.gethostname(), 'pid': os.getpid(), 'started': '1',
        'since': '2026-01-01T00:00:00+00:00', 'token': 'old', 'heartbeat': time.time()}))
    with hold(str(folder)):
        assert _record(str(folder))['token'] != 'old'


def _foreign(folder, age):
    folder.mkdir(exist_ok=True)
    (folder / OWNER_FILE).write_text(json.dumps({
        'host': 'another-node', 'pid': 4242, 'started': '7', 'token': 'theirs',
        'since': '2026-12-01T10:00:00+00:00', 'heartbeat': time.time() - age}))


def test_another_hosts_owner_with_a_fresh_heartbeat_is_live(tmp_path):
    _foreign(tmp_path / 'exp', age=1)
    with pytest.raises(FolderInUseError, match='pid 4242 on host another-node, since 2026-12-01'):
        with hold(str(tmp_path / 'exp')):
            pass


def test_another_hosts_owner_silent_past_the_grace_period_is_taken_over(tmp_path):
    _foreign(tmp_path / 'exp', age=_ownership.GRACE_PERIOD + 1)
    with hold(str(tmp_path / 'exp')):
        assert _record(str(tmp_path / 'exp'))['pid'] == os.getpid()
    assert os.listdir(str(tmp_path / 'exp')) == []


def test_another_hosts_owner_that_missed_heartbeats_is_waited_for_until_the_grace_period(
        tmp_path, monkeypatch):
    monkeypatch.setattr(_ownership, 'HEARTBEAT_INTERVAL', 0.1)
    monkeypatch.setattr(_ownership, 'GRACE_PERIOD', 1.5)
    _foreign(tmp_path / 'exp', age=0.5)  # three beats missed, not yet the grace period
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match='heartbeat stopped.*1.5 s'):
        with hold(str(tmp_path / 'exp')):
            waited = time.monotonic() - started
            assert _record(str(tmp_path / 'exp'))['pid'] == os.getpid()
    assert waited >= 0.9


def test_the_heartbeat_renews_the_record_while_held(tmp_path, monkeypatch):
    monkeypatch.setattr(_ownership, 'HEARTBEAT_INTERVAL', 0.05)
    folder = str(tmp_path / 'exp')
    with hold(folder):
        first = _record(folder)
        deadline = time.monotonic() + 30
        while _record(folder)['heartbeat'] == first['heartbeat']:
            assert time.monotonic() < deadline, 'no heartbeat in 30 s'
            time.sleep(0.01)
        renewed = _record(folder)
        assert renewed['heartbeat'] > first['heartbeat']
        assert {k: v for k, v in renewed.items() if k != 'heartbeat'} == {
            k: v for k, v in first.items() if k != 'heartbeat'}


def test_a_claim_renewed_while_judged_dead_is_put_back(tmp_path):
    folder = tmp_path / 'exp'
    _foreign(folder, age=1)
    judged = json.loads((folder / OWNER_FILE).read_text())
    judged['token'] = 'judged-earlier'  # what a slow taker read before the owner renewed
    _ownership._take_over(str(folder / OWNER_FILE), judged)
    assert json.loads((folder / OWNER_FILE).read_text())['token'] == 'theirs'
    assert os.listdir(str(folder)) == [OWNER_FILE]
