"""MessageQueue: the bounded FIFO between the training thread and SlackReport's poster.

Offering never blocks: a full queue refuses what is offered (unless told
otherwise), and the caller keeps it for a later offer. Taking waits at most
the timeout given.
"""
import collections
import threading

__all__ = ['MessageQueue']


class MessageQueue(object):
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

    def __init__(self, size):
        self._items = collections.deque()
        self._size = size
        self._closed = False
        self._condition = threading.Condition()
        self.accepted = 0

    def offer(self, item, bounded=True):
        """Appends ``item`` unless the queue is full (or closed); never blocks."""
        with self._condition:
            if self._closed or (bounded and len(self._items) >= self._size):
                return False
            self._items.append(item)
            self.accepted += getattr(item, 'messages', 1)
            self._condition.notify()
            return True

    def take_following(self, predicate):
        """Removes and returns the items at the front for which ``predicate`` holds."""
        taken = []
        with self._condition:
            while self._items and predicate(self._items[0]):
                taken.append(self._items.popleft())
        return taken

    def take(self, timeout):
        """The next item; None when closed and empty, or after ``timeout`` seconds."""
        with self._condition:
            if not self._items and not self._closed:
                self._condition.wait(timeout)
            return self._items.popleft() if self._items else None

    @property
    def finished(self):
        with self._condition:
            return self._closed and not self._items

    @property
    def empty(self):
        with self._condition:
            return not self._items

    def close(self):
        with self._condition:
            self._closed = True
            self._condition.notify_all()
