"""A search run as a SLURM array job against a PostgreSQL study, one task preempted.

The job script is the one of docs/tutorials/search.rst (``search.sbatch``), as written
there but for its ``python search.py``, which becomes a search worker
(tests/support/search_worker.py) in a working folder of each task's own, and its array
(two tasks: the test's single node has two cores; task 1 starts searching once task 0
has paused in its first trial). The single-node SLURM is the one
tests/support/slurm_cluster.py starts; the study lives on the session's PostgreSQL server.
Task 0 pauses mid-trial at a moment it reports; ``scancel`` of that task then sends
SIGTERM to its every process, as a cluster's preemption does: the worker writes its
preemption snapshot, fails its trial and enqueues the retry, exits with status 75, and
the script requeues the task. The search ends with ``n_trials`` trials complete, the
interrupted one retried once, resumed from that snapshot and bit-identical to the same
trial never stopped.

Skips, saying why, without SLURM, root or the search-db extra.
"""
import json
import os
import sys
import time

import pytest

from researchutils.chainer.training import load_json
from researchutils.chainer.training._experiment.search import folders
from tests.chainer.training import search_tasks
from tests.chainer.training.extensions.test_preemption_snapshot_slurm import (
    _wait_until_completed,
    documented_script,
)
from tests.support import search_nodes, search_studies, search_worker, slurm_cluster
from tests.support.processes import REPO

optuna = pytest.importorskip('optuna')
pytest.importorskip('psycopg', reason='needs the search-db extra (psycopg)')

TUTORIAL = os.path.join(REPO, 'docs', 'tutorials', 'search.rst')
N_TRIALS = 4
PAUSE = 6  # mid-epoch 2 of the task's first trial: epoch 1's snapshot holds iteration 4
STATES = optuna.trial.TrialState
pytestmark = [pytest.mark.slow(reason='a SLURM array job of two search workers, one '
                                      'preempted and requeued: 30-90 s on two busy cores'),
              pytest.mark.timeout(900)]


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    yield from slurm_cluster.for_a_test_module(tmp_path_factory)


def submit(slurm, tmp_path, url, shared):
    """Submits the tutorial's array job, two tasks, each worker in ``tmp_path/task_<k>``;
    returns the array's job id."""
    text = documented_script('search.sbatch', TUTORIAL)
    assert text.count('python search.py') == 1 and '#SBATCH --array=' in text, text
    # Task 1 begins its search only once task 0 has paused in its first trial: else, on
    # a busy machine where task 0's interpreter starts late, task 1 takes every trial.
    gate = '$([ "$SLURM_ARRAY_TASK_ID" = 1 ] && echo --go {}/task_0/paused)'.format(tmp_path)
    worker = 'cd {}/task_"$SLURM_ARRAY_TASK_ID" && {} -m tests.support.search_worker {} {} {} ' \
        '--no-plots {}'.format(tmp_path, sys.executable, shared, url, N_TRIALS, gate)
    path = tmp_path / 'search.sbatch'
    path.write_text(text.replace('python search.py', worker))
    submitted = slurm_cluster.command(
        ['sbatch', '--parsable', '--array=0-1', '--chdir=' + str(tmp_path),
         '--output=' + str(tmp_path / 'job.log'), str(path)], slurm)
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.strip().split(';')[0]


def log(tmp_path):
    path = tmp_path / 'job.log'
    return path.read_text()[-3000:] if path.exists() else ''


def state(slurm, task, tmp_path):
    """The task's JobState; fails when it ended otherwise than COMPLETED, or was requeued
    (nothing requeues a task while the test polls this)."""
    fields = slurm_cluster.job_fields(task, slurm)
    expected = [name for name in slurm_cluster.ON_ITS_WAY if name != 'REQUEUED']
    assert fields.get('JobState') in expected + ['COMPLETED'], (fields, log(tmp_path))
    return fields


def reported(tmp_path, slurm, task, name):
    """The text of the file ``name`` that the worker of task 0 writes (``paused``,
    ``signalled``), once it is there; fails when the task ended first."""
    path = tmp_path / 'task_0' / name
    deadline = time.monotonic() + search_nodes.EVENT_TIMEOUT
    while not path.exists():
        assert state(slurm, task, tmp_path)['JobState'] != 'COMPLETED', log(tmp_path)
        assert time.monotonic() < deadline, ('no ' + name, log(tmp_path))
        time.sleep(0.2)
    return path.read_text()


def paused(tmp_path, slurm, task):
    """What the worker of task 0 reports once paused (pid, trial folder, iteration)."""
    return json.loads(reported(tmp_path, slurm, task, 'paused'))


def wait_until_completed(slurm, task, tmp_path):
    """Waits until ``task`` (never requeued) completed with status 0."""
    deadline = time.monotonic() + search_nodes.WORKER_TIMEOUT
    while state(slurm, task, tmp_path)['JobState'] != 'COMPLETED':
        assert time.monotonic() < deadline, log(tmp_path)
        time.sleep(0.2)
    assert slurm_cluster.job_fields(task, slurm)['ExitCode'] == '0:0', log(tmp_path)


def reports(tmp_path):
    """The last report of each worker in the job's log (one line of JSON per run ended)."""
    lines = (tmp_path / 'job.log').read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith('{"pid"')]


def test_an_array_job_of_the_tutorial_finishes_the_search_when_a_task_is_preempted(
        slurm, tmp_path, tmp_path_factory, postgres_server, postgres_database):
    references = {rate: search_nodes.uninterrupted(tmp_path_factory, rate)
                  for rate in search_worker.LEARNING_RATES}
    shared = tmp_path / 'shared'
    os.makedirs(shared)
    for task in (0, 1):
        os.makedirs(tmp_path / 'task_{}'.format(task))
    # Task 0 pauses at the end of its 6th iteration, and reports it.
    search_nodes.pause_after(tmp_path / 'task_0', PAUSE)
    url = postgres_server.url(postgres_database)
    job = submit(slurm, tmp_path, url, shared)
    point = paused(tmp_path, slurm, job + '_0')
    with open(os.path.join(point['folder'], folders.OWNER_FILE)) as stream:
        stopped = json.load(stream)['holder']
    cancelled = slurm_cluster.command(['scancel', job + '_0'], slurm)
    assert cancelled.returncode == 0, cancelled.stderr
    # scancel returns before slurmd sends the signal: the worker goes on only once it has
    # noted SIGTERM, else a signal that came late would stop it an iteration later.
    assert reported(tmp_path, slurm, job + '_0', 'signalled') == 'SIGTERM'
    search_nodes.release(tmp_path / 'task_0')  # the iteration ends, then the snapshot
    fields = _wait_until_completed(slurm, job + '_0', tmp_path)
    assert int(fields['Restarts']) >= 1
    log = (tmp_path / 'job.log').read_text()
    assert 'PreemptionSnapshot: SIGTERM received' in log, log[-3000:]
    wait_until_completed(slurm, job + '_1', tmp_path)

    study = search_studies.load(url)
    trials = {t.number: t for t in study.trials}
    complete = [t for t in study.trials if t.state == STATES.COMPLETE]
    assert len(complete) == N_TRIALS
    assert trials[stopped].state == STATES.FAIL
    retry, = [t for t in study.trials if t.system_attrs.get('retry_history') == [stopped]
              and not t.user_attrs.get('surplus')]
    assert retry.state == STATES.COMPLETE and retry.params == trials[stopped].params
    # The retry resumed from the preemption snapshot, in the stopped trial's folder.
    assert retry.user_attrs['resumed_at'] == {'iteration': PAUSE, 'epoch': 1}
    exp = shared / 'exp'
    assert folders.folder_of(str(exp), 'exp', retry) == point['folder']
    for trial in complete:  # every trial, the retry included, as one never stopped
        reference = references[trial.params[search_tasks.LR_KEY]]
        folder = folders.folder_of(str(exp), 'exp', trial)
        assert trial.value == reference['value'], trial.number
        assert search_nodes.arrays(os.path.join(folder, 'best_model.npz')) == \
            reference['best_model'], trial.number
    # search.json counts the retried trial once, as its retry.
    saved = load_json(exp / 'search.json')
    assert sorted(entry['number'] for entry in saved['trials']) == sorted(
        t.number for t in complete)
    entry, = [entry for entry in saved['trials'] if entry['number'] == retry.number]
    assert entry['retry_of'] == [stopped] and entry['resumed_at'] == PAUSE
    assert len(reports(tmp_path)) >= 2
