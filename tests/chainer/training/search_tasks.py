"""The synthetic search task shared by the search tests and benchmarks/bench_search.py.

SGD on the linear task of :mod:`tests.chainer.training.tasks`: of the learning rates in
:data:`LEARNING_RATES`, the upper half diverge (the weights overflow within the first epoch)
and the lowest learn slowly. Run as ``python -m tests.chainer.training.search_tasks
SAVE_PATH N_TRIALS STORAGE [SECONDS_PER_EPOCH [NUM_EPOCHS]]`` it runs one search worker (STORAGE:
``default``, ``journal`` for ``SAVE_PATH/journal.log``, or a URL), printing the numbers of
the trials it ran (not its surplus ones) as JSON on its last line.
"""
import json
import math
import os
import sys

import chainer

from tests.chainer.training import tasks

LEARNING_RATES = [0.01, 0.03, 0.1, 0.3, 3.0, 10.0, 30.0, 100.0]
LR_KEY = 'training/optimizer_params/lr'


def search_params(num_epochs=3, learning_rates=None):
    return tasks.make_params(
        num_epochs=num_epochs, optimizer_cls=chainer.optimizers.SGD, optimizer_params={},
        variable={'training': {'optimizer_params': {
            'lr': list(LEARNING_RATES if learning_rates is None else learning_rates)}}})


def search_experiment(save_path, params=None, extensions=()):
    return tasks.experiment(save_path, params or search_params(), val_score_key='MSE',
                            extensions=extensions)


def search_managers():
    return tasks.make_managers(n_train=128, n_val=32)


def trial_folder(save_path, trial):
    """The folder of a trial (an optuna FrozenTrial) of the experiment ``exp``, as it
    recorded it."""
    return os.path.join(save_path, 'exp', trial.user_attrs['folder'])


class MarkedRegressor(tasks.Regressor):
    """The task's model with a ``marker`` parameter: with ``marker`` other than infinite its
    predictions are 100 off, so the trial of an infinite marker is the best."""

    def __init__(self, marker=None, **kwargs):
        super().__init__(**kwargs)
        self.offset = 0.0 if marker == math.inf else 100.0

    def forward(self, x):
        return {'pred': super().forward(x)['pred'] + self.offset}


def mse_or_inf(pred, label):
    """The task's MSE, infinite for a model 100 off (a MarkedRegressor's other markers)."""
    mse = tasks.mean_squared_error(pred, label)
    return math.inf if mse > 1000 else mse


def storage(save_path, name):
    if name == 'default':
        return None
    if name == 'journal':
        import optuna
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(
            os.path.join(save_path, 'journal.log')))
    return name


def main(save_path, n_trials, storage_name, seconds_per_epoch=0.0, num_epochs=3):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    extensions = [tasks.SlowEpochs(seconds_per_epoch)] if seconds_per_epoch else []
    summary = search_experiment(save_path, search_params(num_epochs),
                                extensions=extensions).search(
        *search_managers(), n_trials=n_trials, storage=storage(save_path, storage_name),
        pruner=optuna.pruners.NopPruner())
    mine = [t.number for t in summary['study'].trials
            if t.user_attrs.get('worker', {}).get('pid') == os.getpid()
            and not t.user_attrs.get('surplus')]
    print(json.dumps(mine))


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3],
         float(sys.argv[4]) if len(sys.argv) > 4 else 0.0,
         int(sys.argv[5]) if len(sys.argv) > 5 else 3)
