"""The main demo's training epoch with 2 worker processes against the same epoch made in process.

``examples/video_prediction/train.py`` (what ``make demo`` runs) trains for 2 epochs in a
fresh interpreter, once with ``--workers 2`` (clips rendered by the DataManager's 2 worker
processes) and once with ``--workers 0`` (rendered in the training process), with the same
seed, so the same batches in the same order. An epoch's time is the difference of
LogReport's ``elapsed_time`` between epochs 1 and 2: the workers are running by then, and
start-up, the first epoch and the end of the run are left out (the first epoch is printed
as context). Runs alternate; medians are compared.

Target: the epoch with workers at most 0.9x the in-process one. Rendering is a large part
of an in-process epoch; workers that hand over the batches they made ahead without delay
take it off the training process, and a regression in how batches reach it shows as a
ratio that climbs towards 1.
Usage: ``python benchmarks/bench_demo_epoch.py [--quick]`` (one run each).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(REPO, 'examples', 'video_prediction', 'train.py')
EPOCHS = 2
TARGET = 0.9


def epoch_seconds(workers):
    """(first epoch, second epoch) seconds of one demo run with ``workers`` processes."""
    out = tempfile.mkdtemp(prefix='bench_demo_epoch_')
    try:
        subprocess.run(
            [sys.executable, DEMO, '--epochs', str(EPOCHS), '--seed', '0', '--workers',
             str(workers), '--out', out],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                [REPO] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])))
        with open(os.path.join(out, 'video_prediction', 'log')) as f:
            elapsed = [entry['elapsed_time'] for entry in json.load(f)]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return elapsed[0], elapsed[1] - elapsed[0]


def main(argv):
    repeats = 1 if '--quick' in argv else 3
    print('cores usable: {}, load average {}'.format(
        len(os.sched_getaffinity(0)), ' '.join('{:.2f}'.format(x) for x in os.getloadavg())))
    contenders = {'2 worker processes': 2, 'in process (--workers 0)': 0}
    runs = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, workers in contenders.items():
            runs[name].append(epoch_seconds(workers))
    print('demo epoch {} of {} (4000 clips, batch 32), {} runs each '
          '(median s; all runs; first epochs):'.format(EPOCHS, EPOCHS, repeats))
    medians = {}
    for name, values in runs.items():
        medians[name] = statistics.median(second for _, second in values)
        print('   {:28s} {:7.3f}   {}   ({})'.format(
            name, medians[name], ' '.join('{:.3f}'.format(second) for _, second in values),
            ' '.join('{:.3f}'.format(first) for first, _ in values)))
    ratio = medians['2 worker processes'] / medians['in process (--workers 0)']
    print('   workers / in process: {:.3f}x (target <= {})'.format(ratio, TARGET))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
