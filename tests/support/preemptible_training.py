"""A small deterministic training run that a test can signal, stop and resume.

:func:`build_trainer` makes a plain Chainer Trainer (LogReport, ``snapshot(autoload=True)``
at every epoch, :class:`PreemptionSnapshot`) whose model draws from NumPy's global random
state (dropout) and from Python's ``random`` (a noise scale), on 18 examples in batches of 4,
so epochs end mid-batch, at iterations 5, 9, 14 and 18. Run as a script
(``python -m tests.support.preemptible_training OUT ...``) it trains to the end and writes
``final.npz`` (weights, optimizer state, random states) and ``log_rows.json``; the
handshake options make it wait at chosen points so that a test can signal it there
without sleeping.
"""
import argparse
import array
import fcntl
import glob
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import termios
import threading
import time

import chainer
import chainer.functions as F
import chainer.links as L
import numpy
from chainer import training
from chainer.datasets import TupleDataset
from chainer.iterators import SerialIterator
from chainer.serializers import DictionarySerializer
from chainer.training import extensions

from researchutils.chainer.data_loading import DataManager, RandomSampler
from researchutils.chainer.iterators import (
    DecorableMultiprocessIterator,
    DecorableMultithreadIterator,
    DecorableSerialIterator,
)
from researchutils.chainer.training.extensions import PreemptionSnapshot

N_EXAMPLES = 18
BATCH_SIZE = 4
STOP_ITERATION = 20
#: Iterations after which an epoch has ended.
EPOCH_ENDS = (5, 9, 14, 18)
ITERATOR_KINDS = ('chainer_serial', 'serial', 'serial_seeded', 'multithread',
                  'multithread_seeded', 'multithread_shuffle_only', 'multiprocess_seeded',
                  'data_manager', 'data_manager_workers_seeded')
HANDSHAKE_TIMEOUT = 60.
HOLD_TIMEOUT = 300.


def wait_for(path, timeout=HANDSHAKE_TIMEOUT):
    """Waits until ``path`` exists; raises TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError('{!r} did not appear within {} s'.format(path, timeout))
        time.sleep(0.002)


def wait_for_any(pattern, timeout=HANDSHAKE_TIMEOUT):
    """Waits until a file matches the glob ``pattern``; returns its path."""
    deadline = time.monotonic() + timeout
    while True:
        found = glob.glob(pattern)
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise TimeoutError('no file like {!r} appeared within {} s'.format(pattern, timeout))
        time.sleep(0.002)


def touch(path, text=''):
    """Writes ``text`` to ``path`` whole: a reader that sees the file sees all of it."""
    partial = '{}.{}.partial'.format(path, os.getpid())
    with open(partial, 'w') as f:
        f.write(text)
    os.replace(partial, path)


def noisy_example(dataset, index):
    """``decor_fun``: the example plus NumPy noise (seeded iterators seed it per example)."""
    x, t = dataset[index]
    return x + numpy.random.normal(0., 0.05, x.shape).astype(numpy.float32), t


class HoldInWorker(object):
    """``decor_fun`` or ``transforms`` whose worker processes hold mid-task when a test asks.

    It makes what ``function`` makes (None: it returns its one argument, a batch dict,
    as it is). In a worker process, while ``folder/NAME`` exists and
    ``folder/NAME.release`` does not, every task first writes
    ``folder/NAME.making_<pid>`` and waits for the release: the main
    process soon waits for a batch that no worker can finish, and a test signals the
    processes meanwhile (:func:`report_waiting` says when).
    """

    def __init__(self, folder, function=None, name='hold'):
        self.folder = folder
        self.function = function
        self.name = name
        # Batches made in the main process (DataManager.batch_keys) never hold.
        self._main_pid = os.getpid()

    def __call__(self, *arguments):
        hold = os.path.join(self.folder, self.name)
        if (os.getpid() != self._main_pid and os.path.exists(hold)
                and not os.path.exists(hold + '.release')):
            touch('{}.making_{}'.format(hold, os.getpid()), str(os.getpid()))
            # Long: a SLURM test waits here for the job's time limit.
            wait_for(hold + '.release', HOLD_TIMEOUT)
        if self.function is None:
            return arguments[0]
        return self.function(*arguments)


def _unread_bytes(fd):
    count = array.array('i', [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def _stuck_waiting(thread_id):
    """Whether thread ``thread_id`` waits for a batch that no result on its way completes.

    True when it sleeps in the poll of ``ProcessPool._wait_for`` (not merely passing
    through it), its batch is not complete, and no worker's pipe holds a byte of a result.
    """
    frame = innermost = sys._current_frames().get(thread_id)
    pool = pending = None
    while frame is not None:
        code = frame.f_code
        if code.co_name == '_wait_for' and code.co_filename.endswith('_process_pool.py'):
            pool, pending = frame.f_locals['self'], frame.f_locals['pending']
        frame = frame.f_back
    if pool is None or pending.done or innermost.f_code.co_name != 'select':
        return False
    inboxes = [worker.inbox for worker in list(pool._workers.values())]
    return all(inbox._body is None and not inbox._header
               and _unread_bytes(inbox.connection.fileno()) == 0 for inbox in inboxes)


def report_waiting(folder, name, n_workers):
    """Writes ``folder/NAME.waiting`` once ``n_workers`` workers hold (:class:`HoldInWorker`)
    and this process's main thread is stuck waiting for a batch of its process pool.

    From then on, until the release, the main process waits for a batch that no worker
    can finish: the moment a cluster's signal finds a run whose data comes from
    workers. A thread of its own looks at the main thread's stack and the pool's pipes.
    """
    hold = os.path.join(folder, name)
    main = threading.main_thread().ident

    def watch():
        while not (len(glob.glob(glob.escape(hold) + '.making_*')) >= n_workers
                   and _stuck_waiting(main)):
            time.sleep(0.002)
        touch(hold + '.waiting', str(os.getpid()))

    threading.Thread(target=watch, daemon=True, name='report-waiting-' + name).start()


def release_when_signalled(trainer, folder):
    """Releases the workers that hold (:class:`HoldInWorker`) once PreemptionSnapshot has
    noted a signal: for a scheduler that signals in its own time (a time limit)."""
    preemption = trainer.get_extension('PreemptionSnapshot')

    def watch():
        while preemption.signal_number is None:
            time.sleep(0.002)
        for name in ('hold', 'hold_validation'):
            touch(os.path.join(folder, name + '.release'))

    threading.Thread(target=watch, daemon=True, name='release-when-signalled').start()


class BlockOnSave(chainer.Link):
    """No parameters; while saved with ``folder/block`` present, waits for ``folder/release``.

    It writes ``folder/saving`` first, so that a test knows the snapshot is being written.
    """

    def __init__(self, folder):
        super(BlockOnSave, self).__init__()
        self.folder = folder

    def serialize(self, serializer):
        super(BlockOnSave, self).serialize(serializer)
        block = os.path.join(self.folder, 'block')
        if isinstance(serializer, chainer.Serializer) and os.path.exists(block):
            os.remove(block)
            touch(os.path.join(self.folder, 'saving'))
            wait_for(os.path.join(self.folder, 'release'))


class NoisyMLP(chainer.Chain):

    def __init__(self, block_folder=None):
        super(NoisyMLP, self).__init__()
        with self.init_scope():
            self.l1 = L.Linear(4, 8)
            self.l2 = L.Linear(8, 3)
            if block_folder is not None:
                self.blocker = BlockOnSave(block_folder)

    def forward(self, x):
        h = F.dropout(F.relu(self.l1(x)), 0.3)
        return self.l2(h * (1. + 0.1 * random.random()))


def _dataset():
    rng = numpy.random.RandomState(1)
    x = rng.standard_normal((N_EXAMPLES, 4)).astype(numpy.float32)
    t = (x[:, 0] > 0).astype(numpy.int32) + (x[:, 1] > 0.5).astype(numpy.int32)
    return TupleDataset(x, t)


def _dict_batch(batch, device=None):
    return chainer.dataset.to_device(device, batch['data']), chainer.dataset.to_device(
        device, batch['label'])


def make_iterator(kind, dataset, hold_folder=None):
    """The iterator ``kind`` over ``dataset`` and the converter its batches need.

    With ``hold_folder``, the worker processes' function is a :class:`HoldInWorker`.
    """
    if kind.startswith('data_manager'):
        examples = [{'data': x, 'label': t} for x, t in dataset]
        seed = 5 if kind.endswith('_seeded') else None
        n_processes = 2 if '_workers' in kind else 0
        transforms = None if hold_folder is None else HoldInWorker(hold_folder)
        manager = DataManager(examples, BATCH_SIZE, n_processes, transforms,
                              sampler_cls=RandomSampler, seed=seed)
        return manager.get_iterator(), _dict_batch
    return _make_example_iterator(kind, dataset, hold_folder), chainer.dataset.concat_examples


def _make_example_iterator(kind, dataset, hold_folder=None):
    if kind == 'chainer_serial':
        return SerialIterator(dataset, BATCH_SIZE, shuffle=True)
    if kind == 'multithread_shuffle_only':  # unseeded shuffle, no decor_fun
        return DecorableMultithreadIterator(dataset, BATCH_SIZE, shuffle=True, n_threads=2)
    seed = 5 if kind.endswith('_seeded') else None
    kind = kind.replace('_seeded', '')
    decor_fun = noisy_example if hold_folder is None else HoldInWorker(hold_folder, noisy_example)
    arguments = dict(shuffle=True, decor_fun=decor_fun, seed=seed)
    if kind == 'serial':
        return DecorableSerialIterator(dataset, BATCH_SIZE, **arguments)
    if kind == 'multithread':
        return DecorableMultithreadIterator(dataset, BATCH_SIZE, n_threads=2, **arguments)
    if kind == 'multiprocess':
        return DecorableMultiprocessIterator(dataset, BATCH_SIZE, n_processes=2, **arguments)
    raise ValueError('unknown iterator kind {!r}'.format(kind))


# Waits for READY (holding a pid), sends it SIGNAL, then writes GO.
_SIGNALLER = """
import os, sys, time
ready, go, number, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
deadline = time.monotonic() + timeout
while not (os.path.exists(ready) and open(ready).read()):
    if time.monotonic() > deadline:
        sys.exit('{!r} did not appear within {} s'.format(ready, timeout))
    time.sleep(0.002)
os.kill(int(open(ready).read()), number)
open(go, 'w').close()
"""


def start_signaller(ready, go, signal_number, timeout=HANDSHAKE_TIMEOUT):
    """A process of its own that signals the pid written to ``ready``, then writes ``go``.

    Under ``mpiexec`` it is no rank: the signal reaches one rank only, from outside, as
    a cluster's would.
    """
    return subprocess.Popen([sys.executable, '-c', _SIGNALLER, ready, go,
                             str(int(signal_number)), str(timeout)])


def signal_self_at(iteration, signal_number):
    """An extension that sends this process ``signal_number`` after ``iteration``."""

    @training.make_extension(trigger=(1, 'iteration'))
    def signal_self(trainer):
        if trainer.updater.iteration == iteration:
            os.kill(os.getpid(), signal_number)

    return signal_self


def pause_at(iteration, folder):
    """After ``iteration``, writes ``folder/at_N`` and waits for ``folder/go_N``."""

    @training.make_extension(trigger=(1, 'iteration'))
    def pause(trainer):
        if trainer.updater.iteration == iteration:
            touch(os.path.join(folder, 'at_{}'.format(iteration)), str(os.getpid()))
            wait_for(os.path.join(folder, 'go_{}'.format(iteration)))

    return pause


def hold_until_signalled(iteration, folder, timeout):
    """After ``iteration``, writes ``folder/holding`` and waits for a signal to be noted.

    For a scheduler that signals in its own time (SLURM's ``--signal``): the run cannot
    end before the signal arrives; it stops at this iteration.
    """

    @training.make_extension(trigger=(1, 'iteration'))
    def hold(trainer):
        if trainer.updater.iteration == iteration:
            touch(os.path.join(folder, 'holding'), str(os.getpid()))
            preemption = trainer.get_extension('PreemptionSnapshot')
            deadline = time.monotonic() + timeout
            while preemption.signal_number is None:
                if time.monotonic() > deadline:
                    raise TimeoutError('no signal within {} s'.format(timeout))
                time.sleep(0.01)

    return hold


class PauseInFinalize(training.Extension):
    """At ``finalize`` (before PreemptionSnapshot's), writes ``finalizing``, waits for ``go``."""

    def __init__(self, folder):
        self.folder = folder

    def __call__(self, trainer):
        pass

    def finalize(self):
        touch(os.path.join(self.folder, 'finalizing'))
        wait_for(os.path.join(self.folder, 'go_finalize'))


class SignalOnFirstRead(object):
    """A dataset that sends this process ``signal_number`` when first read (None: never)."""

    def __init__(self, dataset, signal_number=None):
        self.dataset = dataset
        self.signal_number = signal_number

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        if self.signal_number is not None:
            signal_number, self.signal_number = self.signal_number, None
            os.kill(os.getpid(), signal_number)
        return self.dataset[index]


def build_trainer(out, iterator='chainer_serial', stop_iteration=STOP_ITERATION,
                  preemption=True, block_folder=None, device=None, validation=False,
                  signal_during_validation=None, comm=None, hold_folder=None,
                  validation_workers=False, **preemption_arguments):
    """The Trainer of this run, resuming from the newest snapshot in ``out`` if any.

    With ``hold_folder``, the iterator's worker processes make their examples through a
    :class:`HoldInWorker` of that folder. With ``validation_workers``, an Evaluator runs
    at every epoch end on a DataManager with two worker processes, whose ``transforms``
    is a :class:`HoldInWorker` named ``hold_validation`` when ``hold_folder`` is given.

    With ``validation``, an Evaluator runs at every epoch end; its dataset sends
    ``signal_during_validation`` (if given) when the first evaluation reads it. With a
    ChainerMN ``comm``, each rank trains on its part of the examples with a multi-node
    optimizer, and each rank's snapshots (``snapshot_iter_N_rank<r>``) are its own.
    """
    numpy.random.seed(0)
    random.seed(0)
    model = L.Classifier(NoisyMLP(block_folder))
    if device is not None:
        model.to_device(device)
    optimizer = chainer.optimizers.Adam(alpha=0.01)
    dataset = _dataset()
    snapshot_name = 'snapshot_iter_{.updater.iteration}'
    if comm is None:
        optimizer.setup(model)
    else:
        import chainermn

        from researchutils.chainer.models.multi_node import setup_multi_node_optimizer
        optimizer = setup_multi_node_optimizer(optimizer, model, comm)
        dataset = chainermn.scatter_dataset(dataset, comm, shuffle=True, seed=0)
        snapshot_name += '_rank{}'.format(comm.rank)
        preemption_arguments['comm'] = comm
    iterator, converter = make_iterator(iterator, dataset, hold_folder)
    updater = training.updaters.StandardUpdater(iterator, optimizer, converter=converter,
                                                device=device)
    trainer = training.Trainer(updater, (stop_iteration, 'iteration'), out=str(out))
    if validation_workers:
        examples = [{'data': x, 'label': t} for x, t in _dataset()[:8]]
        transforms = (None if hold_folder is None
                      else HoldInWorker(hold_folder, name='hold_validation'))
        manager = DataManager(examples, BATCH_SIZE, 2, transforms)
        trainer.extend(extensions.Evaluator(manager.get_iterator(repeat=False), model,
                                            converter=_dict_batch, device=device),
                       trigger=(1, 'epoch'))
    elif validation or signal_during_validation is not None:
        validation_set = SignalOnFirstRead(_dataset()[:8], signal_during_validation)
        trainer.extend(extensions.Evaluator(
            SerialIterator(validation_set, BATCH_SIZE, repeat=False, shuffle=False), model,
            device=device), trigger=(1, 'epoch'))
    trainer.extend(extensions.LogReport(trigger=(1, 'iteration')))
    trainer.extend(extensions.snapshot(filename=snapshot_name, autoload=True),
                   trigger=(1, 'epoch'))
    if preemption:
        trainer.extend(PreemptionSnapshot(**preemption_arguments))
    return trainer


def final_state(trainer):
    """What an exact resume must reproduce: weights, optimizer state, log, random states."""
    arrays = {}
    optimizer = trainer.updater.get_optimizer('main')
    for prefix, target in (('model/', optimizer.target), ('optimizer/', optimizer)):
        serializer = DictionarySerializer()
        target.serialize(serializer)
        arrays.update((prefix + key, numpy.asarray(value).copy())
                      for key, value in serializer.target.items())
    _, keys, position, has_gauss, cached_gaussian = numpy.random.get_state()
    arrays['numpy_random'] = numpy.concatenate([keys, [position, has_gauss]]).astype(numpy.int64)
    arrays['numpy_random_gauss'] = numpy.asarray(cached_gaussian)
    arrays['python_random'] = numpy.asarray(random.getstate()[1], dtype=numpy.int64)
    return arrays, log_rows(trainer)


def log_rows(trainer):
    """LogReport's rows without ``elapsed_time``, the one value that is never the same."""
    return [{key: value for key, value in row.items() if key != 'elapsed_time'}
            for row in trainer.get_extension('LogReport').log]


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument('out')
    parser.add_argument('--iterator', default='chainer_serial', choices=ITERATOR_KINDS)
    parser.add_argument('--pause-at', type=int, action='append', default=[])
    parser.add_argument('--block-save', action='store_true')
    parser.add_argument('--pause-in-finalize', action='store_true')
    parser.add_argument('--pause-after-run', action='store_true')
    parser.add_argument('--requeue', action='store_true')
    parser.add_argument('--no-preemption', action='store_true')
    parser.add_argument('--hold-until-signalled-at', type=int)
    parser.add_argument('--hold-in-workers', action='store_true')
    parser.add_argument('--validation-workers', action='store_true')
    parser.add_argument('--release-when-signalled', action='store_true')
    parser.add_argument('--start-method', choices=('fork', 'spawn', 'forkserver'))
    args = parser.parse_args(argv)
    out = args.out
    os.makedirs(out, exist_ok=True)
    if args.start_method is not None:
        multiprocessing.set_start_method(args.start_method)
    trainer = build_trainer(out, args.iterator, preemption=not args.no_preemption,
                            block_folder=out if args.block_save else None,
                            hold_folder=out if args.hold_in_workers else None,
                            validation_workers=args.validation_workers,
                            **({'requeue': True} if args.requeue else {}))
    for iteration in args.pause_at:
        trainer.extend(pause_at(iteration, out), name='pause_at_{}'.format(iteration))
    if args.hold_until_signalled_at is not None:
        trainer.extend(hold_until_signalled(args.hold_until_signalled_at, out, 240.))
    if args.pause_in_finalize:
        trainer.extend(PauseInFinalize(out))
    if args.hold_in_workers:
        report_waiting(out, 'hold', 2)
        report_waiting(out, 'hold_validation', 2)
    if args.release_when_signalled:
        release_when_signalled(trainer, out)
    trainer.run()
    arrays, rows = final_state(trainer)
    numpy.savez(os.path.join(out, 'final.npz'), **arrays)
    with open(os.path.join(out, 'log_rows.json'), 'w') as f:
        json.dump(rows, f)
    if args.pause_after_run:
        touch(os.path.join(out, 'finished'), repr(signal.getsignal(signal.SIGTERM)))
        wait_for(os.path.join(out, 'go_exit'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
