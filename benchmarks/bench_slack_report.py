"""SlackReport's cost to a training run whose Slack answers slowly.

A run of 200 iterations (a few seconds) reports every 10 iterations (20 reports)
to the loopback Slack server of tests/support, told to answer every request in
0.5 s; the server runs in its own process, as Slack would. Side by side, in
alternating rounds: the same run without SlackReport, and with it. The training
loop time (start of ``trainer.run`` to the end of the last iteration) is
compared; the final flush (finalize waiting for the queue) is printed apart.
For context, one run posting synchronously in the extension call (what a
naive Slack extension does) is timed as well. Target: loop time with
SlackReport at most 1.05x the loop time without it.
"""
import os
import shutil
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

from researchutils.chainer.training.extensions import SlackReport  # noqa: E402

ITERATIONS = 200
REPORT_EVERY = 10
LATENCY = 0.5
ROUNDS = 3

SERVER = '''
import sys
sys.path.insert(0, {root!r})
from tests.support.slack_server import SlackServer
server = SlackServer().start()
server.slow({latency})
print(server.base_url, flush=True)
sys.stdin.read()
server.stop()
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


class SynchronousSlack(training.Extension):
    """A naive reporter: posts the latest log row in the extension call itself."""

    def __init__(self, client):
        self.client = client

    def __call__(self, trainer):
        row = trainer.get_extension('LogReport').log[-1]
        self.client.chat_postMessage(channel='general', text=repr(row))


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
    from slack_sdk import WebClient
    server = subprocess.Popen([sys.executable, '-c', SERVER.format(root=ROOT, latency=LATENCY)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = None
    try:
        base_url = server.stdout.readline().strip()
        from tests.support.slack_server import TOKEN

        def client():
            return WebClient(token=TOKEN, base_url=base_url, timeout=10)

        out = tempfile.mkdtemp(prefix='bench_slack_report_')
        loops = {'without SlackReport': [], 'with SlackReport': []}
        flushes = []
        for _ in range(ROUNDS):
            trainer = make_trainer(out)
            loops['without SlackReport'].append(timed_run(trainer)[0])
            trainer = make_trainer(out)
            trainer.extend(SlackReport(client(), channel='general'),
                           trigger=(REPORT_EVERY, 'iteration'))
            loop, flush = timed_run(trainer)
            loops['with SlackReport'].append(loop)
            flushes.append(flush)
        trainer = make_trainer(out)
        trainer.extend(SynchronousSlack(client()), trigger=(REPORT_EVERY, 'iteration'))
        synchronous, _ = timed_run(trainer)
    finally:
        server.stdin.close()
        server.wait(timeout=10)
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)

    base = statistics.median(loops['without SlackReport'])
    print('{} iterations, a report every {} ({} reports), Slack answering in {} s; '
          'median of {} alternating rounds'.format(ITERATIONS, REPORT_EVERY,
                                                    ITERATIONS // REPORT_EVERY, LATENCY, ROUNDS))
    for name, values in loops.items():
        median = statistics.median(values)
        print('  {:<40s} loop {:7.3f} s   {:5.3f}x'.format(name, median, median / base))
    print('  {:<40s} loop {:7.3f} s   {:5.3f}x  (one run)'.format(
        'synchronous post in the extension call', synchronous, synchronous / base))
    print('  final flush of SlackReport (finalize): median {:.3f} s'.format(
        statistics.median(flushes)))
    ratio = statistics.median(loops['with SlackReport']) / base
    print('target: with / without <= 1.05x: {}'.format('met' if ratio <= 1.05 else 'NOT met'))


if __name__ == '__main__':
    main()
