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
import array
import os
import pickle
import queue
import struct
import threading

try:
    import fcntl
    import termios
except ImportError:  # not a POSIX system: every message goes through the sender thread
    fcntl = None

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


def _widen(fd):
    """Asks the pipe of ``fd`` to hold ``_PIPE_BYTES``; returns what it holds (None: unknown)."""
    if fcntl is None or not hasattr(fcntl, 'F_GETPIPE_SZ'):
        return None
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:  # over this user's limit of pipe memory: keep the size it has
        pass
    return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def _unread_bytes(fd):
    count = array.array('i', [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def _write_all(fd, data):
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

    def __init__(self, fd):
        self._fd = fd
        self._capacity = _widen(fd)
        self._messages = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0  # messages given to the thread and not yet written
        self._thread = threading.Thread(target=self._send_all, daemon=True)
        self._thread.start()

    def put(self, kind, batch_id=None, start=None, payload=b''):
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

    def flush(self, main_process):
        """Waits until every message is sent, or ``main_process`` (its ``is_alive()``) is gone."""
        self._messages.put(None)
        while self._thread.is_alive() and main_process.is_alive():
            self._thread.join(IDLE_CHECK_S)

    def _send_all(self):
        while True:
            frame = self._messages.get()
            if frame is None:
                return
            self._write(frame)
            with self._lock:
                self._waiting -= 1

    def _write(self, frame):
        try:
            for part in frame:
                _write_all(self._fd, part)
        except BrokenPipeError:
            # The main process closed the pool, or is gone: nobody will read.
            os._exit(0)


def _frame(kind, batch_id, start, payload):
    """A message as the two parts written: the sizes and the head, then the payload."""
    head = pickle.dumps((kind, batch_id, start), protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME_HEADER.pack(len(head), len(payload)) + head, payload


def _frame_size(frame):
    return sum(memoryview(part).nbytes for part in frame)


class Inbox(object):
    """The main process's end of one worker's result pipe, read without blocking."""

    def __init__(self, connection):
        self.connection = connection
        self._fd = connection.fileno()
        os.set_blocking(self._fd, False)
        self._header = b''
        self._head_size = 0
        self._body = None
        self._filled = 0

    def read(self):
        """Returns the messages completed by what the pipe holds now, and whether it ended.

        A message is ``(kind, batch_id, start, payload)``, the payload a
        memoryview of the bytes sent. Once the worker's end is closed, a message
        it had begun is lost.
        """
        messages = []
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

