"""PreemptionSnapshot's signal handlers: installed for a run, put back exactly after it.

After ``finalize`` the handlers of before the run are back (a Python function, the
default, ``SIG_IGN``, Python's own SIGINT handler); a second run in the same process
installs its own afresh; a handler set outside Python (``signal.getsignal`` gives None:
here faulthandler's, installed before Python's signal module by ``-X faulthandler``)
still runs after the run. Also: the first of two signals names the stop.
"""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from researchutils.chainer.training.extensions import Preempted, PreemptionSnapshot
from tests.support import preemptible_training as run
from tests.support.processes import checkout_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


def _handler_at_iteration_one(number):
    """An extension that records the handler of ``number`` during the first iteration."""
    seen = []

    def record(trainer):
        if trainer.updater.iteration == 1:
            seen.append(signal.getsignal(number))

    return seen, record


def _python_handler(number, frame):
    raise AssertionError('not to be called')


@pytest.mark.parametrize('before', [signal.SIG_DFL, signal.SIG_IGN, _python_handler],
                         ids=['default', 'ignored', 'python'])
def test_the_handler_of_before_the_run_is_back_after_it(tmp_path, before):
    previous = signal.signal(signal.SIGUSR2, before)
    try:
        trainer = run.build_trainer(tmp_path, stop_iteration=2, signals=[signal.SIGUSR2])
        seen, record = _handler_at_iteration_one(signal.SIGUSR2)
        trainer.extend(record, trigger=(1, 'iteration'))
        trainer.run()
        assert seen == [trainer.get_extension('PreemptionSnapshot')._note]
        assert signal.getsignal(signal.SIGUSR2) is before
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_pythons_own_sigint_handler_is_back_after_the_run(tmp_path):
    # Set here: Python installs it only when it starts with SIGINT not ignored, and a
    # suite started in the background (`make test &`, nohup) starts with it ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        trainer = run.build_trainer(tmp_path, stop_iteration=2, signals=[signal.SIGINT])
        trainer.run()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize('reuse', [True, False], ids=['same_extension', 'new_extension'])
def test_a_second_run_in_the_same_process_installs_its_handlers_afresh(tmp_path, reuse):
    before = signal.getsignal(signal.SIGTERM)
    extension = PreemptionSnapshot()
    seen = []
    for out in ('first', 'second'):
        trainer = run.build_trainer(tmp_path / out, stop_iteration=2, preemption=False)
        current = extension if reuse else PreemptionSnapshot()
        trainer.extend(current)
        handlers, record = _handler_at_iteration_one(signal.SIGTERM)
        trainer.extend(record, trigger=(1, 'iteration'))
        trainer.run()
        seen += [handlers == [current._note], signal.getsignal(signal.SIGTERM) is before]
    assert seen == [True, True, True, True]


FOREIGN_HANDLER = textwrap.dedent('''
    import signal, sys
    from researchutils.chainer.training.extensions import PreemptionSnapshot
    from tests.support import preemptible_training as run
    # faulthandler, enabled by -X faulthandler before the signal module was set up.
    assert signal.getsignal(signal.SIGABRT) is None
    for out in sys.argv[1:]:    # two runs in one process
        trainer = run.build_trainer(out, stop_iteration=2, preemption=False)
        trainer.extend(PreemptionSnapshot(signals=[signal.SIGTERM, signal.SIGABRT]))
        trainer.run()
    print('ran', flush=True)
    signal.raise_signal(signal.SIGABRT)
''')


@pytest.mark.slow
def test_a_handler_set_outside_python_still_runs_after_two_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, '-X', 'faulthandler', '-c', FOREIGN_HANDLER, str(tmp_path / 'one'),
         str(tmp_path / 'two')], cwd=REPO, env=checkout_env(), capture_output=True,
        text=True, timeout=300)
    assert done.stdout == 'ran\n', done.stderr
    # faulthandler's handler ran: it writes its report, then the default action ends the
    # process. (SIG_DFL alone would end it without a word.)
    assert done.returncode == -signal.SIGABRT, done.stderr
    assert 'Fatal Python error: Aborted' in done.stderr


def _two_signals_at(iteration, first, second):
    def send(trainer):
        if trainer.updater.iteration == iteration:
            os.kill(os.getpid(), first)
            os.kill(os.getpid(), second)

    return send


@pytest.mark.parametrize('first, second', [(signal.SIGUSR1, signal.SIGTERM),
                                           (signal.SIGTERM, signal.SIGUSR1)])
def test_two_signals_in_one_iteration_stop_in_the_name_of_the_first(
        tmp_path, capfd, first, second):
    trainer = run.build_trainer(tmp_path)
    trainer.extend(_two_signals_at(3, first, second), trigger=(1, 'iteration'))
    with pytest.raises(Preempted) as preempted:
        trainer.run()
    assert preempted.value.signal_number == first
    assert str(preempted.value).startswith('preempted by {} after iteration 3'.format(
        first.name))
    assert 'PreemptionSnapshot: {} received'.format(first.name) in capfd.readouterr().err
