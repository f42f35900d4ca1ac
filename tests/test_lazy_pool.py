"""LazyPool's answer to a worker that died of a signal (researchutils/_lazy_pool.py).

Workers leave the signals that stop a job to the main process (tests/test_process_worker.py),
but a worker may still die of a signal that the main process handles too (one outside that
set, or a handler that the task's code put back): the batch is then made again by new
workers, and ``next()`` returns it as if nothing happened, while the main process decides.
A worker killed by a signal that the main process does not handle is reported, as before.
"""
import signal

import pytest

from researchutils.chainer.iterators import DecorableMultiprocessIterator
from tests.support.iterators import DiesBySignal, die_by_signal
from tests.support.start_methods import using_start_method

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def handled_sigvtalrm():
    """The main process handles SIGVTALRM in Python (noting it), as PreemptionSnapshot does.

    (Not SIGALRM: pytest-timeout handles that one.)
    """
    noted = []
    previous = signal.signal(signal.SIGVTALRM, lambda number, frame: noted.append(number))
    yield noted
    signal.signal(signal.SIGVTALRM, previous)


def _iterator(tmp_path, times):
    dataset = DiesBySignal(range(32), 5, signal.SIGVTALRM, tmp_path / 'died', times)
    with using_start_method('fork'):
        return DecorableMultiprocessIterator(dataset, 4, shuffle=False, n_processes=2,
                                             decor_fun=die_by_signal, dataset_timeout=None)


def _deaths(tmp_path):
    return len(list(tmp_path.glob('died.*')))


def test_a_worker_dead_of_a_signal_the_main_process_handles_loses_no_batch(
        tmp_path, handled_sigvtalrm):
    with _iterator(tmp_path, times=1) as it:
        batches = [it.next() for _ in range(8)]
    assert batches == [list(range(start, start + 4)) for start in range(0, 32, 4)]
    assert _deaths(tmp_path) == 1


def test_a_worker_dead_of_a_signal_the_main_process_does_not_handle_is_reported(tmp_path):
    previous = signal.signal(signal.SIGVTALRM, signal.SIG_DFL)
    try:
        _check_reported(tmp_path)
    finally:
        signal.signal(signal.SIGVTALRM, previous)


def _check_reported(tmp_path):
    with _iterator(tmp_path, times=1) as it:
        with pytest.raises(RuntimeError, match='was killed by SIGVTALRM'):
            for _ in range(8):
                it.next()
        # As before: the next call starts new workers and retries the batch.
        assert it.next() == [4, 5, 6, 7]


def test_workers_that_die_of_a_handled_signal_again_and_again_are_reported(
        tmp_path, handled_sigvtalrm):
    with _iterator(tmp_path, times=None) as it:
        with pytest.raises(RuntimeError, match='was killed by SIGVTALRM'):
            for _ in range(8):
                it.next()
    # The first death and three times more: not forever.
    assert _deaths(tmp_path) == 4
