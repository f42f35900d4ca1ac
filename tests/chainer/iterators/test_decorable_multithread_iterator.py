import threading
import time

import pytest

from researchutils.chainer.iterators import DecorableMultithreadIterator
from tests.support.iterators import raise_timeout_error, slow_item

pytestmark = pytest.mark.timeout(60)


def thread_name(dataset, index):
    return threading.current_thread().name


def test_examples_are_made_in_worker_threads():
    with DecorableMultithreadIterator(list(range(16)), 8, n_threads=3,
                                      decor_fun=thread_name) as it:
        names = {name for _ in range(3) for name in it.next()}
    assert names and all(name.startswith('DecorableMultithreadIterator-') for name in names)


def test_timeout_error_from_decor_fun_is_raised_not_waited_on():
    with DecorableMultithreadIterator(list(range(4)), 2, decor_fun=raise_timeout_error) as it:
        with pytest.raises(TimeoutError, match='the camera did not answer') as info:
            it.next()
    assert any('dataset index' in note for note in info.value.__notes__)


def test_worker_traceback_shows_decor_fun():
    with DecorableMultithreadIterator(list(range(4)), 2, decor_fun=raise_timeout_error) as it:
        with pytest.raises(TimeoutError) as info:
            it.next()
    assert any(entry.name == 'raise_timeout_error' for entry in info.traceback)


def test_finalize_stops_worker_threads():
    it = DecorableMultithreadIterator(list(range(16)), 4, n_threads=3, decor_fun=thread_name)
    it.next()
    it.finalize()
    deadline = time.monotonic() + 60  # generous: a busy machine schedules threads late
    while any(t.name.startswith('DecorableMultithreadIterator-') for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_worker_threads_are_daemons():
    with DecorableMultithreadIterator(list(range(16)), 4, n_threads=2,
                                      decor_fun=thread_name) as it:
        it.next()
        workers = [t for t in threading.enumerate()
                   if t.name.startswith('DecorableMultithreadIterator-')]
        assert workers and all(t.daemon for t in workers)


@pytest.mark.parametrize('n_threads,error', [(0, ValueError), (-1, ValueError),
                                             (1.5, TypeError), (None, TypeError)])
def test_bad_n_threads_is_rejected_naming_it(n_threads, error):
    with pytest.raises(error, match='n_threads') as info:
        DecorableMultithreadIterator(list(range(4)), 2, n_threads=n_threads)
    assert repr(n_threads) in str(info.value)


def test_finalize_from_another_thread_stops_a_waiting_next_with_a_clear_error():
    it = DecorableMultithreadIterator(list(range(8)), 4, n_threads=1, decor_fun=slow_item)
    timer = threading.Timer(0.1, it.finalize)
    timer.start()
    with pytest.raises(RuntimeError, match='finalize'):
        it.next()
    timer.join(10)


def test_next_after_finalize_starts_new_threads_as_chainer_does():
    it = DecorableMultithreadIterator(list(range(8)), 2, shuffle=False, n_threads=1)
    assert it.next() == [0, 1]
    it.finalize()
    assert it.next() == [2, 3]
    it.reset()
    assert it.next() == [0, 1]
    it.finalize()
