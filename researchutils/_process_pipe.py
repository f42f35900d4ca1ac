"""The pipe between a worker process and the main process (private).

Each worker sends its results through a one-way pipe of its own, whose write
end only that worker holds. A message is a frame: the sizes of its two parts,
the pickle of ``(kind, batch_id, start)``, and the payload, bytes that the
worker pickled (they travel as they are, not pickled again).

The worker's end, :class:`Outbox`, writes a message itself when the pipe has room
for all of it, and otherwise hands it to a thread of its own, so the worker goes
on making examples while a large message waits for the main process. The
main process's end, :class:`Inbox`, reads without blocking, a frame at a time: a
partly arrived message never blocks it, and a worker that dies half-way through
a message ends its pipe, the half-sent message being dropped.
"""
from __future__ import annotations

import array
import os
import pickle
import queue
import struct
import threading
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

try:
    import fcntl
    import termios
except ImportError:  # not a POSIX system: every message goes through the sender thread
    _HAS_FCNTL = False
else:
    _HAS_FCNTL = True

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

# Seconds an idle worker waits for a task before it checks that the main process lives;
# also the longest the main process sleeps between looks at its workers.
IDLE_CHECK_S = 1.0
# The sizes of the two parts of a message: its head and its payload.
_FRAME_HEADER = struct.Struct('!QQ')
# Bytes a result pipe is asked to hold (Linux's default limit for an unprivileged
# process): a batch of a few hundred kB then goes in with one write and comes out
# with one read, instead of 64 kB at a time, each a wake-up of both processes.
_PIPE_BYTES = 1 << 20
_PAGE_BYTES = 4096

#: A message as written: the sizes and the head, then the payload.
Frame: TypeAlias = tuple[bytes, bytes]
#: A message as read: ``(kind, batch_id, start, payload)``; ``batch_id`` and ``start`` are
#: None for the messages that are not a chunk's result (``'retire'``, ``'fatal'``).
Message: TypeAlias = tuple[str, int | None, int | None, memoryview]


class _Watched(Protocol):
    """A process as its pipe's writer watches it (``MainProcess`` of the worker)."""

    def is_alive(self) -> bool: ...


def _widen(fd: int) -> int | None:
    """Asks the pipe of ``fd`` to hold ``_PIPE_BYTES``; returns what it holds (None: unknown)."""
    if not _HAS_FCNTL or not hasattr(fcntl, 'F_GETPIPE_SZ'):
        return None
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:  # over this user's limit of pipe memory: keep the size it has
        pass
    return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def _unread_bytes(fd: int) -> int:
    count = array.array('i', [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Outbox(object):
    """Sends a worker's messages, in order, at once when the pipe has room.

    A message that the pipe has room for, with none waiting before it, is
    written by the worker itself. Any other waits for a thread of its own, so
    making examples goes on while a large message waits for the main process,
    which reads only inside ``next()``. (Were every message handed to that
    thread, each would wait for the GIL, which the worker holds while it makes
    the next examples: a batch made long ago could reach the main process
    milliseconds late, once per 64 kB.) Only the worker's own thread calls
    :meth:`put`.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._capacity = _widen(fd)
        self._messages: queue.SimpleQueue[Frame | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0  # messages given to the thread and not yet written
        self._thread = threading.Thread(target=self._send_all, daemon=True)
        self._thread.start()

    def put(self, kind: str, batch_id: int | None = None, start: int | None = None,
            payload: bytes = b'') -> None:
        frame = _frame(kind, batch_id, start, payload)
        with self._lock:
            # A page to spare: what the pipe holds is counted in whole pages.
            direct = (not self._waiting and self._capacity is not None
                      and self._capacity - _unread_bytes(self._fd)
                      >= _frame_size(frame) + _PAGE_BYTES)
            if not direct:
                self._waiting += 1
                self._messages.put(frame)
        if direct:  # nothing is being written, and the write cannot block
            self._write(frame)

    def flush(self, main_process: _Watched) -> None:
        """Waits until every message is sent, or ``main_process`` (its ``is_alive()``) is gone."""
        self._messages.put(None)
        while self._thread.is_alive() and main_process.is_alive():
            self._thread.join(IDLE_CHECK_S)

    def _send_all(self) -> None:
        while True:
            frame = self._messages.get()
            if frame is None:
                return
            self._write(frame)
            with self._lock:
                self._waiting -= 1

    def _write(self, frame: Frame) -> None:
        try:
            for part in frame:
                _write_all(self._fd, part)
        except BrokenPipeError:
            # The main process closed the pool, or is gone: nobody will read.
            os._exit(0)


def _frame(kind: str, batch_id: int | None, start: int | None, payload: bytes) -> Frame:
    """A message as the two parts written: the sizes and the head, then the payload."""
    head = pickle.dumps((kind, batch_id, start), protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME_HEADER.pack(len(head), len(payload)) + head, payload


def _frame_size(frame: Frame) -> int:
    return sum(memoryview(part).nbytes for part in frame)


class Inbox(object):
    """The main process's end of one worker's result pipe, read without blocking."""

    def __init__(self, connection: Connection[Any, Any]) -> None:
        self.connection = connection
        self._fd = connection.fileno()
        os.set_blocking(self._fd, False)
        self._header = b''
        self._head_size = 0
        self._body: bytearray | None = None
        self._filled = 0

    def read(self) -> tuple[list[Message], bool]:
        """Returns the messages completed by what the pipe holds now, and whether it ended.

        A message is ``(kind, batch_id, start, payload)``, the payload a
        memoryview of the bytes sent. Once the worker's end is closed, a message
        it had begun is lost.
        """
        messages: list[Message] = []
        while True:
            try:
                if self._body is None:
                    chunk = os.read(self._fd, _FRAME_HEADER.size - len(self._header))
                    received = len(chunk)
                    self._header += chunk
                else:
                    received = os.readv(self._fd, [memoryview(self._body)[self._filled:]])
                    self._filled += received
            except BlockingIOError:
                return messages, False
            if not received:
                return messages, True
            if self._body is None and len(self._header) == _FRAME_HEADER.size:
                self._head_size, payload_size = _FRAME_HEADER.unpack(self._header)
                self._body = bytearray(self._head_size + payload_size)
                self._header = b''
                self._filled = 0
            elif self._body is not None and self._filled == len(self._body):
                body = memoryview(self._body)
                messages.append(pickle.loads(body[:self._head_size])
                                + (body[self._head_size:],))
                self._body = None

