"""TensorBoardReport's and MLflowReport's cost to a training run; MLflow answering slowly.

A run of 200 iterations (a few seconds) reports every 10 iterations (20 reports). MLflow is
a real ``mlflow server`` (tests/support/mlflow_server.py: SQLite, one worker) behind a
loopback proxy, in a process of its own, that holds every request 0.5 s. Side by side, in
alternating rounds: the same run without tracking, with MLflowReport and with
TensorBoardReport. The training loop time (start of ``trainer.run`` to the end of the last
iteration) is compared; the final flush (finalize waiting for the queue) is printed apart.
For context, one run logging synchronously in the extension call (``MlflowClient.log_batch``
there, what a hand-written extension does) is timed as well. Target: loop time with each
tracker at most 1.05x the loop time without it.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

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

from researchutils.chainer.training.extensions import (  # noqa: E402
    MLflowReport,
    TensorBoardReport,
)

ITERATIONS = 200
REPORT_EVERY = 10
LATENCY = 0.5
ROUNDS = 3

# The server and its slow proxy, in a process of their own (as a remote server would be):
# prints the proxy's URL, and stops both when its stdin closes.
SERVER = '''
import sys, tempfile
sys.path.insert(0, {root!r})
from tests.support.mlflow_server import DelayingProxy, MLflowServer
with MLflowServer(tempfile.mkdtemp(prefix='bench_tracking_server_')) as server:
    with DelayingProxy(server.url, delay={latency}) as proxy:
        print(proxy.url, flush=True)
        sys.stdin.read()
'''


class MLP(chainer.Chain):
    def __init__(self, units=768):
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(256, units)
            self.l2 = L.Linear(units, units)
            self.l3 = L.Linear(units, 10)

    def forward(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))


class SynchronousMLflow(training.Extension):
    """A hand-written reporter: logs the latest log row in the extension call itself."""

    def __init__(self, url):
        from mlflow import MlflowClient
        self.client = MlflowClient(url)
        experiment = self.client.create_experiment('synchronous-' + uuid.uuid4().hex[:8])
        self.run_id = self.client.create_run(experiment).info.run_id

    def __call__(self, trainer):
        from mlflow.entities import Metric
        row = trainer.get_extension('LogReport').log[-1]
        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[
            Metric(key, float(value), now, row['iteration']) for key, value in row.items()
            if key.startswith('main/')])


def make_trainer(out):
    rng = numpy.random.RandomState(0)
    x = rng.rand(2048, 256).astype(numpy.float32)
    t = rng.randint(0, 10, 2048).astype(numpy.int32)
    model = L.Classifier(MLP())
    optimizer = chainer.optimizers.SGD(lr=0.01)
    optimizer.setup(model)
    updater = training.updaters.StandardUpdater(SerialIterator(TupleDataset(x, t), 256),
                                                optimizer)
    trainer = training.Trainer(updater, (ITERATIONS, 'iteration'), out=out)
    trainer.extend(extensions.LogReport(trigger=(REPORT_EVERY, 'iteration')))
    return trainer


def timed_run(trainer):
    """Returns (loop seconds, seconds after the loop: finalize and the flush)."""
    marks = {}

    @training.make_extension(trigger=(ITERATIONS, 'iteration'), priority=-10 ** 9)
    def loop_end(trainer):
        marks['end'] = time.perf_counter()

    trainer.extend(loop_end)
    start = time.perf_counter()
    trainer.run()
    finished = time.perf_counter()
    return marks['end'] - start, finished - marks['end']


def main():
    server = subprocess.Popen([sys.executable, '-c', SERVER.format(root=ROOT, latency=LATENCY)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = None
    try:
        url = server.stdout.readline().strip()
        if not url:
            raise RuntimeError('the MLflow server did not start (is the full mlflow '
                               'installed in one of the venvs?)')
        experiment = 'bench-' + uuid.uuid4().hex[:8]
        out = tempfile.mkdtemp(prefix='bench_tracking_')
        trackers = {
            'without tracking': lambda: None,
            'with MLflowReport': lambda: MLflowReport(url, experiment, parameters={
                'lr': 0.01}),
            'with TensorBoardReport': lambda: TensorBoardReport(parameters={'lr': 0.01}),
        }
        loops = {name: [] for name in trackers}
        flushes = {name: [] for name in trackers}
        for _ in range(ROUNDS):
            for name, make in trackers.items():
                shutil.rmtree(out, ignore_errors=True)
                trainer = make_trainer(out)
                tracker = make()
                if tracker is not None:
                    trainer.extend(tracker, trigger=(REPORT_EVERY, 'iteration'))
                loop, flush = timed_run(trainer)
                loops[name].append(loop)
                flushes[name].append(flush)
        trainer = make_trainer(out)
        trainer.extend(SynchronousMLflow(url), trigger=(REPORT_EVERY, 'iteration'))
        synchronous, _ = timed_run(trainer)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)

    base = statistics.median(loops['without tracking'])
    print('{} iterations, a report every {} ({} reports), MLflow answering in {} s; median '
          'of {} alternating rounds'.format(ITERATIONS, REPORT_EVERY,
                                            ITERATIONS // REPORT_EVERY, LATENCY, ROUNDS))
    for name, values in loops.items():
        median = statistics.median(values)
        print('  {:<40s} loop {:7.3f} s   {:5.3f}x   final flush {:.3f} s'.format(
            name, median, median / base, statistics.median(flushes[name])))
    print('  {:<40s} loop {:7.3f} s   {:5.3f}x  (one run)'.format(
        'MLflow log_batch in the extension call', synchronous, synchronous / base))
    for name in ('with MLflowReport', 'with TensorBoardReport'):
        ratio = statistics.median(loops[name]) / base
        print('target: {} / without <= 1.05x: {}'.format(
            name, 'met' if ratio <= 1.05 else 'NOT met'))


if __name__ == '__main__':
    main()
