"""What a run prints: a line per epoch where stdout is no terminal, a line when it does not
start anew, and no epoch printed twice across a resume.

The batch-job case is a real process (tests/support/preemptible_experiment.py) whose stdout
is a pipe, read while the process is paused after its first epoch: the line is there before
the run goes on, not only at its end.
"""
import io
import os
import signal

import pytest
from chainer.training import extensions as chainer_extensions

from researchutils.chainer.training._experiment import progress
from tests.chainer.training import tasks
from tests.support import preemptible_experiment
from tests.support.preemptible_training import touch, wait_for
from tests.support.processes import no_process_left  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(600)


def _row(entry):
    """An epoch's line as PrintReport formats it, from the run's log (an independent
    formatting of the columns: epoch, main/MSE, val/MSE, elapsed_time)."""
    return '  '.join('{:<10g}'.format(entry[key])
                     for key in ('epoch', 'main/MSE', 'val/MSE', 'elapsed_time')).rstrip()


def _lines(text):
    return [line.rstrip() for line in text.splitlines()]


def _paused(out, *options):
    process = preemptible_experiment.start(out, 'run', '--pause-at', 'exp', '4', *options)
    try:
        wait_for(os.path.join(out, 'paused'), timeout=preemptible_experiment.PROCESS_TIMEOUT)
    except TimeoutError:
        process.kill()
        raise AssertionError(preemptible_experiment.finish(process)[1]) from None
    return process


def _available(process):
    """What the process has written to its stdout pipe so far, without waiting for more."""
    descriptor = process.stdout.fileno()
    os.set_blocking(descriptor, False)
    try:
        return (os.read(descriptor, 1 << 16) or b'').decode()
    except BlockingIOError:
        return ''
    finally:
        os.set_blocking(descriptor, True)


@pytest.mark.slow(reason='a training process, paused after its first epoch')
@pytest.mark.usefixtures('no_process_left')
def test_a_run_into_a_pipe_prints_each_epoch_as_it_ends(tmp_path):
    out = str(tmp_path)
    process = _paused(out)
    try:
        # Paused in epoch 2 (iteration 4): epoch 1's line has arrived, no other.
        early = _lines(_available(process))
    finally:
        touch(os.path.join(out, 'go'))
        rest, stderr = process.communicate(timeout=preemptible_experiment.PROCESS_TIMEOUT)
    assert process.returncode == 0, stderr
    log = tasks.read_log(os.path.join(out, 'exp'))
    header = 'epoch       main/MSE    val/MSE     elapsed_time'
    assert early == [header, _row(log[0])]
    assert _lines(rest) == [_row(entry) for entry in log[1:]]
    assert '\033' not in early[1] + rest


@pytest.mark.slow(reason='a training process stopped by a signal, and run again')
@pytest.mark.usefixtures('no_process_left')
def test_a_resumed_run_says_where_it_continues_and_prints_only_the_new_epochs(tmp_path):
    out = str(tmp_path)
    process = _paused(out)
    process.send_signal(signal.SIGTERM)
    touch(os.path.join(out, 'go'))
    status, stderr = preemptible_experiment.finish(process)
    assert status == 75, stderr
    again = preemptible_experiment.start(out, 'run')
    stdout, stderr = again.communicate(timeout=preemptible_experiment.PROCESS_TIMEOUT)
    assert again.returncode == 0, stderr
    folder = os.path.join(out, 'exp')
    log = tasks.read_log(folder)
    assert _lines(stdout) == [
        '{}: resuming from snapshot_epoch_1 (1 of 3 epochs trained)'.format(folder),
        'epoch       main/MSE    val/MSE     elapsed_time'] + [_row(entry) for entry in log[1:]]


def test_a_finished_run_returned_again_says_so_in_one_line(tmp_path, capsys):
    train, val = tasks.make_managers(n_train=64, n_val=32)
    tasks.experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE').run(
        train, val)
    capsys.readouterr()
    tasks.experiment(tmp_path, tasks.make_params(num_epochs=2), val_score_key='MSE').run(
        train, val)
    assert capsys.readouterr().out == (
        '{}: the run there finished at epoch 2; returning its best_model.npz without '
        'training\n'.format(tmp_path / 'exp'))


def test_the_users_print_report_does_not_print_again_the_epochs_before_a_resume(
        tmp_path, capsys):
    train, val = tasks.make_managers(n_train=64, n_val=32)

    def run(num_epochs):
        printed = io.StringIO()
        report = chainer_extensions.PrintReport(['epoch', 'main/MSE'], out=printed)
        tasks.experiment(tmp_path, tasks.make_params(num_epochs=num_epochs),
                         extensions=[report]).run(train, val)
        # Chainer's PrintReport erases the terminal's rest before each row: '\033[J'.
        rows = printed.getvalue().replace('\033[J', '').splitlines()[1:]
        return [line.split()[0] for line in rows]

    assert run(1) == ['1']
    os.remove(os.path.join(str(tmp_path / 'exp'), 'run_state.json'))  # train on (tutorial)
    capsys.readouterr()
    assert run(3) == ['2', '3']
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == '{}: resuming from snapshot_epoch_1 (1 of 3 epochs trained)'.format(
        tmp_path / 'exp')
    assert [line.split()[0] for line in printed[2:]] == ['2', '3']


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_the_progress_bar_and_anything_else_the_epoch_lines(monkeypatch):
    monkeypatch.setattr('sys.stdout', _Terminal())
    assert isinstance(progress.progress_extension(['epoch']), chainer_extensions.ProgressBar)
    piped = io.StringIO()
    monkeypatch.setattr('sys.stdout', piped)
    lines = progress.progress_extension(['epoch'])
    assert isinstance(lines, progress.EpochLines)
    assert lines._out is piped
