"""PreemptionSnapshot's cost per iteration, and the time from a signal to the process's exit.

1. Side by side, in alternating rounds: the same Trainer run (an MLP of about 0.3 M
   parameters, LogReport, batches of 32; a few milliseconds per iteration) without and
   with PreemptionSnapshot, no signal sent; wall-clock and CPU time. Target: with /
   without <= 1.01x. Since that ratio is noisy on a shared machine, the one call the
   extension adds to an iteration (its trigger, which reads a flag) is also timed alone,
   as a fraction of an iteration.
2. A training process (the same model with a 4.2 M-parameter first layer, so that the
   snapshot has some size) is sent SIGTERM once it is training; the time until the process
   has exited (one iteration at most, the snapshot write, finalize) is measured from the
   parent, for several runs, and printed with the iteration time and the snapshot size.
3. Under ``mpiexec -n 2`` (``mpiexec -n 2 python benchmarks/bench_preemption.py --mpi``):
   what the ranks' agreement costs, the one collective call (an allgather of an int)
   that PreemptionSnapshot(comm=...) adds to an iteration, timed alone on every rank, as a
   fraction of a ChainerMN iteration of the model of 1 (gradients averaged over the ranks).
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import chainer
import chainer.functions as F
import chainer.links as L
import numpy
from chainer import training
from chainer.datasets import TupleDataset
from chainer.iterators import SerialIterator
from chainer.training import extensions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from researchutils.chainer.training.extensions import PreemptionSnapshot  # noqa: E402

ITERATIONS = 300
ROUNDS = 15
SIGNAL_RUNS = 5


class MLP(chainer.Chain):

    def __init__(self, n_in, n_hidden):
        super(MLP, self).__init__()
        with self.init_scope():
            self.l1 = L.Linear(n_in, n_hidden)
            self.l2 = L.Linear(n_hidden, 10)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))


def make_trainer(out, n_in, n_hidden, stop, preemption):
    numpy.random.seed(0)
    x = numpy.random.standard_normal((1024, n_in)).astype(numpy.float32)
    t = numpy.random.randint(0, 10, 1024).astype(numpy.int32)
    model = L.Classifier(MLP(n_in, n_hidden))
    optimizer = chainer.optimizers.MomentumSGD(lr=0.01)
    optimizer.setup(model)
    iterator = SerialIterator(TupleDataset(x, t), 32)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    trainer = training.Trainer(updater, stop, out=out)
    trainer.extend(extensions.LogReport(trigger=(10, 'iteration')))
    if preemption:
        trainer.extend(PreemptionSnapshot())
    return trainer


def per_iteration_cost():
    out = tempfile.mkdtemp()
    names = {False: 'without PreemptionSnapshot', True: 'with PreemptionSnapshot'}
    wall = {False: [], True: []}
    cpu = {False: [], True: []}
    try:
        make_trainer(out, 256, 1024, (ITERATIONS, 'iteration'), True).run()  # warm-up
        for _ in range(ROUNDS):
            for preemption in (False, True):
                trainer = make_trainer(out, 256, 1024, (ITERATIONS, 'iteration'), preemption)
                cpu_start, wall_start = time.process_time(), time.perf_counter()
                trainer.run()
                cpu[preemption].append(time.process_time() - cpu_start)
                wall[preemption].append(time.perf_counter() - wall_start)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print('{} iterations per run, median of {} alternating rounds'.format(ITERATIONS, ROUNDS))
    for preemption, name in names.items():
        print('  {:<30s} {:7.3f} ms per iteration ({:.3f} ms of CPU time)'.format(
            name, statistics.median(wall[preemption]) / ITERATIONS * 1e3,
            statistics.median(cpu[preemption]) / ITERATIONS * 1e3))
    for kind, seconds in (('wall-clock', wall), ('CPU', cpu)):
        ratio = statistics.median(seconds[True]) / statistics.median(seconds[False])
        print('  with / without, {} time: {:.4f}x; target <= 1.01x: {}'.format(
            kind, ratio, 'met' if ratio <= 1.01 else 'NOT met'))
    # What the extension adds to an iteration is one call of its trigger, which reads a
    # flag; timed alone it does not drown in the noise of a shared machine.
    trigger = make_trainer(out, 256, 1024, (ITERATIONS, 'iteration'), True).get_extension(
        'PreemptionSnapshot').trigger
    calls = 10 ** 6
    start = time.perf_counter()
    for _ in range(calls):
        trigger(trainer)
    added = (time.perf_counter() - start) / calls
    iteration = statistics.median(wall[False]) / ITERATIONS
    print('  added per iteration: {:.0f} ns (one trigger call), {:.5f}x of an iteration; '
          'target <= 1.01x: {}'.format(added * 1e9, 1 + added / iteration,
                                        'met' if added / iteration <= 0.01 else 'NOT met'))


def child(out):
    trainer = make_trainer(out, 4096, 1024, (10 ** 9, 'iteration'), True)

    @training.make_extension(trigger=(1, 'iteration'))
    def announce(trainer):
        if trainer.updater.iteration == 20:
            open(os.path.join(out, 'training'), 'w').close()

    trainer.extend(announce)
    start = time.perf_counter()
    try:
        trainer.run()
    finally:
        seconds = (time.perf_counter() - start) / trainer.updater.iteration
        with open(os.path.join(out, 'iteration_seconds'), 'w') as f:
            f.write(repr(seconds))


def signal_to_exit():
    exits, iterations, sizes = [], [], []
    for _ in range(SIGNAL_RUNS):
        out = tempfile.mkdtemp()
        try:
            # The child imports the researchutils of this checkout, as this process does.
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                filter(None, [ROOT, os.environ.get('PYTHONPATH')])))
            process = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--child',
                                        out], env=env)
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(out, 'training')):
                if time.monotonic() > deadline or process.poll() is not None:
                    process.kill()
                    raise RuntimeError('the training child did not start')
                time.sleep(0.001)
            start = time.perf_counter()
            process.send_signal(signal.SIGTERM)
            status = process.wait(timeout=120)
            exits.append(time.perf_counter() - start)
            if status != 75:
                raise RuntimeError('the child exited with status {}, not 75'.format(status))
            with open(os.path.join(out, 'iteration_seconds')) as f:
                iterations.append(float(f.read()))
            snapshots = [name for name in os.listdir(out) if name.startswith('snapshot_iter_')]
            sizes.append(os.path.getsize(os.path.join(out, snapshots[0])))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    print('SIGTERM to exit, {} runs (4.2 M parameters, MomentumSGD):'.format(SIGNAL_RUNS))
    print('  median {:.3f} s (min {:.3f}, max {:.3f}); one iteration {:.1f} ms; snapshot '
          '{:.1f} MB compressed'.format(statistics.median(exits), min(exits), max(exits),
                                        statistics.median(iterations) * 1e3,
                                        statistics.median(sizes) / 1e6))


def agreement_cost():
    import chainermn

    from researchutils.chainer.models.multi_node import setup_multi_node_optimizer
    comm = chainermn.create_communicator('naive')
    out = tempfile.mkdtemp()
    try:
        numpy.random.seed(0)
        x = numpy.random.standard_normal((1024, 256)).astype(numpy.float32)
        t = numpy.random.randint(0, 10, 1024).astype(numpy.int32)
        model = L.Classifier(MLP(256, 1024))
        optimizer = setup_multi_node_optimizer(chainer.optimizers.MomentumSGD(lr=0.01), model,
                                               comm)
        iterator = SerialIterator(TupleDataset(x, t), 32)
        updater = training.updaters.StandardUpdater(iterator, optimizer)
        trainer = training.Trainer(updater, (ITERATIONS, 'iteration'), out=out)
        trainer.run()  # warm-up
        comm.mpi_comm.barrier()
        updater.iteration = 0
        start = time.perf_counter()
        for _ in range(ITERATIONS):
            updater.update()
        iteration = (time.perf_counter() - start) / ITERATIONS
        trigger = PreemptionSnapshot(comm=comm).trigger
        comm.mpi_comm.barrier()
        calls = 10 ** 4
        start = time.perf_counter()
        for _ in range(calls):
            trigger(trainer)
        added = (time.perf_counter() - start) / calls
    finally:
        shutil.rmtree(out, ignore_errors=True)
    iterations = comm.mpi_comm.gather(iteration)
    agreements = comm.mpi_comm.gather(added)
    if comm.rank == 0:
        print('ChainerMN, {} ranks (naive communicator): one iteration {:.2f} ms; the '
              'agreement (allgather of the flag) {:.1f} us, {:.5f}x of an iteration; '
              'target <= 1.01x: {}'.format(
                  comm.size, max(iterations) * 1e3, max(agreements) * 1e6,
                  1 + max(agreements) / max(iterations),
                  'met' if max(agreements) / max(iterations) <= 0.01 else 'NOT met'))


def main():
    per_iteration_cost()
    signal_to_exit()


if __name__ == '__main__':
    if sys.argv[1:2] == ['--child']:
        child(sys.argv[2])
    elif sys.argv[1:2] == ['--mpi']:
        agreement_cost()
    else:
        main()
