"""The main demo (examples/video_prediction/train.py) at a tiny size: outputs, learning,
reproducibility and resume."""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

import numpy
import pytest

from tests.support.slack_server import TOKEN, SlackServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'examples', 'video_prediction', 'train.py')
TINY = ['--train-clips', '640', '--val-clips', '32', '--hidden', '128', '--workers', '2']
# --actions trains two heavier models: on half the clips (10 iterations an epoch), both
# still beat the baseline clearly (about 5.5 against 6.0), for half the time.
ACTIONS_RUN = ['--actions', '--epochs', '3', '--train-clips', '320']

# Every test runs the demo: whole tiny trainings (about 20 iterations an epoch, two worker
# processes) in interpreters of their own. The deadlines wait for a run that is alive and
# working on a busy machine (two pytest workers, and more, on two cores): a run that
# takes ten minutes is stuck.
RUN_TIMEOUT = 600
pytestmark = [pytest.mark.slow(reason='trains the demo in subprocesses, seconds an epoch'),
              pytest.mark.timeout(3 * RUN_TIMEOUT)]


def _run(out, *args, check=True, env=None, umask=-1):
    result = subprocess.run([sys.executable, SCRIPT, '--out', str(out)] + TINY + list(args),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT,
                            env=dict(os.environ, **(env or {})), umask=umask)
    if check:
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def _errors(stdout):
    match = re.search(r'model ([0-9.]+), repeat-last-frame baseline ([0-9.]+)', stdout)
    assert match, stdout
    return float(match.group(1)), float(match.group(2))


def _log_epochs(run_dir):
    with open(os.path.join(run_dir, 'log')) as f:
        return [row['epoch'] for row in json.load(f)]


def test_tiny_run_writes_its_outputs_and_beats_the_baseline(tmp_path):
    # A umask of the user's own: every file the run writes has the mode it gives (no 0600
    # file of a mkstemp beside 0644 ones).
    result = _run(tmp_path, '--epochs', '6', umask=0o027)
    model_error, baseline = _errors(result.stdout)
    assert model_error < baseline
    assert 'beats the baseline' in result.stdout
    run_dir = tmp_path / 'video_prediction'
    for name in ('video_predictor.npz', 'frames.png', 'loss.png', 'final_loss.png', 'log',
                 'experiment.json'):
        assert (run_dir / name).stat().st_size > 0, name
    _check_onnx(run_dir / 'video_predictor.onnx', result.stdout)
    assert (run_dir / 'frames.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    modes = {name: oct(stat.S_IMODE((run_dir / name).stat().st_mode))
             for name in ('frames.png', 'final_loss.png', 'loss.png', 'video_predictor.npz')}
    assert modes == dict.fromkeys(modes, oct(0o640))
    assert any(name.startswith('snapshot_epoch_') for name in os.listdir(str(run_dir)))
    with open(str(run_dir / 'log')) as f:
        log = json.load(f)
    assert [row['epoch'] for row in log] == [1, 2, 3, 4, 5, 6]
    # The horizon grows over the run: 1, then 3, then 5 steps.
    assert [row['k_step'] for row in log] == [1, 1, 3, 3, 5, 5]
    assert 'Slack: set SLACK_BOT_TOKEN' in result.stdout
    # TensorBoard events by default: one point per epoch of the log, read by TensorBoard.
    assert 'tensorboard --logdir' in result.stdout
    accumulator = pytest.importorskip(
        'tensorboard.backend.event_processing.event_accumulator').EventAccumulator(
            str(run_dir / 'tensorboard'))
    accumulator.Reload()
    assert [(event.step, pytest.approx(event.value, rel=1e-6))
            for event in accumulator.Scalars('val/k_step_error')] == [
        (row['epoch'], row['val/k_step_error']) for row in log]


def _check_onnx(path, stdout):
    """The demo wrote its predictor as ONNX, said where, and the file runs (the numbers are
    checked against Chainer by tests/chainer/onnx/test_export.py)."""
    onnx = pytest.importorskip('onnx', reason='the onnx extra')
    onnxruntime = pytest.importorskip('onnxruntime', reason='the onnx extra')
    assert 'ONNX: wrote {}'.format(path) in stdout
    onnx.checker.check_model(onnx.load(str(path)))
    session = onnxruntime.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    feed = {value.name: numpy.zeros(value.shape, numpy.float32)
            for value in session.get_inputs()}
    prediction, = session.run(['pred'], feed)
    assert prediction.shape == (1, 5, 16 * 16)


def _action_errors(stdout):
    match = re.search(r'with actions ([0-9.]+), without actions ([0-9.]+), '
                      r'repeat-last-frame baseline ([0-9.]+)', stdout)
    assert match, stdout
    return tuple(float(group) for group in match.groups())


@pytest.fixture(scope='module')
def tiny_actions_run(tmp_path_factory):
    """One tiny --actions run, shared by the tests that read it: (its folder, its result)."""
    out = tmp_path_factory.mktemp('actions')
    # At this size the two models are too close to call; the exit status says which won.
    return out, _run(out, *ACTIONS_RUN, check=False)


def test_tiny_actions_run_trains_both_models_writes_their_outputs_and_learns(
        tiny_actions_run):
    out, result = tiny_actions_run
    with_actions, without_actions, baseline = _action_errors(result.stdout)
    assert with_actions < baseline and without_actions < baseline
    for name in ('video_prediction_with_actions', 'video_prediction_without_actions'):
        run_dir = out / name
        for output in ('video_predictor.npz', 'frames.png', 'loss.png', 'log',
                       'experiment.json'):
            assert (run_dir / output).stat().st_size > 0, (name, output)
        _check_onnx(run_dir / 'video_predictor.onnx', result.stdout)
        with open(str(run_dir / 'log')) as f:
            assert [row['k_step'] for row in json.load(f)] == [1, 3, 5]
    # The action-free demo's folder is not touched.
    assert not (out / 'video_prediction').exists()


def test_resume_of_a_finished_actions_run_names_both_runs(tiny_actions_run):
    out, _ = tiny_actions_run
    result = _run(out, *ACTIONS_RUN, '--resume', check=False)
    assert result.returncode != 0
    for name in ('video_prediction_with_actions', 'video_prediction_without_actions'):
        assert '{} already finished (epoch 3)'.format(out / name) in result.stderr


@pytest.fixture(scope='module')
def two_epoch_run(tmp_path_factory):
    """One finished two-epoch run with seed 0, shared by the tests that compare with it or
    start from a copy of it: (its --out folder, its result)."""
    out = tmp_path_factory.mktemp('two_epochs')
    return out, _run(out, '--epochs', '2', '--seed', '0')


def test_the_same_seed_gives_the_same_numbers(two_epoch_run, tmp_path):
    _, first = two_epoch_run
    second = _run(tmp_path / 'b', '--epochs', '2', '--seed', '0')
    other = _run(tmp_path / 'c', '--epochs', '2', '--seed', '4')
    assert _errors(first.stdout) == _errors(second.stdout)
    assert _errors(first.stdout)[0] != _errors(other.stdout)[0]


def test_a_killed_run_resumes_without_repeating_or_losing_an_epoch(tmp_path):
    run_dir = tmp_path / 'video_prediction'
    process = subprocess.Popen(
        [sys.executable, SCRIPT, '--out', str(tmp_path), '--epochs', '3'] + TINY,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + RUN_TIMEOUT
        while not (run_dir / 'snapshot_epoch_1').exists():
            assert process.poll() is None, 'the run ended before it could be killed'
            assert time.time() < deadline, 'no snapshot within {} s'.format(RUN_TIMEOUT)
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert not (run_dir / 'video_predictor.npz').exists()
    result = _run(tmp_path, '--epochs', '3', '--resume')
    assert _log_epochs(str(run_dir)) == [1, 2, 3]
    assert (run_dir / 'video_predictor.npz').exists()
    _errors(result.stdout)


def _final_weights(run_dir):
    import numpy
    with numpy.load(os.path.join(str(run_dir), 'video_predictor.npz')) as arrays:
        return {key: arrays[key].tobytes() for key in arrays.files}


def _log_rows(run_dir):
    with open(os.path.join(str(run_dir), 'log')) as f:
        return [{key: value for key, value in row.items() if key != 'elapsed_time'}
                for row in json.load(f)]


# The demo, run as `python train.py ARGS` would run it, with one reader extension more that
# pauses after iteration PAUSE_AT: it says so on stdout and waits for a line on stdin. The test
# signals the run while it waits, so the signal arrives mid-epoch 2 whatever the machine's
# load (waiting for epoch 1's files instead let a busy machine deliver it before
# iteration 21 began). It draws no random number and keeps no state: the snapshot is the
# one the plain script writes.
PAUSE_AT = 21
PAUSING_DEMO = '''
import os, runpy, sys
import chainer

class PauseAt(chainer.training.Extension):
    trigger = 1, 'iteration'
    priority = chainer.training.PRIORITY_READER

    def __call__(self, trainer):
        if trainer.updater.iteration == {pause_at}:
            print('paused after iteration', trainer.updater.iteration, flush=True)
            sys.stdin.readline()

_run = chainer.training.Trainer.run

def run(trainer, *args, **kwargs):
    trainer.extend(PauseAt(), name='test_pause_at')
    return _run(trainer, *args, **kwargs)

chainer.training.Trainer.run = run
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name='__main__')
'''.format(pause_at=PAUSE_AT)


def test_a_run_stopped_by_sigterm_mid_epoch_resumes_to_the_same_errors(two_epoch_run,
                                                                       tmp_path):
    reference_out, reference = two_epoch_run
    out = tmp_path / 'stopped'
    run_dir = out / 'video_prediction'
    # stderr in a file: a pipe that nobody reads while the test waits on stdout could fill.
    with (tmp_path / 'stderr').open('w') as stderr_file:
        process = subprocess.Popen(
            [sys.executable, '-c', PAUSING_DEMO, SCRIPT, '--out', str(out), '--epochs', '2']
            + TINY, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file,
            text=True)
    try:
        # Iteration 21 (the first of epoch 2: 640 clips, batches of 32) is done and the run
        # waits: the signal is noted before iteration 22 can end. The read has the test's
        # deadline (pytest-timeout) and ends at once if the run exits.
        paused = ''
        for line in process.stdout:
            if line.startswith('paused after iteration'):
                paused = line
                break
        assert paused == 'paused after iteration {}\n'.format(PAUSE_AT), \
            (tmp_path / 'stderr').read_text()[-3000:]
        process.send_signal(signal.SIGTERM)
        process.communicate('go\n', timeout=RUN_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    stderr = (tmp_path / 'stderr').read_text()
    assert process.returncode == 75, stderr[-3000:]
    stopped = re.search(r'SIGTERM received; the state after iteration ([0-9]+)', stderr)
    assert stopped, stderr[-3000:]
    assert 20 < int(stopped.group(1)) < 40  # mid-epoch 2 (640 clips, batches of 32)
    assert not (run_dir / 'video_predictor.npz').exists()
    resumed = _run(out, '--epochs', '2', '--resume')
    assert _errors(resumed.stdout) == _errors(reference.stdout)
    assert _final_weights(run_dir) == _final_weights(reference_out / 'video_prediction')
    assert _log_rows(run_dir) == _log_rows(reference_out / 'video_prediction')


def test_a_new_run_keeps_the_previous_one_aside(two_epoch_run, tmp_path):
    out = tmp_path / 'out'
    shutil.copytree(two_epoch_run[0], out)
    result = _run(out, '--epochs', '1')
    assert 'moved the previous run to' in result.stdout
    kept = [name for name in os.listdir(str(out)) if name.startswith('video_prediction-')]
    assert len(kept) == 1
    assert (out / kept[0] / 'video_predictor.npz').exists()


def test_resume_of_a_finished_run_says_so_and_changes_nothing(two_epoch_run, tmp_path):
    out = tmp_path / 'out'
    shutil.copytree(two_epoch_run[0], out)
    run_dir = out / 'video_prediction'
    before = {name: (run_dir / name).stat().st_mtime_ns for name in os.listdir(str(run_dir))}
    result = _run(out, '--epochs', '3', '--resume', check=False)
    assert result.returncode != 0
    assert 'already finished (epoch 2)' in result.stderr
    after = {name: (run_dir / name).stat().st_mtime_ns for name in os.listdir(str(run_dir))}
    assert after == before


def test_resume_without_a_run_says_so(tmp_path):
    result = _run(tmp_path, '--resume', check=False)
    assert result.returncode != 0
    assert 'no run to continue' in result.stderr


@pytest.mark.parametrize('args, message', [
    (['--epochs', '0'], '--epochs must be at least 1'),
    (['--workers', '-1'], '--workers must be 0 or more'),
])
def test_bad_options_are_refused(tmp_path, args, message):
    result = _run(tmp_path, *args, check=False)
    assert result.returncode == 2
    assert message in result.stderr


def test_with_slack_set_the_run_is_posted_in_one_thread_with_figures_at_the_end(tmp_path):
    with SlackServer() as server:
        result = _run(tmp_path, '--epochs', '2', env={
            'SLACK_BOT_TOKEN': TOKEN, 'SLACK_CHANNEL': 'experiments',
            'SLACK_API_URL': server.base_url})
        messages = list(server.messages)
        uploads = list(server.uploads)
    assert 'Slack: set' not in result.stdout
    start = messages[0]
    assert start['thread_ts'] is None and start['channel'] == 'C0000000003'
    replies = messages[1:]
    assert replies and all(m['thread_ts'] == start['ts'] for m in replies)
    assert 'finished' in replies[-1]['text']
    assert sorted(upload['filename'] for upload in uploads) == ['final_loss.png', 'frames.png']
    assert all(upload['thread_ts'] == start['ts'] for upload in uploads)
    assert uploads[0]['data'][:8] == b'\x89PNG\r\n\x1a\n'
