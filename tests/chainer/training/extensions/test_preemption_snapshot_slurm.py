"""PreemptionSnapshot under a real single-node SLURM (tests/support/slurm_cluster.py).

Each job runs a batch script of docs/tutorials/cluster.rst as written there, but for its
``python train.py``, which becomes tests/support/preemptible_training.py: ``train.sbatch``
(``exec``: the training process is the batch step and requeues the job itself) or
``train-trap.sbatch`` (the shell lives through the SIGTERM and requeues on status 75).
SLURM starts the requeued job again, which resumes and finishes bit-identical to a run
never stopped.

* ``sbatch --signal=B:USR1@120``: SLURM sends SIGUSR1 to the batch step before the time
  limit.
* ``scancel``, and the time limit itself, with SLURM's default delivery: SIGTERM to every
  process of the job, the DataManager's worker processes included, then SIGKILL after
  ``KillWait``. The signal finds the main process waiting for a batch that the workers
  are making (they hold until the main process has noted the signal).

Skips, saying why, without SLURM or root.
"""
import os
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
from tests.support.preemptible_training import touch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
JOB_TIMEOUT = 300.
WORKERS = 'data_manager_workers_seeded'
PAUSE = 7
TUTORIAL = os.path.join(REPO, 'docs', 'tutorials', 'cluster.rst')


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    yield from slurm_cluster.for_a_test_module(tmp_path_factory)


_references = {}


def _reference(tmp_path_factory, kind):
    if kind not in _references:
        out = tmp_path_factory.mktemp('uninterrupted')
        status, stderr = _train(out, '--iterator', kind)
        assert status == 0, stderr
        _references[kind] = _results(out)
    return _references[kind]


def documented_script(caption, tutorial=TUTORIAL):
    """The batch script of ``tutorial`` (cluster.rst) shown under ``:caption: <caption>``."""
    with open(tutorial) as f:
        lines = f.read().splitlines()
    start = lines.index('   :caption: {}'.format(caption)) + 2
    end = next((i for i in range(start, len(lines))
                if lines[i] and not lines[i].startswith('   ')), len(lines))
    return '\n'.join(line[3:] for line in lines[start:end]).strip() + '\n'


def _submit(slurm, tmp_path, out, options, *sbatch_options, script='train.sbatch'):
    """Submits the tutorial's ``script``, its ``python train.py`` running the training
    with ``options``; returns the job id."""
    text = documented_script(script)
    assert text.count('python train.py') == 1, text
    # The script requeues the job itself where it does not exec the training.
    requeue = '--requeue' if 'exec python train.py' in text else ''
    path = tmp_path / script
    path.write_text(text.replace('python train.py', '{} -m tests.support.preemptible_training '
                                 '{} {} {}'.format(sys.executable, out, requeue,
                                                   ' '.join(options))))
    # --output replaces the script's (the test reads the log); sbatch_options add.
    submitted = slurm_cluster.command(
        ['sbatch', '--parsable', '--chdir=' + REPO, '--output=' + str(tmp_path / 'job.log')]
        + list(sbatch_options) + [str(path)], slurm)
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.strip().split(';')[0]


def _log(tmp_path):
    path = tmp_path / 'job.log'
    return path.read_text() if path.exists() else ''


def _wait_until_completed(slurm, job, tmp_path):
    """Waits until the job, requeued at least once, has completed; returns its fields."""
    deadline = time.monotonic() + JOB_TIMEOUT
    hurried = set()
    while True:
        fields = slurm_cluster.job_fields(job, slurm)
        state = fields.get('JobState')
        if state == 'COMPLETED':
            break
        assert state in slurm_cluster.ON_ITS_WAY, (fields, _log(tmp_path))
        if state == 'PENDING' and fields.get('Reason') == 'BeginTime' \
                and fields['Restarts'] not in hurried:
            # A requeued job may start again only 2 minutes later: hurry it.
            hurried.add(fields['Restarts'])
            hurry = slurm_cluster.command(['scontrol', 'update', 'JobId=' + job,
                                           'StartTime=now'], slurm)
            assert hurry.returncode == 0, hurry.stderr
        assert time.monotonic() < deadline, (fields, _log(tmp_path))
        time.sleep(0.2)
    assert int(fields['Restarts']) >= 1, _log(tmp_path)
    assert fields['ExitCode'] == '0:0', _log(tmp_path)
    return fields


def _wait(path, tmp_path, timeout=JOB_TIMEOUT):
    try:
        wait_for(str(path), timeout=timeout)
    except TimeoutError:
        raise AssertionError(_log(tmp_path)) from None


def test_a_job_signalled_before_its_time_limit_requeues_itself_and_resumes_exactly(
        slurm, tmp_path, tmp_path_factory):
    out = tmp_path / 'out'
    out.mkdir()
    # Time limit 3 minutes, SIGUSR1 120 s before it. SLURM checks the limits about every
    # 30 s, so the signal comes 30 to 60 s after the start: long after Python has
    # installed its handler, long before the limit.
    job = _submit(slurm, tmp_path, out, ['--hold-until-signalled-at', '3'], '--time=3',
                  '--signal=B:USR1@120')
    _wait(out / 'holding', tmp_path)
    _wait_until_completed(slurm, job, tmp_path)
    assert "PreemptionSnapshot: SIGUSR1 received; the state after iteration 3 is in " \
        "'{}'".format(out / 'snapshot_iter_3') in _log(tmp_path)
    _assert_same_run(_results(out), _reference(tmp_path_factory, 'chainer_serial'))


def _stop_while_waiting_for_workers(slurm, tmp_path, stop, *sbatch_options,
                                    script='train.sbatch'):
    """Runs a job whose main process waits for a batch that its workers are making,
    stopped by ``stop(job)``; returns the job's output folder once it has completed."""
    out = tmp_path / 'out'
    out.mkdir()
    job = _submit(slurm, tmp_path, out, ['--iterator', WORKERS, '--pause-at', str(PAUSE),
                                         '--hold-in-workers', '--release-when-signalled'],
                  *sbatch_options, script=script)
    _wait(out / 'at_{}'.format(PAUSE), tmp_path)
    touch(str(out / 'hold'))
    touch(str(out / 'go_{}'.format(PAUSE)))
    _wait(out / 'hold.waiting', tmp_path)
    stop(job)
    _wait_until_completed(slurm, job, tmp_path)
    log = _log(tmp_path)
    assert 'PreemptionSnapshot: SIGTERM received' in log
    assert 'Traceback' not in log
    return out


@pytest.mark.parametrize('script', ['train.sbatch', 'train-trap.sbatch'])
def test_scancel_of_a_job_whose_workers_are_busy_snapshots_requeues_and_resumes_exactly(
        slurm, tmp_path, tmp_path_factory, script):
    def scancel(job):
        cancelled = slurm_cluster.command(['scancel', job], slurm)
        assert cancelled.returncode == 0, cancelled.stderr

    out = _stop_while_waiting_for_workers(slurm, tmp_path, scancel, script=script)
    _assert_same_run(_results(out), _reference(tmp_path_factory, WORKERS))


def test_the_time_limit_of_a_job_whose_workers_are_busy_snapshots_requeues_and_resumes(
        slurm, tmp_path, tmp_path_factory):
    # One minute, the shortest limit; SLURM acts on it within about 30 s after.
    out = _stop_while_waiting_for_workers(slurm, tmp_path, lambda job: None, '--time=1')
    _assert_same_run(_results(out), _reference(tmp_path_factory, WORKERS))
