"""A small ChainerExperiment (``run``, ``kfold`` or ``grid_search``) that a test can signal.

Run as ``python -m tests.support.preemptible_experiment OUT MODE [options]`` it trains in
``OUT/exp`` and writes what an exact resume must reproduce to ``OUT/result.json``: the
scores it returns. Every epoch end of every run appends ``<run folder> <epoch>`` to
``OUT/epochs_trained``, so that a test counts what a restarted command trains again.

The handshakes (``--pause-at RUN ITERATION``, ``--pause-in-validation RUN``) write
``OUT/paused`` (holding the process id) when the run named ``RUN`` (``exp``, ``fold_1``,
``grid_2``) gets there, and wait for ``OUT/go``: the test signals the process between the
two, without sleeping. With ``--workers`` the DataManagers make their batches in two
worker processes each, which hold mid-task while ``OUT/hold`` (training) or
``OUT/hold_validation`` exists (see ``HoldInWorker``), and ``OUT/hold.waiting`` or
``OUT/hold_validation.waiting`` says when the main process is stuck waiting for them.
"""
import argparse
import json
import os
import sys

import chainer
import chainer.functions as F
import numpy

from researchutils.chainer.data_loading import DataManager, RandomSampler, SequentialSampler
from researchutils.chainer.training import ChainerExperiment, Parameters
from tests.chainer.training import tasks
from tests.support.preemptible_training import HoldInWorker, report_waiting, touch, wait_for

N_TRAIN = 40
N_VAL = 24
BATCH_SIZE = 16  # 40 examples: batches of 16, 16 and 8, epochs end after iterations 3, 6, 9
NUM_EPOCHS = 3
MODES = ('run', 'kfold', 'grid_search')
# Seconds a test waits for one such process to end.
PROCESS_TIMEOUT = 180


def _run_name(trainer):
    return os.path.basename(trainer.out)


class PauseAt(chainer.training.Extension):
    """After ``iteration`` of the run ``name``, writes ``folder/paused`` and waits for ``go``."""

    trigger = (1, 'iteration')

    def __init__(self, name, iteration, folder):
        self.name, self.iteration, self.folder = name, iteration, folder

    def __call__(self, trainer):
        if _run_name(trainer) == self.name and trainer.updater.iteration == self.iteration:
            _pause(self.folder)


def _pause(folder):
    touch(os.path.join(folder, 'paused'), str(os.getpid()))
    wait_for(os.path.join(folder, 'go'))
    os.remove(os.path.join(folder, 'go'))


class RecordEpochs(chainer.training.Extension):
    """Appends ``<run folder> <epoch>`` to ``path`` at every epoch end."""

    trigger = (1, 'epoch')

    def __init__(self, path):
        self.path = path

    def __call__(self, trainer):
        with open(self.path, 'a') as f:
            f.write('{} {}\n'.format(_run_name(trainer), trainer.updater.epoch))


# The run in progress, set by _TrackRun (the parameters may hold copies of a PausingMSE).
_running = {'run': None, 'paused': False}


class PausingMSE(object):
    """The validation MSE; in the run ``name``'s first validation it pauses once, mid-pass."""

    def __init__(self, folder, name):
        self.folder, self.name = folder, name

    def __call__(self, pred, label):
        if (self.name is not None and _running['run'] == self.name
                and not _running['paused']):
            _running['paused'] = True
            _pause(self.folder)
        return tasks.mean_squared_error(pred, label)


class _TrackRun(chainer.training.Extension):
    """Notes which run is training, before its validation (which has a lower priority)."""

    trigger = (1, 'iteration')
    priority = chainer.training.PRIORITY_WRITER + 1

    def __call__(self, trainer):
        _running['run'] = _run_name(trainer)


def make_experiment(out, args):
    metric = PausingMSE(out, args.pause_in_validation)
    variable = None
    if args.mode == 'grid_search':
        variable = {'training': {'optimizer_params': {'alpha': [0.01, 0.03, 0.05]}}}
    params = Parameters({'model': {'num_hidden': 8}, 'training': {
        'num_epochs': NUM_EPOCHS, 'optimizer_cls': chainer.optimizers.Adam,
        'optimizer_params': {'alpha': 0.02}, 'losses': {'MSE': F.mean_squared_error},
        'val_metrics': {'MSE': metric}}}, variable)
    extensions = [RecordEpochs(os.path.join(out, 'epochs_trained')), _TrackRun()]
    if args.pause_at is not None:
        extensions.append(PauseAt(args.pause_at[0], int(args.pause_at[1]), out))
    # Dropout-free model, but the sampler's shuffles and Adam's state must continue exactly.
    return ChainerExperiment(params, tasks.Regressor, name='exp', save_path=out,
                             val_score_key='MSE', seed=0, extensions=extensions,
                             preemption_snapshot=not args.no_preemption,
                             wait_for_folder=args.wait_for_folder)


def _managers(out, workers):
    hold = {}
    if workers:
        hold = {'train': dict(n_process_augmentation=2, transforms=HoldInWorker(out)),
                'val': dict(n_process_augmentation=2,
                            transforms=HoldInWorker(out, name='hold_validation'))}
    train = DataManager(tasks.LinearTask(N_TRAIN, seed=1), BATCH_SIZE,
                        sampler_cls=RandomSampler, sampler_kwargs={'seed': 3},
                        **hold.get('train', {}))
    val = DataManager(tasks.LinearTask(N_VAL, seed=2), BATCH_SIZE,
                      sampler_cls=SequentialSampler, **hold.get('val', {}))
    return train, val


def _weights(model):
    return {name: param.array.ravel().tolist() for name, param in sorted(model.namedparams())}


def start(out, mode, *options):
    """Starts this script in a subprocess (tests.support.processes.start_module)."""
    from tests.support.processes import start_module
    return start_module('tests.support.preemptible_experiment', out, mode, *options)


def finish(process, timeout=PROCESS_TIMEOUT):
    """Waits for a process :func:`start` started; its exit status and standard error."""
    _, stderr = process.communicate(timeout=timeout)
    return process.returncode, stderr


def epochs_trained(out):
    """The ``<run folder> <epoch>`` lines the runs in ``out`` wrote, in order."""
    with open(os.path.join(str(out), 'epochs_trained')) as f:
        return f.read().splitlines()


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument('out')
    parser.add_argument('mode', choices=MODES)
    parser.add_argument('--pause-at', nargs=2, metavar=('RUN', 'ITERATION'))
    parser.add_argument('--pause-in-validation', metavar='RUN')
    parser.add_argument('--no-preemption', action='store_true')
    parser.add_argument('--workers', action='store_true')
    parser.add_argument('--wait-for-folder', type=float, default=0.0)
    parser.add_argument('--result', default='result.json',
                        help='the file in OUT that gets the result')
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    numpy.random.seed(0)
    experiment = make_experiment(out, args)
    train, val = _managers(out, args.workers)
    if args.workers:
        report_waiting(out, 'hold', 2)
        report_waiting(out, 'hold_validation', 2)
    if args.mode == 'run':
        model = experiment.run(train, val)
        result = {'weights': _weights(model),
                  'val': experiment.test(model, val, {'MSE': tasks.mean_squared_error})[1]}
    elif args.mode == 'kfold':
        everything = DataManager(tasks.LinearTask(N_TRAIN + N_VAL, seed=1), BATCH_SIZE,
                                 sampler_cls=RandomSampler, sampler_kwargs={'seed': 3})
        _, scores = experiment.kfold(everything, {'MSE': tasks.mean_squared_error},
                                     num_splits=3, val_split=0.25, random_seed=4,
                                     shuffle=True)
        result = {'scores': scores}
    else:
        summary = experiment.grid_search(train, val)
        result = {'results': [[choice, score] for choice, score in summary['results']],
                  'best_score': summary['best_score']}
    with open(os.path.join(out, args.result), 'w') as f:
        json.dump(result, f)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
