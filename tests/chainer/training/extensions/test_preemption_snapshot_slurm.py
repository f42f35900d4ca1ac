"""PreemptionSnapshot under a real single-node SLURM (tests/support/slurm_cluster.py).

``sbatch --signal=B:USR1@120 --requeue`` a short training job: SLURM sends SIGUSR1 to the
batch step (the training process) before the time limit, the run snapshots, runs
``scontrol requeue`` itself and exits 75; SLURM starts the job again, which resumes and
finishes bit-identical to an uninterrupted run. Skips, saying why, without SLURM or root.
"""
import sys
import time

import pytest

from tests.chainer.training.extensions.test_preemption_snapshot import (
    REPO,
    _assert_same_run,
    _results,
    _train,
)
from tests.support import slurm_cluster
from tests.support.preemptible_training import wait_for
from tests.support.processes import checkout_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
JOB_TIMEOUT = 300.


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    reason = slurm_cluster.missing()
    if reason is not None:
        pytest.skip(reason)
    with slurm_cluster.single_node_slurm(tmp_path_factory.mktemp('slurm')) as env:
        yield env


def _batch_script(path, out):
    with open(path, 'w') as f:
        f.write('#!/bin/bash\n'
                # exec: the training process is the batch step, which B: signals.
                'exec {} -m tests.support.preemptible_training {} --requeue '
                '--hold-until-signalled-at 3\n'.format(sys.executable, out))


def test_a_job_signalled_before_its_time_limit_requeues_itself_and_resumes_exactly(
        slurm, tmp_path):
    status, stderr = _train(tmp_path / 'reference')
    assert status == 0, stderr
    out = tmp_path / 'out'
    out.mkdir()
    script = str(tmp_path / 'job.sh')
    _batch_script(script, out)
    env = checkout_env(slurm)
    # Time limit 3 minutes, SIGUSR1 120 s before it. SLURM checks the limits about every
    # 30 s, so the signal comes 30 to 60 s after the start: long after Python has
    # installed its handler, long before the limit.
    submitted = slurm_cluster.command(
        ['sbatch', '--parsable', '--time=3', '--signal=B:USR1@120', '--requeue',
         '--open-mode=append', '--chdir=' + REPO, '--output=' + str(tmp_path / 'job.log'),
         script], env)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(';')[0]
    wait_for(str(out / 'holding'), timeout=JOB_TIMEOUT)
    deadline = time.monotonic() + JOB_TIMEOUT
    hurried = set()
    while True:
        fields = slurm_cluster.job_fields(job, env)
        state = fields.get('JobState')
        if state == 'COMPLETED':
            break
        assert state in ('PENDING', 'RUNNING', 'REQUEUED', 'COMPLETING'), fields
        if state == 'PENDING' and fields.get('Reason') == 'BeginTime' \
                and fields['Restarts'] not in hurried:
            # A requeued job may start again only 2 minutes later: hurry it.
            hurried.add(fields['Restarts'])
            hurry = slurm_cluster.command(['scontrol', 'update', 'JobId=' + job,
                                           'StartTime=now'], env)
            assert hurry.returncode == 0, hurry.stderr
        assert time.monotonic() < deadline, fields
        time.sleep(0.2)
    with open(str(tmp_path / 'job.log')) as f:
        log = f.read()
    assert int(fields['Restarts']) >= 1, log
    assert fields['ExitCode'] == '0:0', log
    assert "PreemptionSnapshot: SIGUSR1 received; the state after iteration 3 is in " \
        "'{}'".format(out / 'snapshot_iter_3') in log
    _assert_same_run(_results(out), _results(tmp_path / 'reference'))
