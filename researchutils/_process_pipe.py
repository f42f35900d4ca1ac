"""The pipe between a worker process and the main process (private).

Each worker sends its results through a one-way pipe of its own, whose write
end only that worker holds. A message is a frame: the sizes of its two parts,
the pickle of ``(kind, batch_id, start)``, and the payload, bytes that the
worker pickled (they travel as they are, not pickled again).

The worker's end, :class:`Outbox`, sends from a thread of its own, so the worker
goes on making examples while a large message waits for the main process. The
main process's end, :class:`Inbox`, reads without blocking, a frame at a time: a
partly arrived message never blocks it, and a worker that dies half-way through
a message ends its pipe, the half-sent message being dropped.
"""
import os
import pickle
import queue
import struct
import threading

# Seconds an idle worker waits for a task before it checks that the main process lives;
# also the longest the main process sleeps between looks at its workers.
IDLE_CHECK_S = 1.0
# The sizes of the two parts of a message: its head and its payload.
_FRAME_HEADER = struct.Struct('!QQ')


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Outbox(object):
    """Sends a worker's messages from a thread of its own.

    Making examples goes on while a large message waits for the main process,
    which reads only inside ``next()``.
    """

    def __init__(self, fd):
        self._fd = fd
        self._messages = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send_all, daemon=True)
        self._thread.start()

    def put(self, kind, batch_id=None, start=None, payload=b''):
        self._messages.put((kind, batch_id, start, payload))

    def flush(self, main_process):
        """Waits until every message is sent, or ``main_process`` (its ``is_alive()``) is gone."""
        self._messages.put(None)
        while self._thread.is_alive() and main_process.is_alive():
            self._thread.join(IDLE_CHECK_S)

    def _send_all(self):
        while True:
            message = self._messages.get()
            if message is None:
                return
            kind, batch_id, start, payload = message
            head = pickle.dumps((kind, batch_id, start), protocol=pickle.HIGHEST_PROTOCOL)
            try:
                _write_all(self._fd, _FRAME_HEADER.pack(len(head), len(payload)) + head)
                _write_all(self._fd, payload)
            except BrokenPipeError:
                # The main process closed the pool, or is gone: nobody will read.
                os._exit(0)


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

