"""Hyper-parameter search on Optuna (issue 20): epochs to a good score, and two processes.

1. Epochs trained until a score within 1% of the grid's best: ``grid_search`` over the
   candidates of the synthetic search task (SGD on the linear task of the tests, 8 learning
   rates of which the upper half diverge, times 2 hidden sizes, 5 epochs each) against
   ``ChainerExperiment.search`` over the same lists with TPE (4 random start-up trials) and
   median pruning (from the 3rd trial), one trial at a time until a trial completes within
   1% of the grid's best. Epochs are counted in iterations (a diverged or pruned run counts
   the iterations it trained). The search is repeated over several sampler seeds; the median
   of its epochs is compared with the grid's (in the grid's own order); target <= 0.5x.
2. Wall time to ``n_trials`` finished trials of one SQLite study: one worker process against
   two started together (each a fresh interpreter running
   ``python -m tests.chainer.training.search_tasks``, 10 epochs a trial, no pruning);
   rounds alternate, medians compared;
   target <= 0.6x on 2 cores. The load average is printed before and after: the machine is
   shared.

Usage: ``python benchmarks/bench_search.py [--quick] [--processes-only]``.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import chainer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from researchutils.chainer.training import Parameters  # noqa: E402
from tests.chainer.training import search_tasks  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_EPOCHS = 5
HIDDEN = [8, 32]
WORKER_EPOCHS = 10  # per trial of part 2, so that a trial outweighs an interpreter's start


class IterationCounter(chainer.training.Extension):
    """Counts every iteration trained, over all the runs it is added to."""

    trigger = 1, 'iteration'

    def __init__(self):
        self.iterations = 0

    def __call__(self, trainer):
        self.iterations += 1


def params():
    base = search_tasks.search_params(num_epochs=NUM_EPOCHS)
    return Parameters(base.fixed_params, {
        'training': base.variable_params['training'], 'model': {'num_hidden': list(HIDDEN)}})


def iterations_per_epoch():
    train, _ = search_tasks.search_managers()
    return len(train.dataset) // train.batch_size


def grid_epochs(folder):
    """The grid's best score, and the epochs it trained until one within 1% of it."""
    counter = IterationCounter()
    experiment = search_tasks.search_experiment(folder, params(), extensions=[counter])
    epochs_after = []
    scores = []
    per_epoch = iterations_per_epoch()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for k, combination in enumerate(experiment.params.grid()):
            single = search_tasks.search_experiment(
                os.path.join(folder, 'grid_{}'.format(k)), combination, extensions=[counter])
            summary = single.grid_search(*search_tasks.search_managers())
            scores.append(summary['best_score'])
            epochs_after.append(counter.iterations / per_epoch)
    best = min(score for score in scores if score == score)
    first = next(i for i, score in enumerate(scores) if score <= best * 1.01)
    return best, epochs_after[first], epochs_after[-1]


def search_epochs(folder, target, seed, max_trials=32):
    import optuna
    counter = IterationCounter()
    experiment = search_tasks.search_experiment(folder, params(), extensions=[counter])
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for n_trials in range(1, max_trials + 1):
            summary = experiment.search(*search_tasks.search_managers(), n_trials=n_trials,
                                        sampler=sampler, pruner=pruner)
            if summary['best_score'] <= target:
                return counter.iterations / iterations_per_epoch(), n_trials
    return float('inf'), max_trials


def load():
    return '{:.1f}'.format(os.getloadavg()[0])


def bench_epochs(seeds):
    folder = tempfile.mkdtemp()
    try:
        best, grid_to_target, grid_total = grid_epochs(folder)
        runs = [search_epochs(os.path.join(folder, 'search_{}'.format(seed)), best * 1.01, seed)
                for seed in seeds]
    finally:
        shutil.rmtree(folder)
    median = statistics.median(epochs for epochs, _ in runs)
    print('Epochs trained until a score within 1% of the grid\'s best ({:.4f}), {} candidates, '
          '{} epochs each:'.format(best, 2 * len(search_tasks.LEARNING_RATES), NUM_EPOCHS))
    print('  grid_search (its order): {:.2f} epochs (whole grid {:.2f})'.format(
        grid_to_target, grid_total))
    print('  search, TPE + median pruning, seeds {}: {} epochs, trials {}'.format(
        list(seeds), ['{:.2f}'.format(epochs) for epochs, _ in runs], [n for _, n in runs]))
    print('  median search / grid: {:.3f}x  (target <= 0.5; against the whole grid {:.3f}x)'
          .format(median / grid_to_target, median / grid_total))


def workers(folder, count, n_trials, storage='default'):
    """Seconds until ``count`` workers started together have finished the study's trials
    (``storage``: a URL, or 'default' for the SQLite file in ``folder``)."""
    started = time.perf_counter()
    errors = [tempfile.TemporaryFile() for _ in range(count)]
    processes = [subprocess.Popen(
        [sys.executable, '-m', 'tests.chainer.training.search_tasks', folder, str(n_trials),
         storage, '0', str(WORKER_EPOCHS)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=error) for error in errors]
    for process, error in zip(processes, errors):
        if process.wait() != 0:
            error.seek(0)
            raise RuntimeError('a search worker failed (rc {}): {}'.format(
                process.returncode, error.read().decode(errors='replace')[-3000:]))
    return time.perf_counter() - started


def bench_processes(rounds, n_trials):
    times = {1: [], 2: []}
    before = load()
    for _ in range(rounds):
        for count in (1, 2):
            folder = tempfile.mkdtemp()
            try:
                times[count].append(workers(folder, count, n_trials))
            finally:
                shutil.rmtree(folder)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print('Wall time to n_trials={} on one SQLite study, {} alternating rounds (load average '
          '{} -> {}):'.format(n_trials, rounds, before, load()))
    print('  one process: {}  two processes: {}'.format(
        ['{:.1f} s'.format(t) for t in times[1]], ['{:.1f} s'.format(t) for t in times[2]]))
    print('  median two / one: {:.3f}x  (target <= 0.6)'.format(two / one))


def main(argv):
    quick = '--quick' in argv
    if '--processes-only' not in argv:
        bench_epochs(range(3) if quick else range(5))
    bench_processes(1 if quick else 3, 8 if quick else 12)


if __name__ == '__main__':
    main(sys.argv[1:])
