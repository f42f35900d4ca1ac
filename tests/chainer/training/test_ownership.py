"""The claim of a folder (training/_ownership.py) on real files, with real processes as owners."""
import contextlib
import datetime
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

# A process that holds FOLDER until its standard input closes; says "held" once it does. A
# second argument renames the process (its name in /proc/PID/stat) first.
_HOLDER = """
import signal
import sys
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a hangup ends it, even under nohup
from researchutils.chainer.training._ownership import hold
if len(sys.argv) > 2:
    with open('/proc/self/comm', 'w') as comm:
        comm.write(sys.argv[2])
with hold(sys.argv[1]):
    print('held', flush=True)
    sys.stdin.read()
"""


def _start_holder(folder, *name):
    process = subprocess.Popen([sys.executable, '-c', _HOLDER, str(folder)] + list(name),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == 'held\n'
    return process


def _end(process):
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdin.close()
    process.stdout.close()


@pytest.fixture
def holder(tmp_path):
    """Starts a process holding ``tmp_path/exp``; yields it; ends it."""
    process = _start_holder(tmp_path / 'exp')
    yield process
    _end(process)


def _uptime():
    """Seconds since boot, the clock of /proc/PID/stat's start times."""
    with open('/proc/uptime') as stream:
        return float(stream.read().split()[0])


def _record(folder):
    with open(os.path.join(folder, OWNER_FILE)) as f:
        return json.load(f)


def test_a_held_folder_records_its_owner_and_is_released_after(tmp_path):
    folder = str(tmp_path / 'exp')
    with hold(folder):
        record = _record(folder)
        assert record['host'] == socket.gethostname() and record['pid'] == os.getpid()
        assert abs(record['heartbeat'] - time.time()) < 60
        since = datetime.datetime.fromisoformat(record['since'])
        assert since.tzinfo is not None and since.microsecond == 0  # to the second, with zone
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
    path = os.path.join(folder, OWNER_FILE)
    # It names the folder, and the file to delete should that run be gone.
    assert folder in message.replace(path, '') and path in message
    assert 'pid {} on host {}'.format(holder.pid, socket.gethostname()) in message
    assert 'since {}'.format(record['since']) in message
    assert _record(folder) == record  # the owner's claim untouched, and the owner
    holder.stdin.close()
    assert holder.wait() == 0


def test_a_wait_that_runs_out_says_so_then_refuses(tmp_path, holder):
    folder = str(tmp_path / 'exp')
    with pytest.warns(RuntimeWarning, match='held by another run.*waiting up to 0.5 s') as said:
        with pytest.raises(FolderInUseError, match='held by another run'):
            with hold(folder, wait=0.5):
                pytest.fail('entered a held folder')
    assert _record(folder)['pid'] == holder.pid
    assert folder in str(said[0].message) and 'pid {} '.format(holder.pid) in str(said[0].message)


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
    monkeypatch.setattr(_ownership, 'HEARTBEAT_INTERVAL', 0.3)
    monkeypatch.setattr(_ownership, 'GRACE_PERIOD', 1.5)
    _foreign(tmp_path / 'exp', age=0.7)  # two beats missed (not three), not yet the grace period
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match='heartbeat stopped.*1.5 s') as said:
        with hold(str(tmp_path / 'exp')):
            waited = time.monotonic() - started
            assert _record(str(tmp_path / 'exp'))['pid'] == os.getpid()
    assert waited >= 0.7
    assert len(said) == 1  # said once, not at every look


def test_the_heartbeat_renews_the_record_while_held(tmp_path, monkeypatch):
    monkeypatch.setattr(_ownership, 'HEARTBEAT_INTERVAL', 0.05)
    folder = str(tmp_path / 'exp')

    def heartbeats():
        return [thread for thread in threading.enumerate()
                if thread.name == 'researchutils-folder-heartbeat']

    assert heartbeats() == []
    with hold(folder):
        assert len(heartbeats()) == 1  # a thread of that name, in a debugger's list of them
        first = _record(folder)
        deadline = time.monotonic() + 30
        while _record(folder)['heartbeat'] == first['heartbeat']:
            assert time.monotonic() < deadline, 'no heartbeat in 30 s'
            time.sleep(0.01)
        renewed = _record(folder)
        assert renewed['heartbeat'] > first['heartbeat']
        assert {k: v for k, v in renewed.items() if k != 'heartbeat'} == {
            k: v for k, v in first.items() if k != 'heartbeat'}
    assert heartbeats() == []


def test_a_claim_renewed_while_judged_dead_is_put_back(tmp_path):
    folder = tmp_path / 'exp'
    _foreign(folder, age=1)
    judged = json.loads((folder / OWNER_FILE).read_text())
    judged['token'] = 'judged-earlier'  # what a slow taker read before the owner renewed
    _ownership._take_over(str(folder / OWNER_FILE), judged)
    assert json.loads((folder / OWNER_FILE).read_text())['token'] == 'theirs'
    assert os.listdir(str(folder)) == [OWNER_FILE]


def test_a_claim_renewed_after_it_was_judged_dead_is_put_back(tmp_path):
    folder = tmp_path / 'exp'
    _foreign(folder, age=_ownership.GRACE_PERIOD + 1)
    judged = json.loads((folder / OWNER_FILE).read_text())
    # The owner was slow, not gone: it renews its heartbeat before the taker moves the claim.
    renewed = dict(judged, heartbeat=time.time())
    (folder / OWNER_FILE).write_text(json.dumps(renewed))
    _ownership._take_over(str(folder / OWNER_FILE), judged)
    assert json.loads((folder / OWNER_FILE).read_text()) == renewed
    assert os.listdir(str(folder)) == [OWNER_FILE]


def test_an_owner_named_with_a_parenthesis_is_told_by_when_it_started(tmp_path):
    # /proc/PID/stat writes the name in parentheses, unquoted: fields are counted from its end.
    before = time.clock_gettime(time.CLOCK_BOOTTIME)
    process = _start_holder(tmp_path / 'exp', 'x) 1 2 3 (y')
    try:
        after = time.clock_gettime(time.CLOCK_BOOTTIME)
        started = int(_record(tmp_path / 'exp')['started']) / os.sysconf('SC_CLK_TCK')
        assert before - 1 <= started <= after + 1
        with pytest.raises(FolderInUseError, match='pid {} '.format(process.pid)):
            with hold(str(tmp_path / 'exp')):
                pytest.fail('entered a held folder')
    finally:
        _end(process)


@pytest.mark.parametrize('started', ['missing', None])
def test_an_owner_on_this_host_with_no_start_time_is_live_while_its_pid_is(
        tmp_path, holder, started):
    path = tmp_path / 'exp' / OWNER_FILE
    record = json.loads(path.read_text())
    if started == 'missing':
        del record['started']
    else:
        record['started'] = started
    path.write_text(json.dumps(record))
    with pytest.raises(FolderInUseError, match='pid {} '.format(holder.pid)):
        with hold(str(tmp_path / 'exp')):
            pytest.fail('entered a held folder')


def _age_file(path, age):
    now = time.time()
    os.utime(str(path), (now - age, now - age))


@pytest.mark.parametrize('content', ['[1, 2]', '{"host": ', '\x00\xff'])
def test_an_unreadable_claim_is_judged_by_the_age_of_its_file(tmp_path, content):
    folder = tmp_path / 'exp'
    folder.mkdir()
    (folder / OWNER_FILE).write_text(content, encoding='latin-1')
    with pytest.raises(FolderInUseError) as raised:
        with hold(str(folder)):
            pytest.fail('entered a folder claimed a moment ago')
    assert str(folder) in str(raised.value) and 'cannot be read' in str(raised.value)
    _age_file(folder / OWNER_FILE, _ownership.GRACE_PERIOD + 5)
    with hold(str(folder)):
        assert _record(folder)['pid'] == os.getpid()
    assert os.listdir(str(folder)) == []


@pytest.mark.parametrize('heartbeat', ['missing', 'yesterday', True, None])
def test_another_hosts_claim_without_a_heartbeat_is_judged_by_the_age_of_its_file(
        tmp_path, heartbeat):
    folder = tmp_path / 'exp'
    _foreign(folder, age=0)
    record = _record(folder)
    if heartbeat == 'missing':
        del record['heartbeat']
    else:
        record['heartbeat'] = heartbeat
    (folder / OWNER_FILE).write_text(json.dumps(record))
    with pytest.raises(FolderInUseError, match='pid 4242 on host another-node'):
        with hold(str(folder)):
            pytest.fail('entered a folder claimed a moment ago')
    _age_file(folder / OWNER_FILE, _ownership.GRACE_PERIOD + 5)
    with hold(str(folder)):
        assert _record(folder)['pid'] == os.getpid()


def test_an_owner_file_that_points_nowhere_is_taken_over(tmp_path):
    folder = tmp_path / 'exp'
    folder.mkdir()
    os.symlink(str(tmp_path / 'gone'), str(folder / OWNER_FILE))
    with hold(str(folder)):
        assert _record(folder)['pid'] == os.getpid()
    assert os.listdir(str(folder)) == []


def test_a_dead_claim_is_taken_over_from_a_working_folder_that_was_removed(
        tmp_path, monkeypatch):
    _foreign(tmp_path / 'exp', age=_ownership.GRACE_PERIOD + 1)
    (tmp_path / 'cwd').mkdir()
    monkeypatch.chdir(tmp_path / 'cwd')
    (tmp_path / 'cwd').rmdir()
    with hold(str(tmp_path / 'exp')):
        assert _record(tmp_path / 'exp')['pid'] == os.getpid()


def _heartbeat_warnings(said):
    """Waits for the heartbeat thread's first warning in ``said``; returns them all."""
    while not said:
        time.sleep(0.005)
    return said


@contextlib.contextmanager
def _held_with_fast_heartbeats(folder, monkeypatch):
    """Holds ``folder`` with a heartbeat every 50 ms, recording every warning; yields the
    list of warnings said, which the claim's release may add to."""
    monkeypatch.setattr(_ownership, 'HEARTBEAT_INTERVAL', 0.05)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always')
        with hold(str(folder)):
            yield said


def test_a_claim_taken_over_while_held_is_told_and_left_to_the_taker(tmp_path, monkeypatch):
    folder = tmp_path / 'exp'
    with _held_with_fast_heartbeats(folder, monkeypatch) as said:
        _foreign(folder, age=0)  # another node judged this run dead and took the folder
        theirs = _record(folder)
        _heartbeat_warnings(said)
    assert _record(folder) == theirs  # neither renewed over nor removed at the end
    assert len(said) == 1 and said[0].category is RuntimeWarning
    message = str(said[0].message)
    assert str(folder) in message and 'pid 4242 on host another-node' in message


def test_a_claim_removed_while_held_is_told_and_not_made_again(tmp_path, monkeypatch):
    folder = tmp_path / 'exp'
    with _held_with_fast_heartbeats(folder, monkeypatch) as said:
        os.remove(str(folder / OWNER_FILE))
        _heartbeat_warnings(said)
    assert len(said) == 1 and said[0].category is RuntimeWarning
    assert str(folder) in str(said[0].message)
    assert os.listdir(str(folder)) == []


_LEAVER = """
import sys
from researchutils.chainer.training._ownership import hold
held = hold(sys.argv[1])
held.__enter__()  # never left: the process ends holding the folder
print('held', flush=True)
"""


def test_a_process_that_ends_holding_a_folder_exits_and_the_folder_is_taken_over(tmp_path):
    process = subprocess.run([sys.executable, '-c', _LEAVER, str(tmp_path / 'exp')],
                             stdout=subprocess.PIPE, text=True, timeout=15)
    assert process.stdout == 'held\n' and process.returncode == 0
    with hold(str(tmp_path / 'exp')):
        assert _record(tmp_path / 'exp')['pid'] == os.getpid()


def test_no_heartbeat_lands_after_the_claim_is_released(tmp_path, monkeypatch):
    monkeypatch.setattr(_ownership, 'HEARTBEAT_INTERVAL', 0)  # beating all the time
    folder = str(tmp_path / 'exp')
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always')
        for _ in range(20):
            with hold(folder):
                pass
            assert os.listdir(folder) == []
    assert said == []


def test_a_claim_taken_by_another_claim_while_held_is_left_to_it(tmp_path, monkeypatch):
    folder = tmp_path / 'exp'
    with _held_with_fast_heartbeats(folder, monkeypatch) as said:
        # Another run, which judged this one dead, moved its claim aside and made its own.
        os.remove(str(folder / OWNER_FILE))
        other = _ownership._Claim(str(folder))
        assert other.try_take()
        try:
            _heartbeat_warnings(said)
        finally:
            other.release()
            assert not os.path.exists(str(folder / OWNER_FILE))
    assert len(said) == 1 and str(folder) in str(said[0].message)
