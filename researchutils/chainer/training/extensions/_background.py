"""The background writing the reporting extensions share: a bounded queue and a writer thread.

SlackReport, TensorBoardReport and MLflowReport never write on the training thread: it
offers items to a :class:`MessageQueue` and returns at once, and a
:class:`BackgroundWriter` (a daemon thread) takes them and writes them, retrying with
back-off what its subclass calls transient. Offering never blocks: a full queue refuses
what is offered (unless told otherwise), and the caller keeps it for a later offer. Taking
waits at most the timeout given. :meth:`BackgroundWriter.close` waits a bounded time for
the queue to empty and then gives up what is left, which the subclass may keep (MLflowReport
writes it to a file). Tests: tests/chainer/training/extensions/test_background.py, and the
tests of each extension.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeGuard, TypeVar, TypeVarTuple, Unpack, overload

__all__ = ['BackgroundWriter', 'MessageQueue']

ItemT = TypeVar('ItemT')
#: Seconds :meth:`BackgroundWriter.close` waits before it says that it waits.
NOTICE_AFTER = 3.0
TakenT = TypeVar('TakenT')


class MessageQueue(Generic[ItemT]):
    """A bounded FIFO of messages between the training thread and the poster's thread.

    An item counts as its ``messages`` attribute (1 without one) in
    :attr:`accepted`, the messages ever accepted.

    Example:
        >>> queue = MessageQueue(size=1)
        >>> queue.offer('a'), queue.offer('b'), queue.offer('c', bounded=False)
        (True, False, True)
        >>> queue.take(timeout=0.1), queue.take(timeout=0.1)
        ('a', 'c')
    """

    def __init__(self, size: int) -> None:
        self._items: collections.deque[ItemT] = collections.deque()
        self._size = size
        self._closed = False
        self._condition = threading.Condition()
        self.accepted = 0

    def offer(self, item: ItemT, bounded: bool = True) -> bool:
        """Appends ``item`` unless the queue is full (or closed); never blocks."""
        with self._condition:
            if self._closed or (bounded and len(self._items) >= self._size):
                return False
            self._items.append(item)
            self.accepted += getattr(item, 'messages', 1)
            self._condition.notify()
            return True

    # A predicate that is a TypeGuard (the poster's ``_Rows.joins``) narrows what it takes.
    @overload
    def take_following(self, predicate: Callable[[ItemT], TypeGuard[TakenT]]
                       ) -> list[TakenT]: ...

    @overload
    def take_following(self, predicate: Callable[[ItemT], bool]) -> list[ItemT]: ...

    def take_following(self, predicate: Callable[[ItemT], TypeGuard[TakenT]]
                       | Callable[[ItemT], bool]) -> list[TakenT] | list[ItemT]:
        """Removes and returns the items at the front for which ``predicate`` holds."""
        taken: list[ItemT] = []
        with self._condition:
            while self._items and predicate(self._items[0]):
                taken.append(self._items.popleft())
        return taken

    def take(self, timeout: float) -> ItemT | None:
        """The next item; None when closed and empty, or after ``timeout`` seconds."""
        with self._condition:
            if not self._items and not self._closed:
                self._condition.wait(timeout)
            return self._items.popleft() if self._items else None

    @property
    def finished(self) -> bool:
        with self._condition:
            return self._closed and not self._items

    @property
    def empty(self) -> bool:
        with self._condition:
            return not self._items

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def drain(self) -> list[ItemT]:
        """Removes and returns every item left."""
        with self._condition:
            items = list(self._items)
            self._items.clear()
            return items


# The arguments of one send, which BackgroundWriter.deliver passes on.
_SendArgs = TypeVarTuple('_SendArgs')


class Skip(Exception):
    """Raised by a send that cannot succeed (the reason is logged already); not retried."""


class BackgroundWriter(Generic[ItemT]):
    """A daemon thread writing the items of a bounded queue, with retries and back-off.

    :meth:`offer` queues an item and starts the thread unless it runs; it
    never blocks. The thread hands each item to :meth:`write` (the
    subclass's), ends when :meth:`close` has been called and the queue is
    empty, or after ``idle_timeout`` seconds with nothing to write (the next
    item starts it again), so it never outlives a run that was not
    finalized. A subclass sends through :meth:`deliver`, which retries while
    :meth:`wait_before_retry` (the subclass's) gives a wait, and stops at
    once when :meth:`close` gave up waiting.

    Args:
        name (str): The thread's name (the extension's).
        queue_size (int): Items the queue holds (``offer(bounded=False)``
            passes the bound).
        max_retries (int): Retries of one send during an outage (the
            subclass's :meth:`wait_before_retry` reads it).
        retry_backoff (float): Seconds before the first retry, then doubled.
        max_retry_backoff (float): Upper bound of the wait between retries.
        idle_timeout (float): Seconds the thread waits with nothing to write
            before it ends.

    Example:
        >>> written = []
        >>> class Collector(BackgroundWriter[str]):
        ...     def write(self, item):
        ...         if self.deliver(written.append, item):
        ...             self.credit(1)
        >>> collector = Collector('Collector', queue_size=4)
        >>> collector.offer('hello')
        True
        >>> collector.close(timeout=5.0), written  # items not written, items written
        (0, ['hello'])
    """

    def __init__(self, name: str, queue_size: int, max_retries: int = 8,
                 retry_backoff: float = 1.0, max_retry_backoff: float = 30.0,
                 idle_timeout: float = 60.0) -> None:
        self.name = name
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self.idle_timeout = idle_timeout
        self.queue: MessageQueue[ItemT] = MessageQueue(queue_size)
        self.abort = threading.Event()  # set when close gave up: sends stop at once
        self.disabled: str | None = None  # why nothing more can be written, once known
        self._delivered = 0
        self._count_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()

    def offer(self, item: ItemT, bounded: bool = True) -> bool:
        """Queues ``item`` (False when the queue is full) and starts the thread; never blocks."""
        accepted = self.queue.offer(item, bounded=bounded)
        self._start()
        return accepted

    def close(self, timeout: float, notice: Callable[[float], None] | None = None) -> int:
        """Waits up to ``timeout`` s for the queue to empty; returns the items not written.

        After the timeout the writer gives up what is left (a send under way
        finishes on its own, unwaited for: the thread is a daemon). When the
        wait lasts over :data:`NOTICE_AFTER` seconds, ``notice`` is called then
        with the seconds it may still last, to say so.
        """
        self.queue.close()
        if not self.queue.finished:
            self._start()
        with self._thread_lock:
            thread = self._thread
        if thread is not None:
            if notice is not None and timeout > NOTICE_AFTER:
                thread.join(NOTICE_AFTER)
                if thread.is_alive():
                    notice(timeout - NOTICE_AFTER)
                    thread.join(timeout - NOTICE_AFTER)
            else:
                thread.join(timeout)
            if thread.is_alive():
                self.abort.set()
        with self._count_lock:
            return self.queue.accepted - self._delivered

    def credit(self, items: int) -> None:
        """Counts ``items`` as written (what :meth:`close` does not report)."""
        with self._count_lock:
            self._delivered += items

    def write(self, item: ItemT) -> None:
        """Writes one item, on the thread (the subclass's); never raises."""
        raise NotImplementedError

    def wait_before_retry(self, error: Exception, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``error``, or None to give up."""
        return None

    def recovered(self) -> None:
        """Called when a send succeeds (the subclass may log the end of an outage)."""

    def backoff(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (from 0): doubled each time, bounded."""
        return float(min(self.retry_backoff * 2 ** attempt, self.max_retry_backoff))

    def deliver(self, send: Callable[[Unpack[_SendArgs]], object],
                *args: Unpack[_SendArgs]) -> bool:
        """Sends one item, retrying; returns whether it was sent."""
        attempt = 0
        while True:
            if self.disabled is not None or self.abort.is_set():
                return False
            try:
                send(*args)
            except Skip:
                return False
            except Exception as error:
                wait = self.wait_before_retry(error, attempt)
                if wait is None or self.abort.wait(wait):
                    return False
                attempt += 1
                continue
            self.recovered()
            return True

    def _start(self) -> None:
        with self._thread_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        idle_since = time.monotonic()
        while not self.queue.finished:
            item = self.queue.take(timeout=min(1.0, self.idle_timeout))
            if item is None:
                if time.monotonic() - idle_since >= self.idle_timeout:
                    with self._thread_lock:
                        # An item offered before _start() is seen here, so none is stranded.
                        if self.queue.empty:
                            self._thread = None
                            return
                continue
            idle_since = time.monotonic()
            try:
                self.write(item)
            except Exception:
                # write never raises by contract; this keeps an unforeseen bug from
                # killing the thread and every later item.
                logging.getLogger(__name__).exception('%s: an item could not be written',
                                                      self.name)
