"""Datasets and ``decor_fun`` s shared by the iterator tests.

They live at module level so that worker processes started with ``spawn`` can
unpickle them.
"""
import glob
import os
import signal
import threading
import time

import numpy

from researchutils.chainer.iterators import (
    DecorableMultiprocessIterator,
    DecorableMultithreadIterator,
    DecorableSerialIterator,
)

KINDS = ('serial', 'multithread', 'multiprocess')


def make_iterator(kind, dataset, batch_size, *args, **kwargs):
    """One of the three decorable iterators, with two workers where it has workers."""
    if kind == 'serial':
        return DecorableSerialIterator(dataset, batch_size, *args, **kwargs)
    if kind == 'multithread':
        kwargs.setdefault('n_threads', 2)
        return DecorableMultithreadIterator(dataset, batch_size, *args, **kwargs)
    if kind == 'multiprocess':
        kwargs.setdefault('n_processes', 2)
        return DecorableMultiprocessIterator(dataset, batch_size, *args, **kwargs)
    raise ValueError('unknown kind {!r}'.format(kind))


class LazyRange(object):
    """``n`` items, item ``i`` being ``3 * i``, computed on access; counts the reads."""

    def __init__(self, n):
        self.n = n
        self.reads = 0

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        self.reads += 1
        return 3 * index


def index_and_item(dataset, index):
    return (index, type(index).__name__, dataset[index])


def square(dataset, index):
    return dataset[index] ** 2


def plus_uniform(dataset, index):
    return float(dataset[index]) + numpy.random.uniform()


def random_integers(dataset, index):
    return int(numpy.random.randint(0, 2 ** 62))


def fail_at_five(dataset, index):
    if index == 5:
        raise ValueError('cannot decorate example 5')
    return dataset[index]


def raise_timeout_error(dataset, index):
    raise TimeoutError('the camera did not answer')


def pid_after_sleep(dataset, index):
    time.sleep(0.02)
    return os.getpid()


def slow_item(dataset, index):
    time.sleep(0.3)
    return dataset[index]


def exit_at_four(dataset, index):
    if index == 4:
        os._exit(3)
    return dataset[index]


def kill_self_at_four(dataset, index):
    if index == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return dataset[index]


def unpicklable_example(dataset, index):
    return lambda: index


def index_and_pid(dataset, index):
    time.sleep(0.01)
    return (dataset[index], os.getpid())


def _load_only_in(pid, items):
    if os.getpid() != pid:
        raise RuntimeError('this dataset cannot be loaded in another process')
    return OnlyHere(items)


class OnlyHere(list):
    """A list that pickles, but unpickles only in the process that made it."""

    def __reduce__(self):
        return _load_only_in, (os.getpid(), list(self))


BIG_EXAMPLE_BYTES = 64 << 20


class BigExampleOnSignal(list):
    """A list whose item ``big_index`` becomes a 64 MB array under ``exit_while_sending``.

    ``go_path`` and ``sent_path`` are files through which a test and a worker
    process coordinate; they travel with the dataset under ``spawn`` too.
    """

    def __init__(self, items, big_index, go_path, sent_path):
        super(BigExampleOnSignal, self).__init__(items)
        self.big_index = big_index
        self.go_path = str(go_path)
        self.sent_path = str(sent_path)


def _exit_once_blocked_writing_a_pipe(deadline):
    # /proc/self/task/<tid>/wchan names the kernel function a thread sleeps in:
    # (anon_)pipe_write while a write to a full pipe waits for the reader.
    me = str(threading.get_native_id())
    while time.monotonic() < deadline:
        for task in glob.glob('/proc/self/task/*'):
            try:
                with open(os.path.join(task, 'wchan')) as f:
                    if os.path.basename(task) != me and 'pipe_write' in f.read():
                        os._exit(1)
            except OSError:
                pass
        time.sleep(0.01)
    os._exit(1)


def exit_while_sending(dataset, index):
    """Once ``go_path`` exists, returns the big example and exits while sending it.

    The worker process exits (code 1) as soon as one of its threads waits to
    write the rest of the example into a full pipe, so the main process can
    only ever receive part of that message. It writes its pid to ``sent_path``
    first; later calls, with ``sent_path`` present, just return the example.
    """
    if index != dataset.big_index:
        return dataset[index]
    if not os.path.exists(dataset.sent_path):
        deadline = time.monotonic() + 30
        while not os.path.exists(dataset.go_path) and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(dataset.sent_path, 'w') as f:
            f.write(str(os.getpid()))
        threading.Thread(target=_exit_once_blocked_writing_a_pipe,
                         args=(time.monotonic() + 10,), daemon=True).start()
    return numpy.zeros(BIG_EXAMPLE_BYTES, dtype=numpy.uint8)


class TwoArgumentError(Exception):
    """An exception that pickle cannot rebuild (its __init__ takes two arguments)."""

    def __init__(self, first, second):
        super().__init__('{}-{}'.format(first, second))


def raise_two_argument_error(dataset, index):
    raise TwoArgumentError(index, 'x')


class DiesBySignal(list):
    """A list whose item ``at`` kills the worker that makes it by ``signal_number``.

    ``die_by_signal`` does it the first ``times`` times (None: always), counting in the
    files ``<count_path>.<n>``, which workers of every start method can see.
    """

    def __init__(self, items, at, signal_number, count_path, times=1):
        super(DiesBySignal, self).__init__(items)
        self.at = at
        self.signal_number = signal_number
        self.count_path = str(count_path)
        self.times = times


def die_by_signal(dataset, index):
    if index == dataset.at:
        done = len(glob.glob(glob.escape(dataset.count_path) + '.*'))
        if dataset.times is None or done < dataset.times:
            with open('{}.{}'.format(dataset.count_path, os.getpid()), 'w'):
                pass
            # A handler inherited from the main process by fork would catch it.
            signal.signal(dataset.signal_number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {dataset.signal_number})
            os.kill(os.getpid(), dataset.signal_number)
            time.sleep(60)  # the signal ends the process first
    return dataset[index]


class BlocksFrom(list):
    """A list whose items from ``start`` on make ``block_forever`` never return.

    The worker writes ``<folder>/blocking_<pid>`` first.
    """

    def __init__(self, items, start, folder):
        super(BlocksFrom, self).__init__(items)
        self.start = start
        self.folder = str(folder)


def block_forever(dataset, index):
    if index >= dataset.start:
        with open(os.path.join(dataset.folder, 'blocking_{}'.format(os.getpid())), 'w'):
            pass
        while True:
            time.sleep(1)
    return dataset[index]
