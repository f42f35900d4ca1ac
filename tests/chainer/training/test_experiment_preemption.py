"""ChainerExperiment stopped by a real signal, then the same command run again.

Each test starts ``python -m tests.support.preemptible_experiment`` (run, kfold or
grid_search), signals it at a handshake, expects exit status 75, starts the same command
again and compares what it returns and writes, bit for bit, with an uninterrupted run of
the same seed; ``epochs_trained`` shows that no finished epoch, fold or combination is
trained again.
"""
import json
import os
import signal

import numpy
import pytest

from tests.support.preemptible_experiment import PROCESS_TIMEOUT
from tests.support.preemptible_experiment import epochs_trained as _epochs_trained
from tests.support.preemptible_experiment import finish as _finish
from tests.support.preemptible_experiment import start as _start
from tests.support.preemptible_training import touch, wait_for
from tests.support.processes import no_process_left, start_module  # noqa: F401 (fixture)

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures('no_process_left')]


def _outcome(out):
    """What the command returned and wrote: its result, log, best model and epochs trained."""
    folder = os.path.join(str(out), 'exp')
    with open(os.path.join(str(out), 'result.json')) as f:
        result = json.load(f)
    logs, best = {}, {}
    for parent, _, names in os.walk(folder):
        run = os.path.relpath(parent, folder)
        if 'log' in names:
            with open(os.path.join(parent, 'log')) as f:
                logs[run] = [{key: value for key, value in row.items()
                              if key != 'elapsed_time'} for row in json.load(f)]
        if 'best_model.npz' in names:
            with numpy.load(os.path.join(parent, 'best_model.npz')) as arrays:
                best[run] = {key: arrays[key].tobytes() for key in arrays.files}
    return result, logs, best, _epochs_trained(out)


_references = {}


def _reference(mode, tmp_path_factory):
    if mode not in _references:
        out = tmp_path_factory.mktemp('uninterrupted_' + mode)
        status, stderr = _finish(_start(out, mode))
        assert status == 0, stderr
        _references[mode] = _outcome(out)
    return _references[mode]


def _stop_and_rerun(out, mode, signal_number, *pause):
    """Runs ``mode`` until the handshake, signals it, and runs the same command again.

    Returns the epochs trained before the signal and the outcome after the second run.
    """
    process = _start(out, mode, *pause)
    try:
        wait_for(os.path.join(str(out), 'paused'), timeout=PROCESS_TIMEOUT)
    except TimeoutError:
        process.kill()
        raise AssertionError(_finish(process)[1]) from None
    with open(os.path.join(str(out), 'paused')) as f:
        assert int(f.read()) == process.pid
    process.send_signal(signal_number)
    touch(os.path.join(str(out), 'go'))
    status, stderr = _finish(process)
    assert status == 75, stderr
    assert 'PreemptionSnapshot: {} received'.format(signal_number.name) in stderr
    assert not os.path.exists(os.path.join(str(out), 'result.json'))
    before = _epochs_trained(out)
    status, stderr = _finish(_start(out, mode))
    assert status == 0, stderr
    return before, _outcome(out)


def _assert_same_outcome(actual, expected):
    result, logs, best, epochs = actual
    expected_result, expected_logs, expected_best, expected_epochs = expected
    assert result == expected_result
    assert logs == expected_logs
    assert best == expected_best
    # Every epoch trained once, in the order of the uninterrupted run.
    assert epochs == expected_epochs


# 40 examples in batches of 16, 16 and 8: epochs end after iterations 3, 6 and 9.
@pytest.mark.slow(reason='trains in two subprocesses (stopped, rerun), and once more for the '
                  'uninterrupted reference on each pytest worker')
@pytest.mark.parametrize('pause, signal_number, epochs_before', [
    (['--pause-at', 'exp', '4'], signal.SIGTERM, ['exp 1']),  # mid-epoch
    (['--pause-at', 'exp', '6'], signal.SIGUSR1, ['exp 1', 'exp 2']),  # at an epoch end
    (['--pause-in-validation', 'exp'], signal.SIGTERM, ['exp 1']),  # during validation
], ids=['mid_epoch', 'epoch_end', 'validation'])
def test_a_signalled_run_resumes_bit_identical_when_run_again(
        tmp_path, tmp_path_factory, pause, signal_number, epochs_before):
    before, outcome = _stop_and_rerun(tmp_path, 'run', signal_number, *pause)
    assert before == epochs_before
    _assert_same_outcome(outcome, _reference('run', tmp_path_factory))


@pytest.mark.slow(reason='three folds of three epochs, trained in three subprocesses '
                  '(stopped, rerun, uninterrupted reference)')
def test_kfold_resumes_in_the_interrupted_fold_and_redoes_no_finished_fold(
        tmp_path, tmp_path_factory):
    before, outcome = _stop_and_rerun(tmp_path, 'kfold', signal.SIGTERM,
                                      '--pause-at', 'fold_1', '1')
    assert before == ['fold_0 1', 'fold_0 2', 'fold_0 3']
    after = outcome[3][len(before):]
    # fold_1 stopped mid-epoch 1: it trains its 3 epochs, once; fold_0 is not trained again.
    assert after == ['fold_1 1', 'fold_1 2', 'fold_1 3', 'fold_2 1', 'fold_2 2', 'fold_2 3']
    _assert_same_outcome(outcome, _reference('kfold', tmp_path_factory))


@pytest.mark.slow(reason='three combinations of three epochs, trained in three subprocesses '
                  '(stopped, rerun, uninterrupted reference)')
def test_grid_search_resumes_in_the_interrupted_combination(tmp_path, tmp_path_factory):
    before, outcome = _stop_and_rerun(tmp_path, 'grid_search', signal.SIGUSR1,
                                      '--pause-at', 'grid_1', '7')
    assert before == ['grid_0 1', 'grid_0 2', 'grid_0 3', 'grid_1 1', 'grid_1 2']
    assert outcome[3][len(before):] == ['grid_1 3', 'grid_2 1', 'grid_2 2', 'grid_2 3']
    _assert_same_outcome(outcome, _reference('grid_search', tmp_path_factory))


def test_without_preemption_snapshot_a_signal_ends_the_run_without_a_snapshot(tmp_path):
    process = _start(tmp_path, 'run', '--no-preemption', '--pause-at', 'exp', '4')
    wait_for(os.path.join(str(tmp_path), 'paused'), timeout=PROCESS_TIMEOUT)
    process.send_signal(signal.SIGTERM)
    touch(os.path.join(str(tmp_path), 'go'))
    status, stderr = _finish(process)
    assert status == -signal.SIGTERM, stderr
    # Only the epoch-end snapshot of epoch 1: the run resumes from the end of epoch 1.
    assert sorted(name for name in os.listdir(str(tmp_path / 'exp'))
                  if name.startswith('snapshot')) == ['snapshot_epoch_1']


_worker_references = {}


def _worker_reference(tmp_path_factory):
    if 'run' not in _worker_references:
        out = tmp_path_factory.mktemp('uninterrupted_workers')
        status, stderr = _finish(_start(out, 'run', '--workers'))
        assert status == 0, stderr
        _worker_references['run'] = _outcome(out)
    return _worker_references['run']


def _wait_for_the_child(process, path):
    try:
        wait_for(str(path), timeout=PROCESS_TIMEOUT)
    except TimeoutError:
        process.kill()
        raise AssertionError(_finish(process)[1]) from None


@pytest.mark.slow
@pytest.mark.parametrize('hold', ['hold', 'hold_validation'],
                         ids=['waiting_for_a_training_batch', 'during_validation'])
def test_sigterm_to_the_whole_job_while_its_workers_make_batches_resumes_bit_identical(
        tmp_path, tmp_path_factory, hold):
    # As scancel, a time limit or pkill send it: to the main process and its DataManager
    # workers at once, while the main process waits for a batch the workers are making.
    if hold == 'hold_validation':
        touch(str(tmp_path / hold))  # the first validation waits for its workers
        process = start_module('tests.support.preemptible_experiment', tmp_path, 'run',
                               '--workers', new_session=True)
    else:
        process = start_module('tests.support.preemptible_experiment', tmp_path, 'run',
                               '--workers', '--pause-at', 'exp', '4', new_session=True)
        _wait_for_the_child(process, tmp_path / 'paused')
        touch(str(tmp_path / hold))
        touch(str(tmp_path / 'go'))
    _wait_for_the_child(process, tmp_path / (hold + '.waiting'))
    os.killpg(process.pid, signal.SIGTERM)
    touch(str(tmp_path / (hold + '.release')))
    status, stderr = _finish(process)
    assert status == 75, stderr
    assert 'PreemptionSnapshot: SIGTERM received' in stderr
    assert 'Traceback' not in stderr
    status, stderr = _finish(_start(tmp_path, 'run', '--workers'))
    assert status == 0, stderr
    _assert_same_outcome(_outcome(tmp_path), _worker_reference(tmp_path_factory))
