"""tests/support/leftovers.py: a test run stopped mid-way leaves no process behind, and what a
killed run left is ended by the next run.

Each test runs a small pytest run of its own (the suite's conftest, two xdist workers) whose
test starts a process in a session of its own, as a daemon detaches (munged, slurmctld), and
then waits; the run is stopped as CI or ``timeout`` stops one, and the test looks for
survivors by the run's tag (and, for SLURM, by the cluster's folder).
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.support import leftovers, slurm_cluster
from tests.support.processes import checkout_env

HERE = os.path.dirname(os.path.abspath(__file__))
CONFTEST = os.path.join(os.path.dirname(HERE), 'conftest.py')
DEADLINE = 120.

DETACHING_TEST = '''
import os
import subprocess
import sys
import time

import pytest


@pytest.fixture
def daemon():
    # A session of its own, as a daemon detaches: not in this worker's process group. No
    # tear-down, as none runs in a killed run: only the run's sweep can end it.
    return subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],
                            start_new_session=True)


def test_waits(daemon):
    with open(os.environ['READY_FILE'] + '.tmp', 'w') as f:
        f.write(str(daemon.pid))
    os.replace(os.environ['READY_FILE'] + '.tmp', os.environ['READY_FILE'])
    time.sleep(600)
'''

SLURM_TEST = '''
import os
import time

from tests.support import slurm_cluster


def test_waits_on_a_running_job(tmp_path):
    with slurm_cluster.single_node_slurm(tmp_path / 'slurm') as env:
        script = tmp_path / 'job.sh'
        script.write_text('#!/bin/sh\\nexec sleep 600\\n')
        submitted = slurm_cluster.command(['sbatch', '--parsable', '-o',
                                           str(tmp_path / 'job.out'), str(script)], env)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip()
        while slurm_cluster.job_fields(job, env).get('JobState') != 'RUNNING':
            time.sleep(0.1)
        with open(os.environ['READY_FILE'], 'w') as f:
            f.write(str(tmp_path))
        time.sleep(600)
'''


def _start_run(folder, test_source, extra_env=None):
    folder.mkdir()
    shutil.copy(CONFTEST, str(folder))
    (folder / 'test_inner.py').write_text(test_source)
    ready = folder / 'ready'
    env = checkout_env(dict(os.environ, READY_FILE=str(ready), **(extra_env or {})))
    # Not this run's tag: the run started here leads a run of its own.
    env.pop(leftovers.RUN_VARIABLE, None)
    run = subprocess.Popen(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-n', '2',
         'test_inner.py'],
        cwd=str(folder), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return run, ready


def _wait_for(condition, what, run=None):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if run is not None and run.poll() is not None:
            pytest.fail('the run ended before {}: {}'.format(what, run.stdout.read()[-3000:]))
        if time.monotonic() > deadline:
            pytest.fail('{} within {} s'.format(what, DEADLINE))
        time.sleep(0.05)


def _running(pid):
    return leftovers._still_there(pid)


def _stopped_by(signum, tmp_path, test_source, extra_env=None):
    """Starts a run, waits for its test, stops it with ``signum``; returns the run's tag
    and what its test wrote to the ready file."""
    run, ready = _start_run(tmp_path / 'run', test_source, extra_env)
    try:
        _wait_for(ready.exists, 'its test started', run)
        tag = leftovers.tag_of(run.pid)
        assert tag is not None
        written = ready.read_text()
        run.send_signal(signum)
        run.wait(timeout=DEADLINE)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        run.stdout.close()
    return tag, written


def test_a_run_stopped_by_sigterm_ends_every_process_it_started(tmp_path):
    tag, daemon = _stopped_by(signal.SIGTERM, tmp_path, DETACHING_TEST)
    # The run's workers and the detached daemon alike.
    _wait_for(lambda: not _running(int(daemon)), 'the daemon ended')
    assert leftovers.processes_of(tag) == []


def test_a_run_started_from_an_xdist_worker_leads_its_own(tmp_path):
    # make test runs this file on xdist workers, whose PYTEST_XDIST_WORKER every run a
    # test starts inherits: such a run is no worker of ours, and still ends what it started.
    tag, daemon = _stopped_by(signal.SIGTERM, tmp_path, DETACHING_TEST,
                              {'PYTEST_XDIST_WORKER': 'gw0'})
    _wait_for(lambda: not _running(int(daemon)), 'the daemon ended')
    assert leftovers.processes_of(tag) == []


def test_what_a_killed_run_left_is_ended_when_the_next_run_starts(tmp_path):
    tag, daemon = _stopped_by(signal.SIGKILL, tmp_path, DETACHING_TEST)
    # Nothing could run in the killed leader: its daemon lives on, carrying its tag, until
    # the next run starts (another test's run may start first, and end it: either way, it
    # never outlives a next run's start).
    (tmp_path / 'next').mkdir()
    (tmp_path / 'next' / 'test_nothing.py').write_text('def test_nothing():\n    pass\n')
    shutil.copy(CONFTEST, str(tmp_path / 'next'))
    env = checkout_env()
    env.pop(leftovers.RUN_VARIABLE, None)
    done = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q',
                           'test_nothing.py'], cwd=str(tmp_path / 'next'), env=env,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    _wait_for(lambda: not _running(int(daemon)), 'the leftover daemon ended')
    assert leftovers.processes_of(tag) == []


def test_processes_of_a_tag_are_those_that_carry_it(tmp_path):
    # A leader that stays alive, and a process carrying its tag: found by the tag, never
    # taken for a dead run's leftover.
    leader = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
    try:
        tag = leftovers.tag_of(leader.pid)
        carrier = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],
                                   env=dict(os.environ, **{leftovers.RUN_VARIABLE: tag}))
        try:
            _wait_for(lambda: leftovers.processes_of(tag) == [carrier.pid],
                      'the carrier found by its tag')
            assert carrier.pid not in leftovers.processes_of(None)
            assert leftovers.end([carrier.pid]) == [carrier.pid]
            assert carrier.wait(timeout=DEADLINE) == -signal.SIGTERM
        finally:
            carrier.kill()
            carrier.wait()
    finally:
        leader.kill()
        leader.wait()
    # Once the leader is gone, a process of its tag is a leftover.
    assert not leftovers._alive(tag)


def test_a_process_started_with_its_own_environment_keeps_the_tag():
    env = leftovers.tagged({'PATH': os.defpath})
    assert env == {'PATH': os.defpath,
                   leftovers.RUN_VARIABLE: os.environ[leftovers.RUN_VARIABLE]}


@pytest.mark.system
@pytest.mark.slow(reason='starts a real single-node SLURM and a job, then stops the run')
def test_a_run_stopped_while_a_slurm_job_runs_leaves_no_daemon_or_job(tmp_path):
    reason = slurm_cluster.missing()
    if reason is not None:
        pytest.skip(reason)
    tag, cluster = _stopped_by(signal.SIGTERM, tmp_path, SLURM_TEST)

    def survivors():
        # munged, slurmctld, slurmd, slurmstepd and the job's sleep: by the run's tag, and
        # by the cluster's folder on their command line (a daemon that cleared its
        # environment).
        found = set(leftovers.processes_of(tag))
        for pid in leftovers._pids():
            try:
                with open('/proc/{}/cmdline'.format(pid), 'rb') as f:
                    if cluster.encode() in f.read():
                        found.add(pid)
            except OSError:
                pass
        return {pid for pid in found if _running(pid)}

    _wait_for(lambda: not survivors(), 'SLURM and its job ended')
