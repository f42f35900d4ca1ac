"""The signals PreemptionSnapshot takes (extensions/_signal_handlers.py): checked, named,
and their handlers put back. Fast: no training runs here; the handlers during and after a
run are tested in test_preemption_snapshot_handlers.py."""
import faulthandler
import os
import re
import signal
import subprocess
import sys

import pytest

from researchutils.chainer.training.extensions import Preempted, PreemptionSnapshot
from researchutils.chainer.training.extensions._signal_handlers import InstalledHandlers
from tests.support.processes import checkout_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


@pytest.mark.parametrize('signals, error, words', [
    ([], ValueError, [r'at least one signal', r'\[\]']),
    ([signal.SIGKILL], ValueError, ['SIGKILL, which no process can handle']),
    ([signal.SIGTERM, signal.SIGSTOP], ValueError, ['SIGSTOP, which no process can handle']),
    ([10 ** 6], ValueError, ['not a signal', '1000000']),
    ([0], ValueError, ['not a signal']),
    (['SIGTERM'], TypeError, ["'SIGTERM'"]),
    ([True], TypeError, ['True']),
    # An iterator (made afresh for each run) has a repr that holds none of its values: the
    # message names the value itself, and what was given.
    (lambda: iter([signal.SIGTERM, 15.5]), TypeError, ['15.5', 'list_iterator']),
    (15.5, TypeError, ['iterable of signal numbers', '15.5']),
])
def test_signals_that_no_handler_can_take_are_refused_naming_the_value(signals, error, words):
    with pytest.raises(error) as raised:
        PreemptionSnapshot(signals=signals() if callable(signals) else signals)
    for word in words:
        assert re.search(word, str(raised.value)), (word, str(raised.value))


def test_signals_are_kept_once_each_in_their_order_as_signals():
    given = iter([int(signal.SIGUSR1), signal.SIGTERM, int(signal.SIGUSR1), signal.SIGINT])
    checked = PreemptionSnapshot(signals=given).signals
    assert checked == (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
    assert all(type(number) is signal.Signals for number in checked)
    assert [number.name for number in checked] == ['SIGUSR1', 'SIGTERM', 'SIGINT']


def test_a_signal_is_named_by_its_name_or_else_by_its_number():
    assert Preempted(3, signal.SIGTERM, 'snapshot_iter_3').signal_name == 'SIGTERM'
    assert Preempted(3, int(signal.SIGUSR1), 'snapshot_iter_3').signal_name == 'SIGUSR1'
    unnamed = next(number for number in range(1, 65)
                   if number not in {int(known) for known in signal.Signals})
    assert Preempted(3, unnamed, 'snapshot_iter_3').signal_name == 'signal {}'.format(unnamed)
    assert str(Preempted(3, unnamed, 'x')).startswith('preempted by signal {} '.format(unnamed))


def _record(number, frame):
    pass


def test_installed_handlers_are_put_back_once_and_installed_afresh_after(tmp_path):
    before = {number: signal.signal(number, handler) for number, handler in [
        (signal.SIGUSR1, signal.SIG_IGN), (signal.SIGUSR2, signal.SIG_DFL)]}
    try:
        handlers = InstalledHandlers()
        handlers.install([signal.SIGUSR1, signal.SIGUSR2], _record)
        handlers.install([signal.SIGUSR1], _record)  # again: what was before stays known
        assert signal.getsignal(signal.SIGUSR1) is _record
        assert signal.getsignal(signal.SIGUSR2) is _record
        handlers.restore()
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL
        signal.signal(signal.SIGUSR1, signal.default_int_handler)
        handlers.restore()  # a second restore changes nothing
        assert signal.getsignal(signal.SIGUSR1) is signal.default_int_handler
        handlers.install([signal.SIGUSR1], _record)  # afresh: what is there now comes back
        handlers.restore()
        assert signal.getsignal(signal.SIGUSR1) is signal.default_int_handler
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


_FOREIGN = """
import signal
from researchutils.chainer.training.extensions._signal_handlers import InstalledHandlers
assert signal.getsignal(signal.SIGABRT) is None  # faulthandler's, set outside Python
handlers = InstalledHandlers()
for _ in range(2):
    handlers.install([signal.SIGABRT, signal.SIGTERM], lambda number, frame: None)
    handlers.restore()
print('restored', flush=True)
signal.raise_signal(signal.SIGABRT)
"""


def test_a_handler_set_outside_python_is_put_back_and_runs(tmp_path):
    # In this process: faulthandler's handler for a signal whose default is to do nothing,
    # set at the C level (Python's record of it stays SIG_DFL).
    with open(str(tmp_path / 'dump'), 'w+') as dump:
        faulthandler.register(signal.SIGURG, file=dump, chain=False)
        try:
            handlers = InstalledHandlers()
            handlers.install([signal.SIGURG], _record)
            assert signal.getsignal(signal.SIGURG) is _record
            handlers.restore()
            signal.raise_signal(signal.SIGURG)  # handled before it returns
        finally:
            faulthandler.unregister(signal.SIGURG)
        dump.seek(0)
        assert 'most recent call first' in dump.read()  # faulthandler's report: it ran
    # In a process where Python records the handler as None (set before Python's signal
    # module, by -X faulthandler), for SIGABRT, then raised.
    done = subprocess.run([sys.executable, '-X', 'faulthandler', '-c', _FOREIGN],
                          cwd=REPO, env=checkout_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.stdout == 'restored\n', done.stderr
    # faulthandler's report, then the default action: SIG_DFL alone ends it without a word.
    assert done.returncode == -signal.SIGABRT, done.stderr
    assert 'Fatal Python error: Aborted' in done.stderr
