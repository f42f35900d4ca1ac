"""One search worker as a cluster node starts it, for tests and benchmarks of a shared study.

Run as ``python -m tests.support.search_worker SAVE_PATH STORAGE_URL N_TRIALS
[--go GO_FILE] [--epochs NUM_EPOCHS] [--no-plots]`` in a working folder of its own: it runs
``ChainerExperiment.search`` of the synthetic search task
(:mod:`tests.chainer.training.search_tasks`, learning rates that never diverge, no pruning)
in ``SAVE_PATH/exp`` against the study at ``STORAGE_URL``. The shared folder and the URL
are all it has in common with the other workers: it needs no variable of the parent's
environment but ``PYTHONPATH`` (this checkout).

``--no-plots`` makes it a node without matplotlib (no ``plot`` extra): its trials draw no
loss.png and metrics.png, which otherwise take most of a tiny trial's time. With
``--go GO_FILE`` it first writes ``ready`` in its working folder, once imported, and waits
for ``GO_FILE`` to exist, so that workers whose interpreters started at different speeds
begin the search together. Its last line on stdout is JSON: its pid, working folder and the
numbers of the trials it trained (read from the trial folders its Trainers ran in, not from
the search's own bookkeeping). Used by tests/chainer/training/test_search_postgres.py.
"""
import argparse
import json
import os
import sys
import time

import chainer

from tests.chainer.training import search_tasks

# Learning rates of the task that converge: every trial completes, none is pruned.
LEARNING_RATES = [0.01, 0.03, 0.1, 0.3]
GO_TIMEOUT = 600.
_trained = []


class RecordTrialFolder(chainer.training.Extension):
    """Notes the folder of every Trainer that runs in this process (``trial_<n>``)."""

    trigger = 1, 'epoch'

    def initialize(self, trainer):
        _trained.append(os.path.basename(os.path.normpath(trainer.out)))

    def __call__(self, trainer):
        pass


def wait_for(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError('no {} within {} s'.format(path, timeout))
        time.sleep(0.05)


def main(save_path, url, n_trials, go_file=None, num_epochs=3):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    experiment = search_tasks.search_experiment(
        save_path, search_tasks.search_params(num_epochs, LEARNING_RATES),
        extensions=[RecordTrialFolder()])
    if go_file:
        with open('ready', 'w') as stream:
            stream.write(str(os.getpid()))
        wait_for(go_file, GO_TIMEOUT)
    experiment.search(*search_tasks.search_managers(), n_trials=n_trials, storage=url,
                      pruner=optuna.pruners.NopPruner())
    trials = sorted({int(name.split('_')[1]) for name in _trained})
    print(json.dumps({'pid': os.getpid(), 'cwd': os.getcwd(), 'trials': trials}))


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('save_path')
    parser.add_argument('url')
    parser.add_argument('n_trials', type=int)
    parser.add_argument('--go', dest='go_file')
    parser.add_argument('--epochs', dest='num_epochs', type=int, default=3)
    parser.add_argument('--no-plots', action='store_true')
    return vars(parser.parse_args(argv))


if __name__ == '__main__':
    arguments = parse(sys.argv[1:])
    if arguments.pop('no_plots'):
        sys.modules['matplotlib'] = None  # every import of it now fails, as where it is absent
    main(**arguments)
