"""PreemptionSnapshot: real signals, in this process and in training subprocesses.

The reference for every resume is the same run never interrupted (tests/support/
preemptible_training.py); weights, optimizer state, LogReport rows (less elapsed_time)
and the final random states must be equal bit for bit.
"""
import json
import os
import random
import signal
import threading
import warnings

import chainer
import numpy
import pytest

from researchutils.chainer.serializers import load_snapshot
from researchutils.chainer.training.extensions import Preempted, PreemptionSnapshot
from tests.support import preemptible_training as run
from tests.support.processes import no_process_left, start_module  # noqa: F401 (fixture)
from tests.support.tiny_training import Crash, crash_at

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
PROCESS_TIMEOUT = 120
# Kills what a failed test left running.
pytestmark = pytest.mark.usefixtures('no_process_left')
# Iterations after which a signal arrives: two mid-epoch, drawn from a seed, and an epoch end.
_MID_EPOCH = [i for i in range(1, run.STOP_ITERATION) if i not in run.EPOCH_ENDS]
SIGNAL_ITERATIONS = sorted(int(i) for i in numpy.random.RandomState(19).choice(
    _MID_EPOCH, 2, replace=False)) + [run.EPOCH_ENDS[1]]


def _assert_same_run(actual, expected):
    arrays, rows = actual
    expected_arrays, expected_rows = expected
    assert sorted(arrays) == sorted(expected_arrays)
    different = [key for key in expected_arrays
                 if arrays[key].dtype != expected_arrays[key].dtype
                 or not numpy.array_equal(arrays[key], expected_arrays[key])]
    assert different == []
    assert rows == expected_rows


# --- in this process ---------------------------------------------------------------

_reference_runs = {}


def _reference(kind, tmp_path_factory):
    if kind not in _reference_runs:
        trainer = run.build_trainer(tmp_path_factory.mktemp('reference'), kind)
        trainer.run()
        _reference_runs[kind] = run.final_state(trainer)
    return _reference_runs[kind]


def _preempt_and_resume(out, kind, iteration, signal_number=signal.SIGUSR1):
    trainer = run.build_trainer(out, kind)
    trainer.extend(run.signal_self_at(iteration, signal_number))
    with pytest.raises(Preempted) as preempted:
        trainer.run()
    assert preempted.value.iteration == iteration
    assert preempted.value.code == 75
    assert os.path.exists(os.path.join(str(out), 'snapshot_iter_{}'.format(iteration)))
    resumed = run.build_trainer(out, kind)
    resumed.run()
    return run.final_state(resumed)


@pytest.mark.parametrize('iteration', SIGNAL_ITERATIONS)
def test_resume_after_a_signal_is_bit_identical(tmp_path, tmp_path_factory, iteration):
    resumed = _preempt_and_resume(tmp_path, 'chainer_serial', iteration)
    _assert_same_run(resumed, _reference('chainer_serial', tmp_path_factory))


@pytest.mark.parametrize('kind', ['serial', 'serial_seeded', 'multithread_seeded',
                                  'multiprocess_seeded', 'data_manager',
                                  'data_manager_workers_seeded'])
# 4: the batches made ahead of the snapshot reach into the next epoch.
@pytest.mark.parametrize('iteration', [run.EPOCH_ENDS[0] - 1, SIGNAL_ITERATIONS[0]])
def test_resume_mid_epoch_with_our_iterators_is_bit_identical(
        tmp_path, tmp_path_factory, kind, iteration):
    resumed = _preempt_and_resume(tmp_path, kind, iteration)
    _assert_same_run(resumed, _reference(kind, tmp_path_factory))


def test_resume_with_an_unseeded_multithread_iterator_is_exact_mid_epoch(
        tmp_path, tmp_path_factory):
    resumed = _preempt_and_resume(tmp_path, 'multithread_shuffle_only', 7)
    _assert_same_run(resumed, _reference('multithread_shuffle_only', tmp_path_factory))


def test_resume_with_an_unseeded_multithread_iterator_before_an_epoch_end_is_exact(
        tmp_path, tmp_path_factory):
    # The batch made ahead drew the next epoch's order from the global NumPy state before
    # the snapshot; the snapshot holds that order, so the resumed run draws no other.
    iteration = run.EPOCH_ENDS[0] - 1  # the batch planned ahead reaches into epoch 1
    resumed = _preempt_and_resume(tmp_path, 'multithread_shuffle_only', iteration)
    _assert_same_run(resumed, _reference('multithread_shuffle_only', tmp_path_factory))


def test_a_signal_during_validation_stops_after_it_and_resumes_bit_identical(tmp_path):
    reference = run.build_trainer(tmp_path / 'reference', validation=True)
    reference.run()
    trainer = run.build_trainer(tmp_path, signal_during_validation=signal.SIGTERM)
    with pytest.raises(Preempted) as preempted:
        trainer.run()
    assert preempted.value.iteration == run.EPOCH_ENDS[0]
    assert 'validation/main/loss' in run.log_rows(trainer)[-1]
    resumed = run.build_trainer(tmp_path, validation=True)
    resumed.run()
    _assert_same_run(run.final_state(resumed), run.final_state(reference))


def test_states_loaded_before_the_run_are_set_again_when_it_starts(tmp_path, tmp_path_factory):
    trainer = run.build_trainer(tmp_path)
    trainer.extend(run.signal_self_at(6, signal.SIGUSR1))
    with pytest.raises(Preempted):
        trainer.run()
    resumed = run.build_trainer(tmp_path / 'elsewhere')  # nothing there to autoload
    load_snapshot(str(tmp_path / 'snapshot_iter_6'), resumed)
    numpy.random.uniform(size=3)
    random.random()
    resumed.run()
    _assert_same_run(run.final_state(resumed), _reference('chainer_serial', tmp_path_factory))


def test_snapshot_holds_the_random_states_of_the_iteration_end(tmp_path):
    trainer = run.build_trainer(tmp_path)
    trainer.extend(run.signal_self_at(3, signal.SIGTERM))
    with pytest.raises(Preempted):
        trainer.run()
    expected_numpy = numpy.random.get_state()
    expected_python = random.getstate()
    with numpy.load(str(tmp_path / 'snapshot_iter_3')) as snapshot:
        prefix = 'extensions/PreemptionSnapshot/'
        assert numpy.array_equal(snapshot[prefix + 'numpy_random/keys'], expected_numpy[1])
        assert int(snapshot[prefix + 'numpy_random/pos']) == expected_numpy[2]
        assert tuple(int(word) for word in snapshot[prefix + 'python_random/state']) == \
            expected_python[1]


class ReportGaussians(chainer.training.Extension):
    """Each iteration draws a Gaussian from NumPy's global state and one from Python's
    ``random`` and reports them, with whether each generator now caches a second one."""

    trigger = (1, 'iteration')
    priority = chainer.training.PRIORITY_WRITER + 1  # before LogReport reads the observation

    def __call__(self, trainer):
        chainer.report({'gauss/numpy': numpy.random.standard_normal(),
                        'gauss/python': random.gauss(0., 1.),
                        'gauss/numpy_cached': float(numpy.random.get_state()[3]),
                        'gauss/python_cached': float(random.getstate()[2] is not None)})


def _gaussian_run(out, signal_at=None):
    trainer = run.build_trainer(out)
    trainer.extend(ReportGaussians())
    if signal_at is not None:
        trainer.extend(run.signal_self_at(signal_at, signal.SIGUSR1))
    return trainer


def test_cached_gaussians_survive_a_preemption_snapshot(tmp_path):
    # NumPy's legacy state and Python's random both make normals in pairs and keep the
    # second for the next draw; a snapshot taken while both hold one must keep it.
    reference = _gaussian_run(tmp_path / 'reference')
    reference.run()
    rows = run.log_rows(reference)
    iteration = next(row['iteration'] for row in rows
                     if row['gauss/numpy_cached'] == row['gauss/python_cached'] == 1.
                     and row['iteration'] not in run.EPOCH_ENDS)
    with pytest.raises(Preempted):
        _gaussian_run(tmp_path, signal_at=iteration).run()
    resumed = _gaussian_run(tmp_path)
    resumed.run()
    resumed_rows = run.log_rows(resumed)
    # The first Gaussians drawn after the resume are the ones the run never stopped drew.
    first = [row for row in resumed_rows if row['iteration'] == iteration + 1]
    assert first == [row for row in rows if row['iteration'] == iteration + 1]
    _assert_same_run(run.final_state(resumed), run.final_state(reference))


def test_loading_a_snapshot_without_random_states_warns_and_keeps_them(tmp_path):
    run.build_trainer(tmp_path, stop_iteration=5, preemption=False).run()
    numpy.random.seed(123)
    before = numpy.random.get_state()[1].copy()
    target = run.build_trainer(tmp_path / 'elsewhere')
    numpy.random.seed(123)
    with pytest.warns(RuntimeWarning, match='holds no random states'):
        load_snapshot(str(tmp_path / 'snapshot_iter_5'), target)
    assert numpy.array_equal(numpy.random.get_state()[1], before)
    assert target.updater.iteration == 5


def _record_handler():
    seen = []

    def record(trainer):
        if trainer.updater.iteration == 1:
            seen.append(signal.getsignal(signal.SIGTERM))

    return seen, record


def test_handlers_are_installed_during_the_run_and_restored_after(tmp_path):
    def previous_handler(signal_number, frame):
        raise AssertionError('not to be called')

    old_term = signal.signal(signal.SIGTERM, previous_handler)
    old_usr1 = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        trainer = run.build_trainer(tmp_path)
        seen, record = _record_handler()
        trainer.extend(record, trigger=(1, 'iteration'))
        trainer.run()
        extension = trainer.get_extension('PreemptionSnapshot')
        assert seen == [extension._note]
        assert signal.getsignal(signal.SIGTERM) is previous_handler
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGUSR1, old_usr1)


def test_handlers_are_restored_after_a_preemption(tmp_path):
    before = signal.getsignal(signal.SIGUSR1)
    trainer = run.build_trainer(tmp_path)
    trainer.extend(run.signal_self_at(2, signal.SIGUSR1))
    with pytest.raises(Preempted):
        trainer.run()
    assert signal.getsignal(signal.SIGUSR1) is before


def test_an_extension_reused_after_a_preemption_starts_clean(tmp_path):
    extension = PreemptionSnapshot()
    first = run.build_trainer(tmp_path / 'first', preemption=False)
    first.extend(extension)
    first.extend(run.signal_self_at(2, signal.SIGTERM))
    with pytest.raises(Preempted):
        first.run()
    second = run.build_trainer(tmp_path / 'second', stop_iteration=4, preemption=False)
    second.extend(extension)
    second.run()
    assert second.updater.iteration == 4


def test_a_signal_noted_while_the_run_fails_leaves_the_error_to_go_on(tmp_path):
    received = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: received.append(number))
    try:
        trainer = run.build_trainer(tmp_path)
        trainer.extend(run.signal_self_at(3, signal.SIGTERM))
        trainer.extend(crash_at(3), priority=0)  # after the signal, before the snapshot
        with pytest.warns(RuntimeWarning, match="SIGTERM arrived, but the run ends with "
                                                "Crash"):
            with pytest.raises(Crash):
                trainer.run(show_loop_exception_msg=False)
        assert received == []
        assert not os.path.exists(str(tmp_path / 'snapshot_iter_3'))
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_only_the_given_signals_are_handled(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    trainer = run.build_trainer(tmp_path, signals=[signal.SIGUSR2])
    seen, record = _record_handler()
    trainer.extend(record, trigger=(1, 'iteration'))
    trainer.extend(run.signal_self_at(4, signal.SIGUSR2))
    with pytest.raises(Preempted) as preempted:
        trainer.run()
    assert seen == [before]
    assert preempted.value.signal_number == signal.SIGUSR2


def test_a_trainer_outside_the_main_thread_warns_and_runs_on(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    caught = []
    errors = []

    def train():
        try:
            with warnings.catch_warnings(record=True) as records:
                warnings.simplefilter('always')
                trainer = run.build_trainer(tmp_path, stop_iteration=3)
                trainer.run()
            caught.extend(records)
            caught.append(trainer.updater.iteration)
        except BaseException as error:  # reported below, in the main thread
            errors.append(error)

    thread = threading.Thread(target=train, name='trainer-thread')
    thread.start()
    thread.join(PROCESS_TIMEOUT)
    assert errors == []
    messages = [str(record.message) for record in caught[:-1]
                if issubclass(record.category, RuntimeWarning)]
    assert any('cannot install handlers for SIGTERM, SIGUSR1' in message
               and "'trainer-thread'" in message and 'main thread' in message
               for message in messages), messages
    assert caught[-1] == 3
    assert signal.getsignal(signal.SIGTERM) is before


class _Named:
    """An object with the given attributes, shown as ``<name>``."""

    def __init__(self, name, **attributes):
        self.name = name
        self.__dict__.update(attributes)

    def __repr__(self):
        return '<{}>'.format(self.name)


@pytest.mark.parametrize('arguments, error, words', [
    # signals: test_signal_handlers.py
    (dict(filename=3), TypeError, 'filename must be a str .*got 3$'),
    (dict(filename=''), ValueError, "^filename must be one file or folder name .*got ''"),
    (dict(filename='a/b'), ValueError, "^filename must be one file or folder name .*'a/b'"),
    (dict(filename='..'), ValueError, '^filename must be one file or folder name'),
    (dict(filename='snap\0shot'), ValueError, '^filename must be one file or folder name'),
    (dict(requeue='yes'), TypeError, "^requeue must .*'yes'"),
    (dict(requeue_timeout=0), ValueError, '^requeue_timeout must .*got 0$'),
    (dict(comm=object()), TypeError, 'comm must be a ChainerMN communicator'),
    (dict(comm=_Named('no rank')), TypeError, '^comm must be a ChainerMN .*<no rank>$'),
    (dict(comm=_Named('no mpi_comm', rank=0, size=2)), TypeError,
     '^comm must be a ChainerMN .*<no mpi_comm>$'),
    (dict(comm=_Named('str rank', rank='0', size=2, mpi_comm=None)), TypeError,
     '^comm must be a ChainerMN .*<str rank>$'),
    (dict(comm=_Named('str size', rank=0, size='2', mpi_comm=None)), TypeError,
     '^comm must be a ChainerMN .*<str size>$'),
    (dict(comm=_Named('two ranks', rank=0, size=2, mpi_comm=None), filename='snapshot'),
     ValueError, "^filename 'snapshot' has no {rank}: .* each of the 2 ranks"),
    (dict(check_interval=0), ValueError, '^check_interval must .*got 0$'),
])
def test_bad_arguments_are_refused_by_name(arguments, error, words):
    with pytest.raises(error, match=words):
        PreemptionSnapshot(**arguments)


@pytest.mark.gpu
def test_a_model_on_the_gpu_warns_that_cupy_draws_are_not_saved(tmp_path):
    trainer = run.build_trainer(tmp_path, device='@cupy:0')
    trainer.extend(run.signal_self_at(2, signal.SIGUSR1))
    with pytest.warns(RuntimeWarning, match="CuPy's random generator state cannot be saved"):
        with pytest.raises(Preempted):
            trainer.run()
    assert os.path.exists(str(tmp_path / 'snapshot_iter_2'))


# --- training subprocesses ---------------------------------------------------------------


def _start(out, *options, env=None):
    return start_module('tests.support.preemptible_training', out, *options, env=env)


def _finish(process):
    stdout, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    return process.returncode, stderr


def _train(out, *options, env=None):
    return _finish(_start(out, *options, env=env))


def _results(out):
    with numpy.load(os.path.join(str(out), 'final.npz')) as arrays:
        loaded = {key: arrays[key] for key in arrays.files}
    with open(os.path.join(str(out), 'log_rows.json')) as f:
        return loaded, json.load(f)


@pytest.fixture(scope='module')
def reference_process_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('uninterrupted')
    status, stderr = _train(out)
    assert status == 0, stderr
    return _results(out)


def _signal_at(out, iteration, signal_number, *options, env=None):
    """Starts a run, signals it after ``iteration`` and returns the running process."""
    process = _start(out, '--pause-at', str(iteration), *options, env=env)
    try:
        run.wait_for(os.path.join(str(out), 'at_{}'.format(iteration)))
    except TimeoutError:
        process.kill()
        raise AssertionError(_finish(process)[1]) from None
    return process


def _go(out, iteration):
    run.touch(os.path.join(str(out), 'go_{}'.format(iteration)))


@pytest.mark.slow
@pytest.mark.parametrize('iteration, signal_number', list(zip(
    SIGNAL_ITERATIONS, [signal.SIGTERM, signal.SIGUSR1, signal.SIGTERM])))
def test_signalled_process_exits_75_and_resumes_bit_identical(
        tmp_path, reference_process_run, iteration, signal_number):
    process = _signal_at(tmp_path, iteration, signal_number)
    process.send_signal(signal_number)
    _go(tmp_path, iteration)
    status, stderr = _finish(process)
    assert status == 75, stderr
    assert 'PreemptionSnapshot: {} received'.format(signal_number.name) in stderr
    assert 'Traceback' not in stderr
    assert os.path.exists(str(tmp_path / 'snapshot_iter_{}'.format(iteration)))
    assert not os.path.exists(str(tmp_path / 'final.npz'))
    status, stderr = _train(tmp_path)
    assert status == 0, stderr
    _assert_same_run(_results(tmp_path), reference_process_run)


@pytest.mark.slow
def test_a_second_signal_while_the_snapshot_is_written_changes_nothing(
        tmp_path, reference_process_run):
    iteration = SIGNAL_ITERATIONS[0]
    process = _signal_at(tmp_path, iteration, signal.SIGTERM, '--block-save')
    run.touch(str(tmp_path / 'block'))
    process.send_signal(signal.SIGTERM)
    _go(tmp_path, iteration)
    run.wait_for(str(tmp_path / 'saving'))
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGUSR1)
    run.touch(str(tmp_path / 'release'))
    status, stderr = _finish(process)
    assert status == 75, stderr
    assert stderr.count('received') == 1
    load_snapshot(str(tmp_path / 'snapshot_iter_{}'.format(iteration)),
                  run.build_trainer(tmp_path / 'check'))
    status, stderr = _train(tmp_path)
    assert status == 0, stderr
    _assert_same_run(_results(tmp_path), reference_process_run)


@pytest.mark.slow
def test_sigkill_while_the_snapshot_is_written_keeps_the_previous_one(
        tmp_path, reference_process_run):
    iteration = 7  # after the epoch snapshot of iteration 5
    process = _signal_at(tmp_path, iteration, signal.SIGUSR1, '--block-save')
    run.touch(str(tmp_path / 'block'))
    process.send_signal(signal.SIGUSR1)
    _go(tmp_path, iteration)
    run.wait_for(str(tmp_path / 'saving'))
    process.kill()
    status, stderr = _finish(process)
    assert status == -signal.SIGKILL
    names = os.listdir(str(tmp_path))
    assert 'snapshot_iter_{}'.format(iteration) not in names
    assert [name for name in names if name.startswith('snapshot_iter_')] == ['snapshot_iter_5']
    trainer = load_snapshot(str(tmp_path / 'snapshot_iter_5'),
                            run.build_trainer(tmp_path / 'check'))
    assert trainer.updater.iteration == 5
    status, stderr = _train(tmp_path)
    assert status == 0, stderr
    _assert_same_run(_results(tmp_path), reference_process_run)


@pytest.mark.slow
def test_a_signal_after_the_last_iteration_takes_its_usual_effect_at_once(tmp_path):
    process = _start(tmp_path, '--pause-in-finalize')
    run.wait_for(str(tmp_path / 'finalizing'))
    process.send_signal(signal.SIGTERM)
    run.touch(str(tmp_path / 'go_finalize'))
    status, stderr = _finish(process)
    assert status == -signal.SIGTERM, stderr
    assert 'PreemptionSnapshot' not in stderr
    assert 'snapshot_iter_{}'.format(run.STOP_ITERATION) not in os.listdir(str(tmp_path))


@pytest.mark.slow
def test_a_signal_after_the_run_meets_the_previous_handler(tmp_path):
    process = _start(tmp_path, '--pause-after-run')
    run.wait_for(str(tmp_path / 'finished'))
    with open(str(tmp_path / 'finished')) as f:
        assert f.read() == repr(signal.SIG_DFL)
    process.send_signal(signal.SIGTERM)
    # Killed by it: a handler that went on would wait for go_exit, then exit 1.
    status, stderr = _finish(process)
    assert status == -signal.SIGTERM, stderr


def _scontrol_stand_in(tmp_path, status=0, answers=True):
    """A ``scontrol`` on PATH that appends its arguments to a file and exits with ``status``;
    one that never ``answers`` first waits for a file that nobody creates (for a minute at
    most, so that no stand-in outlives its test for long)."""
    folder = tmp_path / 'bin'
    folder.mkdir()
    calls = tmp_path / 'scontrol_calls'
    script = folder / 'scontrol'
    wait = '' if answers else ('i=0\nwhile [ ! -e "{}" ] && [ $i -lt 600 ]; do sleep 0.1; '
                               'i=$((i + 1)); done\n'.format(tmp_path / 'never'))
    script.write_text('#!/bin/sh\n{}echo "$@" >> "{}"\necho "job is not requeueable" >&2\n'
                      'exit {}\n'.format(wait, calls, status))
    script.chmod(0o755)
    env = dict(os.environ, PATH='{}{}{}'.format(folder, os.pathsep, os.environ['PATH']),
               SLURM_JOB_ID='4242')
    return env, calls


@pytest.mark.slow
@pytest.mark.parametrize('requeue', [True, False])
def test_requeue_runs_scontrol_only_when_asked(tmp_path, requeue):
    env, calls = _scontrol_stand_in(tmp_path)
    out = tmp_path / 'out'
    process = _signal_at(out, 3, signal.SIGUSR1, *(['--requeue'] if requeue else []),
                         env=env)
    process.send_signal(signal.SIGUSR1)
    _go(out, 3)
    status, stderr = _finish(process)
    assert status == 75, stderr
    if requeue:
        assert calls.read_text() == 'requeue 4242\n'
    else:
        assert not calls.exists()


@pytest.mark.slow
def test_a_refused_requeue_warns_and_still_exits_75(tmp_path):
    env, calls = _scontrol_stand_in(tmp_path, status=1)
    out = tmp_path / 'out'
    process = _signal_at(out, 3, signal.SIGTERM, '--requeue', env=env)
    process.send_signal(signal.SIGTERM)
    _go(out, 3)
    status, stderr = _finish(process)
    assert status == 75, stderr
    assert calls.read_text() == 'requeue 4242\n'
    assert "'scontrol requeue 4242' exited with status 1: job is not requeueable" in stderr
    assert os.path.exists(str(out / 'snapshot_iter_3'))


class _RankOfTwo:
    """One rank of a two-rank ChainerMN run, in this process: its peer notes the same
    signals (allgather returns this rank's value twice). The real two-rank runs are in
    test_preemption_snapshot_mpi.py, which needs mpiexec."""

    size = 2

    def __init__(self, rank):
        self.rank = rank
        self.mpi_comm = self

    def allgather(self, value):
        return [value] * self.size


@pytest.mark.parametrize('rank, calls', [(0, 'requeue 4242\n'), (1, None)])
def test_under_chainermn_only_rank_0_asks_slurm_to_requeue(tmp_path, monkeypatch, rank,
                                                            calls):
    env, calls_file = _scontrol_stand_in(tmp_path)
    monkeypatch.setenv('PATH', env['PATH'])
    monkeypatch.setenv('SLURM_JOB_ID', env['SLURM_JOB_ID'])
    trainer = run.build_trainer(tmp_path / 'out', preemption=False)
    trainer.extend(PreemptionSnapshot(requeue=True, comm=_RankOfTwo(rank)))
    trainer.extend(run.signal_self_at(2, signal.SIGUSR1))
    with pytest.raises(Preempted):
        trainer.run()
    assert os.path.exists(str(tmp_path / 'out' / 'snapshot_iter_2_rank{}'.format(rank)))
    assert (calls_file.read_text() if calls_file.exists() else None) == calls


def test_without_chainermn_the_one_process_asks_slurm_to_requeue(tmp_path, monkeypatch):
    env, calls_file = _scontrol_stand_in(tmp_path)
    monkeypatch.setenv('PATH', env['PATH'])
    monkeypatch.setenv('SLURM_JOB_ID', env['SLURM_JOB_ID'])
    trainer = run.build_trainer(tmp_path / 'out', requeue=True)
    trainer.extend(run.signal_self_at(2, signal.SIGUSR1))
    with pytest.raises(Preempted):
        trainer.run()
    assert calls_file.read_text() == 'requeue 4242\n'


def test_an_scontrol_that_never_answers_is_given_up_after_requeue_timeout(tmp_path,
                                                                          monkeypatch):
    env, _ = _scontrol_stand_in(tmp_path, answers=False)
    monkeypatch.setenv('PATH', env['PATH'])
    monkeypatch.setenv('SLURM_JOB_ID', env['SLURM_JOB_ID'])
    trainer = run.build_trainer(tmp_path / 'out', requeue=True, requeue_timeout=0.5)
    trainer.extend(run.signal_self_at(2, signal.SIGUSR1))
    with pytest.warns(RuntimeWarning, match="'scontrol requeue 4242' failed: .*timed out"):
        with pytest.raises(Preempted):
            trainer.run()
    assert os.path.exists(str(tmp_path / 'out' / 'snapshot_iter_2'))


def test_preempted_and_the_stderr_line_name_the_signal_iteration_snapshot_and_status(
        tmp_path, capfd):
    trainer = run.build_trainer(tmp_path)
    trainer.extend(run.signal_self_at(3, signal.SIGTERM))
    with pytest.raises(Preempted) as preempted:
        trainer.run()
    path = os.path.join(trainer.out, 'snapshot_iter_3')
    error = preempted.value
    assert (error.iteration, error.signal_number, error.path, error.code) == (
        3, signal.SIGTERM, path, 75)
    assert error.signal_name == 'SIGTERM'
    written = capfd.readouterr().err
    for text in (str(error), written):
        for part in ('SIGTERM', 'iteration 3', repr(path), 'exit status 75'):
            assert part in text, (part, text)


def test_a_signal_the_run_ends_before_acting_on_meets_the_previous_handler(tmp_path):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: received.append(number))
    try:
        trainer = run.build_trainer(tmp_path, stop_iteration=3)
        # After PreemptionSnapshot's turn in the last iteration: noted, never acted on.
        trainer.extend(run.signal_self_at(3, signal.SIGUSR1),
                       priority=PreemptionSnapshot.priority - 1)
        trainer.run()
        assert received == [signal.SIGUSR1]
        assert not os.path.exists(str(tmp_path / 'snapshot_iter_3'))
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_an_extension_reused_after_a_resumed_run_starts_clean(tmp_path):
    first = run.build_trainer(tmp_path / 'first')
    first.extend(run.signal_self_at(2, signal.SIGTERM))
    with pytest.raises(Preempted):
        first.run()
    resumed = run.build_trainer(tmp_path / 'first')  # loads the snapshot's random states
    extension = resumed.get_extension('PreemptionSnapshot')
    resumed.run()
    second = run.build_trainer(tmp_path / 'second', stop_iteration=4, preemption=False)
    second.extend(extension)
    second.run()
    assert second.updater.iteration == 4


def test_the_defaults_wait_a_minute_for_scontrol_and_agree_at_every_iteration():
    extension = PreemptionSnapshot()
    assert (extension.requeue, extension.requeue_timeout, extension.check_interval) == (
        False, 60.0, 1)
    assert extension.filename == 'snapshot_iter_{.updater.iteration}'


def test_one_rank_alone_needs_no_rank_in_the_file_name(tmp_path):
    extension = PreemptionSnapshot(filename='snapshot', comm=_Named('one', rank=0, size=1,
                                                                    mpi_comm=None))
    assert extension.filename == 'snapshot'


def test_under_chainermn_no_rank_stops_between_agreements_without_a_signal(tmp_path):
    trainer = run.build_trainer(tmp_path, stop_iteration=4, preemption=False)
    trainer.extend(PreemptionSnapshot(comm=_RankOfTwo(0), check_interval=3))
    trainer.run()
    assert trainer.updater.iteration == 4
    assert not [name for name in os.listdir(str(tmp_path)) if name.startswith('snapshot')]
