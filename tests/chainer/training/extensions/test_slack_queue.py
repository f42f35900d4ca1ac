"""The bounded queue between the training thread and the poster (_background)."""
import threading
import time

import pytest

from researchutils.chainer.training.extensions._background import MessageQueue
from tests.support.slack_runs import (
    is_table,
    make_report,
    posted_column,
    reporting_trainer,
)

pytestmark = pytest.mark.timeout(30)


# A full queue --------------------------------------------------------------------------

def test_full_queue_keeps_rows_pending_for_the_next_report(server, tmp_path):
    server.slow(0.05)
    report = make_report(server, queue_size=1)
    trainer = reporting_trainer(tmp_path, report, stop_iteration=20, log_every=1, report_every=1)
    trainer.run()
    tables = [text for text in server.texts() if is_table(text)]
    assert len(tables) < 20  # some reports carried several rows
    assert posted_column(server, 'iteration') == [str(i) for i in range(1, 21)]


# The queue itself ----------------------------------------------------------------------

def test_offer_past_the_size_is_refused_unless_unbounded():
    queue = MessageQueue(size=2)
    assert [queue.offer('a'), queue.offer('b'), queue.offer('c')] == [True, True, False]
    assert queue.offer('end', bounded=False)
    assert [queue.take(timeout=0.1) for _ in range(3)] == ['a', 'b', 'end']


def test_take_from_an_empty_queue_returns_none_after_its_timeout():
    queue = MessageQueue(size=1)
    started = time.monotonic()
    assert queue.take(timeout=0.2) is None
    assert 0.15 <= time.monotonic() - started < 2.0


def test_take_wakes_as_soon_as_an_item_is_offered():
    queue = MessageQueue(size=1)
    timer = threading.Timer(0.1, queue.offer, args=('late',))
    timer.start()
    started = time.monotonic()
    assert queue.take(timeout=10.0) == 'late'
    assert time.monotonic() - started < 5.0
    timer.join()


def test_closed_queue_refuses_offers_and_finishes_once_emptied():
    queue = MessageQueue(size=4)
    queue.offer('a')
    queue.close()
    assert not queue.offer('b') and not queue.offer('c', bounded=False)
    assert not queue.finished
    assert queue.take(timeout=0.1) == 'a'
    assert queue.finished and queue.take(timeout=10.0) is None


def test_take_following_removes_only_the_leading_items_that_match():
    queue = MessageQueue(size=4)
    for item in ['row 1', 'row 2', 'file', 'row 3']:
        queue.offer(item)
    assert queue.take_following(lambda item: item.startswith('row')) == ['row 1', 'row 2']
    assert queue.take(timeout=0.1) == 'file'


def test_accepted_counts_the_messages_an_item_stands_for():
    class ThreeTexts(object):
        messages = 3

    queue = MessageQueue(size=2)
    queue.offer(ThreeTexts())
    queue.offer('one')
    queue.offer('refused')
    assert queue.accepted == 4
