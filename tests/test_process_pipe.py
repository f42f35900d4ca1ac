"""The result pipe of a worker process: Outbox (the worker's end) and Inbox (the main process's).

The Outbox runs in a child process, as in a worker: it ends its process when nobody
reads, which must never be the test run.
"""
import array
import fcntl
import multiprocessing
import os
import termios
import time

import pytest

from researchutils._process_pipe import Inbox, Outbox
from researchutils._process_worker import MainProcess

pytestmark = pytest.mark.timeout(60)

FORK = multiprocessing.get_context('fork')
PAYLOAD_BYTES = 300 * 1024
BIG_BYTES = 3 << 20


def unread_bytes(fd):
    count = array.array('i', [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def payload(size, seed):
    return bytes((seed + k) % 251 for k in range(256)) * (size // 256)


def put_one_and_exit(writer):
    outbox = Outbox(writer.fileno())
    outbox.put('ok', 7, 0, payload(PAYLOAD_BYTES, 1))
    # Exits without flushing: only what put() itself wrote is in the pipe.
    os._exit(0 if unread_bytes(writer.fileno()) > PAYLOAD_BYTES else 1)


def put_big_small_retire(writer, parent_pid, returned):
    outbox = Outbox(writer.fileno())
    outbox.put('ok', 1, 0, payload(BIG_BYTES, 2))
    outbox.put('ok', 2, 0, payload(256, 3))    # must not overtake the big one
    outbox.put('retire')
    returned.send('put() returned')  # before anyone reads the result pipe
    outbox.flush(MainProcess(parent_pid))
    os._exit(0)


def run_child(target, *args):
    reader, writer = FORK.Pipe(duplex=False)
    child = FORK.Process(target=target, args=(writer,) + args)
    child.start()
    writer.close()
    return reader, child


def read_all(inbox, n_messages, timeout=30):
    """The first ``n_messages`` messages that reach ``inbox``, payloads as bytes."""
    messages = []
    deadline = time.monotonic() + timeout
    while len(messages) < n_messages and time.monotonic() < deadline:
        got, ended = inbox.read()
        messages += [message[:3] + (bytes(message[3]),) for message in got]
        if ended:
            break
        time.sleep(0.001)
    return messages


def test_a_message_the_pipe_has_room_for_is_in_it_whole_when_put_returns():
    # Nobody reads (the main process is training): the made batch waits neither behind
    # the pipe's default 64 kB nor for a thread that needs the worker's GIL.
    reader, child = run_child(put_one_and_exit)
    child.join(30)
    try:
        assert child.exitcode == 0, 'put() returned before the message was in the pipe'
        assert read_all(Inbox(reader), 1) == [('ok', 7, 0, payload(PAYLOAD_BYTES, 1))]
    finally:
        reader.close()


def test_a_message_larger_than_the_pipe_does_not_block_put_and_keeps_its_place():
    returned, returned_in_child = FORK.Pipe(duplex=False)
    reader, child = run_child(put_big_small_retire, os.getpid(), returned_in_child)
    returned_in_child.close()
    try:
        # Nothing is read from the result pipe until every put() has returned: a put()
        # that waited for the reader would never return.
        assert returned.poll(30), 'put() waited for the main process to read'
        assert returned.recv() == 'put() returned'
        got = read_all(Inbox(reader), 3)
        child.join(30)
    finally:
        reader.close()
        returned.close()
    assert got == [('ok', 1, 0, payload(BIG_BYTES, 2)), ('ok', 2, 0, payload(256, 3)),
                   ('retire', None, None, b'')]
    assert child.exitcode == 0
