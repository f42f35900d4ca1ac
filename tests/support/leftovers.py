"""Nothing a test run starts outlives it: the processes of a run are tagged, and swept.

A fixture's finally block stops what it started (SLURM's daemons, PostgreSQL, MLflow's
server, worker processes) when the run ends well or on Ctrl-C. It does not run when the run
is killed: a SIGTERM from ``timeout`` or CI, a SIGKILL, a closed terminal. Daemons that detach
(munged, slurmctld, slurmd, and the jobs under slurmstepd) then live on. So:

* the pytest process that leads a run (not an xdist worker) puts ``RUN_VARIABLE`` into its
  environment: its own pid and start time. Every process started from the run inherits it
  (workers, servers, daemons, SLURM's jobs, which inherit sbatch's environment); a fixture
  that starts a process with an environment of its own adds it with :func:`tagged`;
* on SIGTERM or SIGHUP the leader ends every process that carries its tag, then exits
  with the signal's status; at its normal end it ends those still left;
* at its start, a run ends the processes tagged by runs that are gone (a killed run's
  leftovers), so they never take the next run's ports, CPUs or SLURM nodes.

A process is recognised by the tag in its environment (``/proc/PID/environ``), never by
its pid alone, so a reused pid is never taken for a leftover. Linux only (elsewhere
:func:`processes_of` finds nothing).

Tested by tests/support/test_leftovers.py.
"""
import os
import signal
import time

RUN_VARIABLE = 'RESEARCHUTILS_TEST_RUN'


def _start_time(pid):
    """The start time of ``pid`` in clock ticks since boot, or None when it is gone."""
    try:
        with open('/proc/{}/stat'.format(pid), 'rb') as f:
            fields = f.read().rsplit(b')', 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19])


def tag_of(pid):
    """The tag of a run led by ``pid``, or None when no such process runs."""
    started = _start_time(pid)
    return None if started is None else '{}-{}'.format(pid, started)


def _alive(tag):
    pid, _, started = tag.partition('-')
    return pid.isdigit() and tag_of(int(pid)) == tag


def _tag_in(pid):
    try:
        with open('/proc/{}/environ'.format(pid), 'rb') as f:
            environ = f.read()
    except OSError:
        return None
    prefix = RUN_VARIABLE.encode() + b'='
    for entry in environ.split(b'\0'):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors='replace')
    return None


def _pids():
    try:
        names = os.listdir('/proc')
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]


def processes_of(tag=None):
    """The pids of the processes tagged ``tag``, or, with None, of every run that is gone.
    Never this process or its parents."""
    own = set()
    pid = os.getpid()
    while pid > 1:
        own.add(pid)
        try:
            with open('/proc/{}/stat'.format(pid), 'rb') as f:
                pid = int(f.read().rsplit(b')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    found = []
    for pid in _pids():
        if pid in own:
            continue
        carried = _tag_in(pid)
        if carried is None:
            continue
        if carried == tag if tag is not None else not _alive(carried):
            found.append(pid)
    return found


def end(pids, grace=5.):
    """Sends SIGTERM to ``pids``, then SIGKILL to those still there after ``grace``
    seconds; returns the pids it signalled."""
    signalled = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            signalled.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    waiting = list(signalled)
    while waiting and time.monotonic() < deadline:
        time.sleep(0.05)
        waiting = [pid for pid in waiting if _still_there(pid)]
    for pid in waiting:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return signalled


def _still_there(pid):
    """Whether ``pid`` runs (a zombie has ended: only its parent's wait is missing)."""
    try:
        with open('/proc/{}/stat'.format(pid), 'rb') as f:
            return f.read().rsplit(b')', 1)[1].split()[0] != b'Z'
    except (OSError, IndexError):
        return False


def tagged(env):
    """``env`` with this run's tag, for a process started with an environment of its own."""
    env = dict(env)
    if RUN_VARIABLE in os.environ:
        env[RUN_VARIABLE] = os.environ[RUN_VARIABLE]
    return env


def lead_run(handle_signals=True):
    """Called by the pytest process that leads a run: ends what runs that are gone left
    behind, tags this run, and with ``handle_signals`` ends its processes on SIGTERM or
    SIGHUP. Returns the pids of the leftovers it ended."""
    ended = end(processes_of(None))
    tag = tag_of(os.getpid())
    os.environ[RUN_VARIABLE] = tag

    def stop(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        end(processes_of(tag))
        os.kill(os.getpid(), signum)

    if handle_signals:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
    return ended


def close_run():
    """Called by the leader at its end: ends what its fixtures left running; returns their
    pids."""
    tag = os.environ.get(RUN_VARIABLE)
    return end(processes_of(tag)) if tag and tag == tag_of(os.getpid()) else []
