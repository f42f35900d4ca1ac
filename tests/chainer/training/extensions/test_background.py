"""BackgroundWriter, the thread and retry loop SlackReport, TensorBoardReport and MLflowReport
share (_background); its queue is tested with SlackReport's in test_slack_queue.py."""
import threading
import time

import pytest

from researchutils.chainer.training.extensions._background import BackgroundWriter

pytestmark = pytest.mark.timeout(30)


class Flaky(BackgroundWriter):
    """Fails the first ``failures`` sends with OSError, retried ``max_retries`` times."""

    def __init__(self, failures, **options):
        super().__init__('Flaky', queue_size=4, **options)
        self.failures = failures
        self.sent = []
        self.attempts = []
        self.recoveries = 0

    def _send(self, item):
        self.attempts.append(time.monotonic())
        if len(self.attempts) <= self.failures:
            raise OSError('down')
        self.sent.append((item, threading.current_thread().name))

    def write(self, item):
        if self.deliver(self._send, item):
            self.credit(1)

    def wait_before_retry(self, error, attempt):
        return None if attempt >= self.max_retries else self.backoff(attempt)

    def recovered(self):
        self.recoveries += 1


def test_a_failing_send_is_retried_with_doubling_waits_on_the_writer_thread():
    writer = Flaky(3, retry_backoff=0.1, max_retry_backoff=10.0)
    assert writer.offer('item')
    assert writer.close(timeout=10.0) == 0
    assert writer.sent == [('item', 'Flaky')]
    waits = [later - earlier for earlier, later in zip(writer.attempts, writer.attempts[1:])]
    # 0.1, 0.2, 0.4 s: never shorter; longer only by what a busy machine adds.
    for wait, expected in zip(waits, (0.1, 0.2, 0.4)):
        assert expected * 0.95 <= wait < expected + 1.0
    assert writer.recoveries == 1


def test_the_wait_between_retries_is_bounded():
    writer = Flaky(3, retry_backoff=0.05, max_retry_backoff=0.05)
    writer.offer('item')
    writer.close(timeout=10.0)
    waits = [later - earlier for earlier, later in zip(writer.attempts, writer.attempts[1:])]
    assert max(waits) < 0.15


def test_after_its_retries_an_item_is_given_up_and_counted_by_close():
    writer = Flaky(100, max_retries=2, retry_backoff=0.01)
    writer.offer('item')
    assert writer.close(timeout=10.0) == 1
    assert len(writer.attempts) == 3 and writer.sent == []


def test_close_gives_up_waiting_after_its_timeout_and_stops_the_retries():
    writer = Flaky(100, max_retries=100, retry_backoff=0.5, max_retry_backoff=0.5)
    writer.offer('item')
    start = time.monotonic()
    assert writer.close(timeout=0.3) == 1
    assert time.monotonic() - start < 0.5
    attempts = len(writer.attempts)
    time.sleep(0.7)
    assert len(writer.attempts) == attempts  # the abort ended the retry loop


def test_a_full_queue_refuses_without_blocking_unless_told():
    gate = threading.Event()

    class Held(BackgroundWriter):
        def write(self, item):
            gate.wait(10)
            self.credit(1)

    writer = Held('Held', queue_size=1)
    results = [writer.offer(index) for index in range(4)]
    assert results.count(False) >= 1
    assert writer.offer('urgent', bounded=False)
    gate.set()
    assert writer.close(timeout=10.0) == 0


def test_an_idle_thread_ends_and_the_next_item_starts_another():
    writer = Flaky(0, idle_timeout=0.1)
    writer.offer('first')
    deadline = time.monotonic() + 5
    while writer._thread is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writer._thread is None
    writer.offer('second')
    assert writer.close(timeout=10.0) == 0
    assert [item for item, _ in writer.sent] == ['first', 'second']


class Held(BackgroundWriter):
    """Writes an item once :attr:`release` is set; :attr:`started` is set when it begins."""

    def __init__(self):
        super().__init__('Held', queue_size=4)
        self.started = threading.Event()
        self.release = threading.Event()

    def write(self, item):
        self.started.set()
        if self.release.wait(30):
            self.credit(1)


def test_a_close_that_waits_longer_than_the_notice_says_how_long_it_may_still_wait():
    from researchutils.chainer.training.extensions._background import NOTICE_AFTER
    writer = Held()
    notices = []
    writer.offer('item')
    assert writer.started.wait(10)
    try:
        assert writer.close(NOTICE_AFTER + 0.5, notice=notices.append) == 1
    finally:
        writer.release.set()
    assert notices == [pytest.approx(0.5)]
    assert writer.abort.is_set()


def test_a_close_within_the_notice_or_without_one_says_nothing():
    from researchutils.chainer.training.extensions._background import NOTICE_AFTER
    assert NOTICE_AFTER == 3.0
    writer = Held()
    notices = []
    writer.offer('item')
    assert writer.started.wait(10)
    writer.release.set()
    assert writer.close(10.0, notice=notices.append) == 0  # done before the notice is due
    assert notices == []
    short = Held()
    short.offer('item')
    assert short.started.wait(10)
    try:
        assert short.close(0.2, notice=notices.append) == 1  # shorter than the notice
    finally:
        short.release.set()
    assert notices == []


def test_the_defaults_are_eight_retries_from_one_second_up_to_thirty_and_a_minute_idle():
    writer = Held()
    assert (writer.max_retries, writer.retry_backoff, writer.max_retry_backoff,
            writer.idle_timeout) == (8, 1.0, 30.0, 60.0)


def test_the_wait_before_each_retry_doubles_from_retry_backoff_up_to_its_bound():
    writer = BackgroundWriter('W', 1, retry_backoff=0.25, max_retry_backoff=3.0)
    assert [writer.backoff(attempt) for attempt in range(6)] == [
        0.25, 0.5, 1.0, 2.0, 3.0, 3.0]


def test_a_disabled_writer_or_a_skipped_send_sends_nothing_more():
    from researchutils.chainer.training.extensions._background import Skip
    writer = Flaky(failures=0)
    writer.disabled = 'the token was refused'
    assert writer.deliver(writer._send, 'a') is False
    assert writer.attempts == []

    def skip(item):
        writer.attempts.append(item)
        raise Skip()

    writer.disabled = None
    assert writer.deliver(skip, 'b') is False
    assert writer.attempts == ['b']  # tried once, never retried


def test_a_close_of_exactly_the_notice_s_length_says_nothing():
    from researchutils.chainer.training.extensions._background import NOTICE_AFTER
    writer = Held()
    notices = []
    writer.offer('item')
    assert writer.started.wait(10)
    try:
        assert writer.close(NOTICE_AFTER, notice=notices.append) == 1
    finally:
        writer.release.set()
    assert notices == []


def test_the_queue_refuses_past_its_size_unless_told_and_counts_messages():
    from researchutils.chainer.training.extensions._background import MessageQueue

    class Rows(object):
        messages = 3

    queue = MessageQueue(size=2)
    assert [queue.offer('a'), queue.offer(Rows()), queue.offer('c')] == [True, True, False]
    assert queue.offer('d', bounded=False) is True
    assert queue.accepted == 5  # 'a', the three rows of Rows, 'd'
    assert queue.take_following(lambda item: isinstance(item, str)) == ['a']
    assert isinstance(queue.take(timeout=0.1), Rows)
    assert queue.drain() == ['d'] and queue.empty and not queue.finished
    started = time.monotonic()
    assert queue.take(timeout=0.2) is None  # empty and open: waits its timeout
    assert time.monotonic() - started >= 0.15
    queue.offer('e')
    queue.close()
    assert queue.offer('f', bounded=False) is False  # closed
    assert queue.take(timeout=30) == 'e' and queue.take(timeout=30) is None
    assert queue.finished


class Collector(BackgroundWriter):
    """Writes items into :attr:`written`; an item 'bad' raises inside write."""

    def __init__(self, **options):
        super().__init__('Collector', queue_size=4, **options)
        self.written = []

    def write(self, item):
        if item == 'bad':
            raise RuntimeError('a bug in write')
        self.written.append(item)
        self.credit(1)


def test_an_error_in_write_is_logged_naming_the_writer_and_later_items_are_written(caplog):
    writer = Collector()
    writer.offer('bad')
    writer.offer('good')
    assert writer.close(30) == 1
    assert writer.written == ['good']
    [record] = [record for record in caplog.records if record.exc_info]
    assert record.getMessage() == 'Collector: an item could not be written'
    assert record.name == 'researchutils.chainer.training.extensions._background'


def test_the_thread_is_a_daemon_that_ends_when_idle_and_starts_again_for_a_new_item():
    writer = Collector(idle_timeout=0.2)
    writer.offer('a')
    assert writer._thread.daemon  # never keeps a process from exiting
    deadline = time.monotonic() + 30
    while writer._thread is not None:
        assert time.monotonic() < deadline, 'the idle thread did not end'
        time.sleep(0.05)
    writer.offer('b')
    assert writer.close(30) == 0
    assert writer.written == ['a', 'b']
