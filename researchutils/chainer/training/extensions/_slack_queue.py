"""MessageQueue: the bounded FIFO between the training thread and SlackReport's poster.

Offering never blocks: a full queue refuses what is offered (unless told
otherwise), and the caller keeps it for a later offer. Taking waits at most
the timeout given.
"""
from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Generic, TypeGuard, TypeVar, overload

__all__ = ['MessageQueue']

ItemT = TypeVar('ItemT')
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
