"""DataManager with 2 worker processes against Chainer and against the machine's ceiling.

6 short epochs (256 examples, batch 32, a CPU-bound ``__getitem__`` of about 2 ms that
holds the GIL) are drawn from a fresh iterator, start-up included:

* a DataManager with ``n_process_augmentation=2``;
* Chainer's ``MultiprocessIterator`` (2 processes) over the same examples (fork only);
* the ceiling: 2 bare processes, started with the same start method, each making half
  of the examples, with no iterator, pipes or batches around them.

The target is ours at 0.95x or more of the ceiling's throughput; the ratio to Chainer's
time is printed as context.

Runs alternate between the contenders; the ratios are given for the medians and for the
best runs (on a shared machine the best run is the least disturbed one).
Usage: ``python benchmarks/bench_data_manager.py [--quick]``.
"""
import multiprocessing
import os
import statistics
import sys
import time
import warnings

import numpy
from chainer.iterators import MultiprocessIterator

from researchutils.chainer.data_loading import DataManager

N_EXAMPLES = 256
BATCH = 32
EPOCHS = 6


class BusyDataset(object):
    """Example i: a dict of 8 floats and a label, after a pure-Python busy loop."""

    def __init__(self, loops):
        self.loops = loops

    def __len__(self):
        return N_EXAMPLES

    def __getitem__(self, index):
        total = 0
        for k in range(self.loops):
            total += k * k
        return {'data': numpy.full(8, index + total % 3, dtype=numpy.float32),
                'label': numpy.int32(index % 10)}


def calibrate(target_s=0.002):
    """The loop count that makes one example take about ``target_s`` (uncontended)."""
    loops = 20000
    for _ in range(3):
        fastest = float('inf')
        for _ in range(20):
            started = time.perf_counter()
            BusyDataset(loops)[0]
            fastest = min(fastest, time.perf_counter() - started)
        loops = max(1000, int(loops * target_s / fastest))
    return loops


def _iterator_seconds(make_iterator, start_method):
    """Seconds to build the iterator, draw EPOCHS epochs of batches and finalize it."""
    multiprocessing.set_start_method(start_method, force=True)
    started = time.perf_counter()
    iterator = make_iterator()
    try:
        for _ in range(EPOCHS * N_EXAMPLES // BATCH):
            iterator.next()
    finally:
        iterator.finalize()
    return time.perf_counter() - started


def data_manager_seconds(dataset, start_method):
    return _iterator_seconds(
        lambda: DataManager(dataset, BATCH, n_process_augmentation=2).get_iterator(),
        start_method)


def chainer_seconds(dataset, start_method):
    return _iterator_seconds(
        lambda: MultiprocessIterator(dataset, BATCH, shuffle=False, n_processes=2),
        start_method)


def _make_examples(dataset, indices):
    for index in indices:
        dataset[index]


def ceiling_seconds(dataset, start_method):
    context = multiprocessing.get_context(start_method)
    indices = list(range(N_EXAMPLES)) * EPOCHS
    started = time.perf_counter()
    workers = [context.Process(target=_make_examples, args=(dataset, indices[part::2]))
               for part in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def compare(start_method, contenders, dataset, repeats):
    seconds = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, contender in contenders.items():
            seconds[name].append(contender(dataset, start_method))
    print('start method {!r}, {} runs each (median s, best s; all runs):'.format(
        start_method, repeats))
    for name, values in seconds.items():
        print('   {:30s} {:7.3f} {:7.3f}   {}'.format(
            name, statistics.median(values), min(values),
            ' '.join('{:.3f}'.format(v) for v in values)))
    for statistic in (statistics.median, min):
        figures = {name: statistic(values) for name, values in seconds.items()}
        ours = figures['DataManager, 2 workers']
        line = '   {:6s}: ours throughput / ceiling {:.3f}x (target >= 0.95)'.format(
            statistic.__name__, figures['ceiling: 2 bare processes'] / ours)
        if 'Chainer MultiprocessIterator' in figures:
            # Context, not a target: Chainer's iterator itself runs at about the ceiling.
            line += ', ours time / Chainer time {:.3f}x'.format(
                ours / figures['Chainer MultiprocessIterator'])
        print(line)


def main(argv):
    quick = '--quick' in argv
    warnings.simplefilter('ignore', MultiprocessIterator.TimeoutWarning)
    print('cores usable: {}, python {}, load average {}'.format(
        len(os.sched_getaffinity(0)), sys.version.split()[0],
        ' '.join('{:.2f}'.format(x) for x in os.getloadavg())))
    dataset = BusyDataset(calibrate())
    print('{} epochs of {} examples, batch {}; one example takes {:.2f} ms serially'.format(
        EPOCHS, N_EXAMPLES, BATCH, 1e3 * min(_time_one(dataset) for _ in range(20))))
    repeats = 1 if quick else 5
    compare('fork', {'DataManager, 2 workers': data_manager_seconds,
                     'Chainer MultiprocessIterator': chainer_seconds,
                     'ceiling: 2 bare processes': ceiling_seconds}, dataset, repeats)
    compare('spawn', {'DataManager, 2 workers': data_manager_seconds,
                      'ceiling: 2 bare processes': ceiling_seconds}, dataset, repeats)
    return 0


def _time_one(dataset):
    started = time.perf_counter()
    dataset[0]
    return time.perf_counter() - started


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
