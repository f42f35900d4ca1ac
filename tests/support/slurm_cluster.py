"""A real single-node SLURM on localhost, started for a test and stopped after it.

:func:`single_node_slurm` starts ``munged`` (with a key of its own), ``slurmctld`` and
``slurmd`` from Debian's ``slurm-wlm`` and ``munge`` packages, all configured in one
temporary folder (no file outside it is read or written, and the ports are free ones),
waits until the node is idle, and yields the environment that points SLURM's commands
at it (``SLURM_CONF``). :func:`missing` says why it cannot run here (no SLURM, not
root), for a clean skip.

Tested by tests/chainer/training/extensions/test_preemption_snapshot_slurm.py, whose one
test needs every part of it.
"""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time

START_TIMEOUT = 60.
_DAEMONS = ('munged', 'slurmctld', 'slurmd')
_COMMANDS = ('sbatch', 'scontrol', 'sinfo', 'munge')
# Daemons live in sbin, which a user's PATH may lack.
_SEARCH_PATH = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin', '/usr/local/sbin'])


def _which(name):
    return shutil.which(name, path=_SEARCH_PATH)


def missing():
    """Why a single-node SLURM cannot start here, or None when it can."""
    absent = [name for name in _DAEMONS + _COMMANDS if _which(name) is None]
    if absent:
        return ('SLURM is not installed ({} not found; apt-get install slurm-wlm '
                'munge)'.format(', '.join(absent)))
    if os.geteuid() != 0:
        return 'slurmd must run as root to start jobs as their user'
    return None


def _free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


_CONF = """\
ClusterName=researchutils-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={controller_port}
SlurmdPort={node_port}
AuthType=auth/munge
AuthInfo=socket={folder}/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
MinJobAge=600
KillWait=30
JobRequeue=1
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=500 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _run(command, env, timeout=30):
    return subprocess.run([_which(command[0])] + command[1:], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _wait_until(condition, what, timeout, logs=()):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            tails = []
            for path in logs:
                if os.path.exists(path):
                    with open(path) as f:
                        tails.append('{}:\n{}'.format(path, ''.join(f.readlines()[-20:])))
            raise TimeoutError('{} within {} s\n{}'.format(what, timeout, '\n'.join(tails)))
        time.sleep(0.05)


def _stop(pid_file, timeout=30.):
    """Ends the daemon whose pid is in ``pid_file`` (only that process)."""
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def single_node_slurm(folder):
    """Runs munged, slurmctld and slurmd configured in ``folder``; yields their environment.

    Raises:
        TimeoutError: A daemon did not come up within ``START_TIMEOUT`` seconds; the
            message holds the tails of their logs.
    """
    folder = os.path.abspath(str(folder))
    munge = os.path.join(folder, 'munge')
    for name in ('munge', 'state', 'spool'):
        os.makedirs(os.path.join(folder, name), exist_ok=True)
    # munged refuses a key or socket folder that others may write to.
    os.chmod(munge, 0o755)
    key = os.path.join(munge, 'munge.key')
    with open(key, 'wb') as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o600)
    host = socket.gethostname().split('.')[0]
    conf = os.path.join(folder, 'slurm.conf')
    with open(conf, 'w') as f:
        f.write(_CONF.format(host=host, folder=folder, controller_port=_free_port(),
                             node_port=_free_port(), cpus=os.cpu_count() or 1))
    env = dict(os.environ, SLURM_CONF=conf)
    logs = [os.path.join(folder, name) for name in ('munge/munged.log', 'slurmctld.log',
                                                    'slurmd.log')]
    try:
        done = _run(['munged', '--force', '--key-file=' + key,
                     '--socket=' + os.path.join(munge, 'munge.socket'),
                     '--pid-file=' + os.path.join(munge, 'munged.pid'),
                     '--log-file=' + logs[0],
                     '--seed-file=' + os.path.join(munge, 'munged.seed')], env)
        if done.returncode != 0:
            raise RuntimeError('munged did not start: ' + (done.stderr or done.stdout))
        for daemon in (['slurmctld', '-i'], ['slurmd']):
            done = _run(daemon, env)
            if done.returncode != 0:
                raise RuntimeError('{} did not start: {}'.format(
                    daemon[0], done.stderr or done.stdout))
        _wait_until(lambda: _run(['sinfo', '-h', '-o', '%t'], env).stdout.strip() == 'idle',
                    'the node did not become idle', START_TIMEOUT, logs)
        yield env
    finally:
        _stop(os.path.join(folder, 'slurmd.pid'))
        _stop(os.path.join(folder, 'slurmctld.pid'))
        _stop(os.path.join(munge, 'munged.pid'))


def for_a_test_module(tmp_path_factory):
    """The body of a module-scoped ``slurm`` fixture: yields the environment (the checkout
    on its import path) of a single-node SLURM kept for the module; skips where SLURM is
    missing."""
    import pytest

    from tests.support.processes import checkout_env
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    with single_node_slurm(tmp_path_factory.mktemp('slurm')) as env:
        yield checkout_env(env)


# The states ``scontrol`` shows for a job on its way (a flag, when one is set, is shown
# instead of the base state): waiting, starting, running, being signalled (``--signal``,
# ``scancel``), ending, requeued. A test polling a job that should end well fails on any
# other, and must accept each of these, however briefly it lasts: a poll on a busy machine
# catches them (a ``--signal=B:USR1@120`` job was seen SIGNALING).
ON_ITS_WAY = ('PENDING', 'CONFIGURING', 'RUNNING', 'SIGNALING', 'COMPLETING', 'REQUEUED')


def job_fields(job_id, env):
    """``scontrol show job``'s fields of ``job_id`` as a dict (``JobState``, ``Restarts``...)."""
    done = _run(['scontrol', 'show', 'job', '-o', str(job_id)], env)
    fields = {}
    for item in done.stdout.split():
        name, _, value = item.partition('=')
        fields.setdefault(name, value)
    return fields


def command(arguments, env, timeout=30):
    """Runs a SLURM command (``['sbatch', ...]``) against the cluster of ``env``."""
    return _run(list(arguments), env, timeout)
