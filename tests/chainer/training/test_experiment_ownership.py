"""One run owns an experiment folder: real processes of ChainerExperiment on one folder.

Each test starts ``python -m tests.support.preemptible_experiment`` twice on the same folder
(``run``, ``kfold`` or ``grid_search``), the first paused at a handshake while it holds the
folder, and checks each outcome: the second is refused naming the owner, or waits for it,
or takes over from a killed one; what any of them returns is what an uninterrupted run
returns, bit for bit, and ``epochs_trained`` shows no epoch trained twice.
"""
import json
import os
import signal
import socket

import pytest

from tests.support.preemptible_experiment import PROCESS_TIMEOUT
from tests.support.preemptible_experiment import epochs_trained as _epochs_trained
from tests.support.preemptible_experiment import finish as _finish
from tests.support.preemptible_experiment import start as _start
from tests.support.preemptible_training import touch, wait_for
from tests.support.processes import no_process_left  # noqa: F401 (fixture)

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures('no_process_left')]


def _result(out, name='result.json'):
    with open(os.path.join(str(out), name)) as f:
        return json.load(f)


_references = {}


def _reference(mode, tmp_path_factory):
    if mode not in _references:
        out = tmp_path_factory.mktemp('alone_' + mode)
        status, stderr = _finish(_start(out, mode))
        assert status == 0, stderr
        _references[mode] = (_result(out), _epochs_trained(out))
    return _references[mode]


def _paused_owner(out, mode, run_name):
    """Starts ``mode`` in ``out``, paused in its run ``run_name`` after iteration 4 (one
    epoch and a snapshot written): it holds the folder."""
    process = _start(out, mode, '--pause-at', run_name, '4')
    try:
        wait_for(os.path.join(str(out), 'paused'), timeout=PROCESS_TIMEOUT)
    except TimeoutError:
        process.kill()
        raise AssertionError(_finish(process)[1]) from None
    return process


def _go(out):
    touch(os.path.join(str(out), 'go'))


@pytest.mark.slow(reason='three training processes, one paused while another starts')
@pytest.mark.parametrize('mode, run_name', [('run', 'exp'), ('kfold', 'fold_0'),
                                            ('grid_search', 'grid_0')])
def test_a_second_run_on_a_held_folder_is_refused_at_once_naming_the_owner(
        tmp_path, tmp_path_factory, mode, run_name):
    reference, epochs = _reference(mode, tmp_path_factory)
    owner = _paused_owner(tmp_path, mode, run_name)
    status, stderr = _finish(_start(tmp_path, mode, '--result', 'second.json'))
    assert status != 0
    assert 'FolderInUseError' in stderr and 'held by another run' in stderr
    assert os.path.join(str(tmp_path), 'exp') in stderr
    assert 'pid {} on host {}'.format(owner.pid, socket.gethostname()) in stderr
    assert not os.path.exists(os.path.join(str(tmp_path), 'second.json'))
    _go(tmp_path)
    status, stderr = _finish(owner)
    assert status == 0, stderr
    assert _result(tmp_path) == reference
    assert _epochs_trained(tmp_path) == epochs


@pytest.mark.slow(reason='two training processes, one waiting for the other')
def test_a_run_asked_to_wait_waits_for_the_owner_and_returns_what_it_trained(
        tmp_path, tmp_path_factory):
    reference, epochs = _reference('run', tmp_path_factory)
    owner = _paused_owner(tmp_path, 'run', 'exp')
    waiting = _start(tmp_path, 'run', '--wait-for-folder', '120', '--result', 'second.json')
    # It says that it waits (a warning on stderr), then waits; the owner goes on meanwhile.
    line = waiting.stderr.readline()
    while 'held by another run' not in line:
        assert line, 'the waiting run ended without saying it waits'
        line = waiting.stderr.readline()
    assert 'waiting up to 120 s' in line
    _go(tmp_path)
    assert _finish(owner)[0] == 0
    status, stderr = _finish(waiting)
    assert status == 0, stderr
    assert _result(tmp_path) == reference
    assert _result(tmp_path, 'second.json') == reference
    assert _epochs_trained(tmp_path) == epochs


@pytest.mark.slow(reason='a training process killed, then another run to the end')
def test_a_killed_owners_claim_is_taken_over_and_the_run_resumes_exactly(
        tmp_path, tmp_path_factory):
    reference, epochs = _reference('run', tmp_path_factory)
    owner = _paused_owner(tmp_path, 'run', 'exp')
    owner.send_signal(signal.SIGKILL)
    owner.communicate(timeout=PROCESS_TIMEOUT)
    assert os.path.exists(os.path.join(str(tmp_path), 'exp', 'run_owner.json'))
    status, stderr = _finish(_start(tmp_path, 'run'))
    assert status == 0, stderr
    assert _result(tmp_path) == reference
    # The killed run finished epoch 1; the takeover trained epochs 2 and 3 once each.
    assert _epochs_trained(tmp_path) == epochs
    assert not os.path.exists(os.path.join(str(tmp_path), 'exp', 'run_owner.json'))


@pytest.mark.slow(reason='two training processes started at once')
def test_two_runs_started_together_never_mix(tmp_path, tmp_path_factory):
    reference, epochs = _reference('run', tmp_path_factory)
    first = _start(tmp_path, 'run', '--result', 'first.json')
    second = _start(tmp_path, 'run', '--result', 'second.json')
    outcomes = [_finish(first), _finish(second)]
    finished = [name for name, (status, _) in zip(['first.json', 'second.json'], outcomes)
                if status == 0]
    assert finished, outcomes
    for name in finished:
        assert _result(tmp_path, name) == reference
    for status, stderr in outcomes:
        assert status == 0 or 'FolderInUseError' in stderr, stderr
    assert _epochs_trained(tmp_path) == epochs
