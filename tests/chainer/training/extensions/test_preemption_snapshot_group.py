"""PreemptionSnapshot when the signal reaches every process of the job, as clusters send it.

``scancel``, a SLURM time limit, Kubernetes and ``pkill -f train.py`` send SIGTERM to every
process of the job: the training process and the worker processes of its DataManager or
DecorableMultiprocessIterator. Each test starts a training subprocess
(tests/support/preemptible_training.py) as the leader of a process group of its own, waits
for a moment that the child reports (never for a time), and signals the whole group
(``os.killpg``), or the main process and the workers one by one in either order, or the
main process alone. The run must end with the preemption snapshot and exit status 75, and
the same command run again must end bit-identical to a run never stopped.
"""
import os
import signal

import pytest

from tests.chainer.training.extensions.test_preemption_snapshot import (
    _assert_same_run,
    _finish,
    _results,
    _train,
)
from tests.support import preemptible_training as run
from tests.support.processes import (  # noqa: F401 (fixture)
    command_line,
    descendants,
    no_process_left,
    start_module,
    wait_until_gone,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.usefixtures('no_process_left')]
WORKER_KINDS = ('data_manager_workers_seeded', 'multiprocess_seeded')
DELIVERIES = ('group', 'main_first', 'workers_first', 'main_only')
# Mid-epoch 1 (epochs end after iterations 5 and 9).
PAUSE = 7
# Seconds the workers of a main process killed by SIGTERM may take to follow it: they
# look every second; the rest is room for a busy machine.
FOLLOW_TIMEOUT = 60.

_references = {}


def _reference(tmp_path_factory, kind, *options):
    key = (kind,) + options
    if key not in _references:
        out = tmp_path_factory.mktemp('uninterrupted')
        status, stderr = _train(out, '--iterator', kind, *options)
        assert status == 0, stderr
        _references[key] = _results(out)
    return _references[key]


def _start(out, kind, *options):
    return start_module('tests.support.preemptible_training', out, '--iterator', kind,
                        *options, new_session=True)


def _wait(process, path):
    """Waits for the child to write ``path``; fails with its stderr if it never does."""
    try:
        run.wait_for(str(path))
    except TimeoutError:
        process.kill()
        raise AssertionError(_finish(process)[1]) from None


def _deliver(process, how, signal_number=signal.SIGTERM):
    """Sends ``signal_number`` to the job as ``how`` says; returns the workers' pids."""
    workers = descendants(process.pid)
    assert workers, 'the main process has no worker processes'
    if how == 'group':
        os.killpg(process.pid, signal_number)
        return workers
    if how in ('main_first', 'main_only'):
        os.kill(process.pid, signal_number)
    if how != 'main_only':
        for pid in workers:
            os.kill(pid, signal_number)
    if how == 'workers_first':
        os.kill(process.pid, signal_number)
    return workers


def _assert_preempted(process, out, workers):
    status, stderr = _finish(process)
    assert status == 75, stderr
    assert 'PreemptionSnapshot: SIGTERM received' in stderr
    assert 'Traceback' not in stderr
    assert [name for name in os.listdir(str(out)) if name.startswith('snapshot_iter_')]
    assert not os.path.exists(str(out / 'final.npz'))
    wait_until_gone(workers, FOLLOW_TIMEOUT)


def _resume_and_compare(out, kind, reference, *options):
    status, stderr = _train(out, '--iterator', kind, *options)
    assert status == 0, stderr
    _assert_same_run(_results(out), reference)


@pytest.mark.parametrize('kind, how', [(kind, how) for kind in WORKER_KINDS
                                       for how in DELIVERIES
                                       if kind != 'multiprocess_seeded'
                                       or how in ('group', 'workers_first')])
def test_sigterm_while_the_main_process_waits_for_a_batch_snapshots_and_resumes_exactly(
        tmp_path, tmp_path_factory, kind, how):
    process = _start(tmp_path, kind, '--pause-at', PAUSE, '--hold-in-workers')
    _wait(process, tmp_path / 'at_{}'.format(PAUSE))
    run.touch(str(tmp_path / 'hold'))
    run.touch(str(tmp_path / 'go_{}'.format(PAUSE)))
    # Every worker holds a task, and the main process waits for the batch.
    _wait(process, tmp_path / 'hold.waiting')
    workers = _deliver(process, how)
    run.touch(str(tmp_path / 'hold.release'))
    _assert_preempted(process, tmp_path, workers)
    _resume_and_compare(tmp_path, kind, _reference(tmp_path_factory, kind))


def test_sigterm_while_workers_make_batches_between_iterations(tmp_path, tmp_path_factory):
    kind = WORKER_KINDS[0]
    process = _start(tmp_path, kind, '--pause-at', PAUSE, '--pause-at', PAUSE + 1,
                     '--hold-in-workers')
    _wait(process, tmp_path / 'at_{}'.format(PAUSE))
    run.touch(str(tmp_path / 'hold'))
    run.touch(str(tmp_path / 'go_{}'.format(PAUSE)))
    # The main process is in an extension; a worker is making the batch of a later one.
    _wait(process, tmp_path / 'at_{}'.format(PAUSE + 1))
    run.wait_for_any(str(tmp_path / 'hold.making_*'))
    workers = _deliver(process, 'group')
    run.touch(str(tmp_path / 'go_{}'.format(PAUSE + 1)))
    run.touch(str(tmp_path / 'hold.release'))
    _assert_preempted(process, tmp_path, workers)
    _resume_and_compare(tmp_path, kind, _reference(tmp_path_factory, kind))


@pytest.mark.parametrize('kind', WORKER_KINDS)
def test_sigterm_while_the_pool_starts_snapshots_and_resumes_exactly(
        tmp_path, tmp_path_factory, kind):
    # Under spawn a worker takes a while to start (a new interpreter): the signal finds it
    # before it has run a line of the pool's code.
    process = _start(tmp_path, kind, '--start-method', 'spawn')
    while True:
        assert process.poll() is None, _finish(process)[1]
        starting = [pid for pid in descendants(process.pid)
                    if 'spawn_main' in command_line(pid)]
        if starting:
            break
    workers = _deliver(process, 'group')
    _assert_preempted(process, tmp_path, workers)
    _resume_and_compare(tmp_path, kind, _reference(tmp_path_factory, kind))


def test_sigterm_while_validation_waits_for_its_workers(tmp_path, tmp_path_factory):
    kind = WORKER_KINDS[0]
    run.touch(str(tmp_path / 'hold_validation'))
    process = _start(tmp_path, kind, '--validation-workers', '--hold-in-workers')
    _wait(process, tmp_path / 'hold_validation.waiting')
    workers = _deliver(process, 'group')
    run.touch(str(tmp_path / 'hold_validation.release'))
    _assert_preempted(process, tmp_path, workers)
    assert 'snapshot_iter_{}'.format(run.EPOCH_ENDS[0]) in os.listdir(str(tmp_path))
    _resume_and_compare(tmp_path, kind,
                        _reference(tmp_path_factory, kind, '--validation-workers'),
                        '--validation-workers')


def test_without_preemption_snapshot_sigterm_ends_the_main_process_and_its_workers(tmp_path):
    kind = WORKER_KINDS[0]
    process = _start(tmp_path, kind, '--no-preemption', '--pause-at', PAUSE,
                     '--hold-in-workers')
    _wait(process, tmp_path / 'at_{}'.format(PAUSE))
    run.touch(str(tmp_path / 'hold'))
    run.touch(str(tmp_path / 'go_{}'.format(PAUSE)))
    _wait(process, tmp_path / 'hold.waiting')
    workers = _deliver(process, 'group')
    status, stderr = _finish(process)
    assert status == -signal.SIGTERM, stderr
    # The workers, busy in a task that would never end, follow the main process.
    wait_until_gone(workers, FOLLOW_TIMEOUT)
