"""Python subprocesses that run this checkout's researchutils, and none left behind.

:func:`start_module` runs ``python -m MODULE ...`` from the repository root with the
checkout first on ``PYTHONPATH`` (so the child tests this code even where another copy
is installed), in a session of its own when a test signals its whole process group as
a cluster does; :func:`descendants` lists the processes it started (its workers);
:func:`no_process_left` is a fixture that kills whatever a failed test left running.
Used by the preemption tests, which signal such processes.
"""
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_started = []


def checkout_env(env=None):
    """``env`` (default: this process's) with this checkout first on ``PYTHONPATH``."""
    env = dict(os.environ if env is None else env)
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [REPO, env.get('PYTHONPATH')]))
    return env


# What steers which modules another interpreter imports, or how it starts: a test that
# starts an interpreter of another environment (a venv it built, a tool's) leaves them out,
# so that the caller's (a mutation tester's or a bisection's PYTHONPATH at a clone) cannot
# put other code in that environment's place.
_IMPORT_STEERING = ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP', 'PYTHONUSERBASE',
                    'PYTHONSAFEPATH', 'PYTHONNOUSERSITE')


def own_env(env=None, **changes):
    """``env`` (default: this process's) less what steers another interpreter's imports
    (``PYTHONPATH`` and its kin) and this pytest run's state (``PYTEST_*``, which makes a
    child pytest believe it runs under xdist), with ``changes`` applied: for an interpreter
    that must see its own environment only."""
    env = dict(os.environ if env is None else env)
    env = {name: value for name, value in env.items()
           if name not in _IMPORT_STEERING and not name.startswith('PYTEST_')}
    env.update(changes)
    return env


def start_module(module, *arguments, env=None, new_session=False):
    """Starts ``python -m module arguments...``, its output in pipes (text).

    With ``new_session`` the child leads a process group of its own (its pid is the
    group's id), which ``os.killpg`` signals whole, workers included.
    """
    process = subprocess.Popen([sys.executable, '-m', module] + [str(a) for a in arguments],
                               cwd=REPO, env=checkout_env(env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=new_session)
    process.new_session = new_session
    _started.append(process)
    return process


def descendants(pid):
    """The pids of the processes ``pid`` started, and theirs, ... (Linux: /proc)."""
    found = []
    try:
        threads = os.listdir('/proc/{}/task'.format(pid))
    except OSError:  # it ended meanwhile
        return found
    for thread in threads:
        try:
            with open('/proc/{}/task/{}/children'.format(pid, thread)) as f:
                children = [int(child) for child in f.read().split()]
        except OSError:  # the thread or the process ended meanwhile
            continue
        for child in children:
            found += [child] + descendants(child)
    return found


def command_line(pid):
    """Process ``pid``'s arguments as one string ('' once it is gone)."""
    try:
        with open('/proc/{}/cmdline'.format(pid), 'rb') as f:
            return f.read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
        return ''


def is_running(pid):
    """Whether any thread of process ``pid`` has not exited yet.

    The main thread turns zombie ('Z') as soon as it exits, while the others may still be
    tearing down and holding the process's files (its pipes); only when every thread is
    gone has the process let go of everything it held.
    """
    try:
        threads = os.listdir('/proc/{}/task'.format(pid))
    except OSError:
        return False
    for thread in threads:
        try:
            with open('/proc/{}/task/{}/stat'.format(pid, thread)) as f:
                if f.read().rsplit(')', 1)[-1].split()[0] not in ('Z', 'X'):
                    return True
        except OSError:
            pass  # that thread is gone
    return False


def _pending(pid):
    """The signals pending for process ``pid`` or one of its threads (Linux: /proc)."""
    mask = 0
    for thread in os.listdir('/proc/{}/task'.format(pid)):
        try:
            with open('/proc/{}/task/{}/status'.format(pid, thread)) as status:
                for line in status:
                    if line.startswith(('SigPnd:', 'ShdPnd:')):
                        mask |= int(line.split()[1], 16)
        except OSError:  # the thread ended meanwhile
            pass
    return {number for number in signal.valid_signals() if mask >> (number - 1) & 1}


def wait_until_taken(pid, signal_numbers, timeout):
    """Waits until none of ``signal_numbers`` is pending for ``pid`` any more.

    A signal is pending from when it is sent until the process acts on it (its handler,
    its default action, or a thread that takes it). Raises AssertionError if the
    process ended meanwhile, TimeoutError after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            pending = _pending(pid) & set(signal_numbers)
        except OSError:
            pending = None
        assert pending is not None and is_running(pid), 'process {} ended'.format(pid)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError('signals {} still pending for process {} after {} s'.format(
                sorted(pending), pid, timeout))
        time.sleep(0.01)


def wait_until_gone(pids, timeout):
    """Waits until none of ``pids`` runs; returns the seconds it took, or raises TimeoutError."""
    started = time.monotonic()
    while True:
        running = [pid for pid in pids if is_running(pid)]
        if not running:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError('processes {} still run after {} s'.format(running, timeout))
        time.sleep(0.01)


@pytest.fixture
def no_process_left():
    """After the test, kills every process :func:`start_module` started that still runs
    (with its whole group when it has a session of its own)."""
    yield
    while _started:
        process = _started.pop()
        if process.new_session:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        if process.poll() is None:  # a test failed while it ran
            process.kill()
            process.communicate()
