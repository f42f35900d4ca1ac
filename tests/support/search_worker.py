"""One search worker as a cluster node starts it, for tests and benchmarks of a shared study.

Run as ``python -m tests.support.search_worker SAVE_PATH STORAGE N_TRIALS [options]`` in a
working folder of its own: it runs ``ChainerExperiment.search`` of the synthetic search
task (:mod:`tests.chainer.training.search_tasks`, learning rates that never diverge, no
pruning) in ``SAVE_PATH/exp`` against the study at ``STORAGE`` (a URL, or ``default``:
the experiment's own SQLite file). The shared folder and the URL are all it has in common
with the other workers: it needs no variable of the parent's environment but
``PYTHONPATH`` (this checkout).

Options:

* ``--no-plots``: a node without matplotlib (no ``plot`` extra): its trials draw no
  loss.png and metrics.png, which otherwise take most of a tiny trial's time.
* ``--go GO_FILE``: first write ``ready`` in the working folder, once imported, and wait
  for ``GO_FILE`` to exist, so that workers whose interpreters started at different
  speeds begin the search together.
* ``--pause-at K``: at the end of the K-th iteration this process trains (counted over its
  trials; after that iteration's snapshot, if it writes one), write ``paused`` in the
  working folder (JSON: pid, the trial's folder, the iteration) and wait for ``go`` there:
  a moment the test chooses for a signal, reported by the worker; while it waits, it
  writes ``signalled`` (the signal's name) once its PreemptionSnapshot has noted a
  signal. A file ``pause_after`` that the test writes in the working folder while the
  worker runs, holding K, does the same K iterations after the worker finds it (it looks
  at each iteration's end).
* ``--heartbeat SECONDS --grace SECONDS``: the search's ``heartbeat_interval`` and
  ``grace_period``.
* ``--hostname NAME``: a host name of its own (a UTS namespace; needs root), so that the
  other workers judge its trials as another host's.

Its last line on stdout is JSON: its pid, host name, working folder and, for each Trainer
it ran, the trial that held the folder (read from the folder's record, not from the
search's own bookkeeping), the folder's name and the iteration it started at; and the
``best_trial`` its search returned. Used by
tests/chainer/training/test_search_postgres.py, test_search_resume.py and
test_search_slurm.py.
"""
import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import time

import chainer

from researchutils.chainer.training.extensions import PreemptionSnapshot
from tests.chainer.training import search_tasks

# Learning rates of the task that converge: every trial completes, none is pruned.
LEARNING_RATES = [0.01, 0.03, 0.1, 0.3]
GO_TIMEOUT = 600.
PAUSE_TIMEOUT = 600.
_CLONE_NEWUTS = 0x04000000
_trained = []


class RecordTrialFolder(chainer.training.Extension):
    """Notes each Trainer that runs in this process: the trial holding its folder, the
    folder's name and the iteration it starts at (after a resume's snapshot is loaded)."""

    trigger = 1, 'epoch'

    def initialize(self, trainer):
        with open(os.path.join(trainer.out, 'search_trial.json')) as stream:
            holder = json.load(stream)['holder']
        _trained.append({'trial': holder, 'folder': os.path.basename(os.path.normpath(
            trainer.out)), 'start_iteration': trainer.updater.iteration})

    def __call__(self, trainer):
        pass


class PauseAt(chainer.training.Extension):
    """At the end of this process's ``iterations``-th iteration (or as many after it finds
    ``pause_after``), reports it (``paused``) and waits for ``go``; after the snapshot
    extensions of that iteration (priority -500: Chainer's snapshot is -100), before the
    preemption snapshot (-1000)."""

    trigger = 1, 'iteration'
    priority = -500

    def __init__(self, iterations=None):
        self.left = iterations

    def __call__(self, trainer):
        if os.path.exists('pause_after'):
            with open('pause_after') as stream:
                self.left = int(stream.read())
            os.remove('pause_after')
        if self.left is None:
            return
        self.left -= 1
        if self.left != 0:
            return
        write_text('paused', json.dumps({'pid': os.getpid(), 'folder': trainer.out,
                                         'iteration': trainer.updater.iteration}))
        wait_for('go', PAUSE_TIMEOUT, lambda: report_signal(trainer))


def report_signal(trainer):
    """Writes ``signalled`` (the signal's name) once the Trainer's PreemptionSnapshot has
    noted a signal: a test whose signal comes through a third party (SLURM's ``scancel``
    returns before the signal is sent) waits for it before it lets the worker go on."""
    number = trainer.get_extension(PreemptionSnapshot.__name__).signal_number
    if number is not None and not os.path.exists('signalled'):
        write_text('signalled', signal.Signals(number).name)


def write_text(path, text):
    """Writes ``path`` whole (a reader never sees part of it)."""
    with open(path + '.tmp', 'w') as stream:
        stream.write(text)
    os.replace(path + '.tmp', path)


def wait_for(path, timeout, each_poll=None):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if each_poll is not None:
            each_poll()
        if time.monotonic() > deadline:
            raise TimeoutError('no {} within {} s'.format(path, timeout))
        time.sleep(0.05)


def take_hostname(name):
    """Gives this process a UTS namespace of its own, named ``name`` (root only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWUTS) != 0:
        raise OSError(ctypes.get_errno(), 'unshare(CLONE_NEWUTS) failed')
    socket.sethostname(name)


def main(save_path, storage, n_trials, go_file=None, num_epochs=3, pause_at=None,
         heartbeat=None, grace=None):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    extensions = [RecordTrialFolder(), PauseAt(pause_at)]
    experiment = search_tasks.search_experiment(
        save_path, search_tasks.search_params(num_epochs, LEARNING_RATES),
        extensions=extensions)
    if go_file:
        write_text('ready', str(os.getpid()))
        wait_for(go_file, GO_TIMEOUT)
    beats = {} if heartbeat is None else {'heartbeat_interval': heartbeat,
                                          'grace_period': grace}
    summary = experiment.search(*search_tasks.search_managers(), n_trials=n_trials,
                                storage=None if storage == 'default' else storage,
                                pruner=optuna.pruners.NopPruner(), **beats)
    print(json.dumps({'pid': os.getpid(), 'host': socket.gethostname(), 'cwd': os.getcwd(),
                      'trained': _trained, 'best_trial': summary['best_trial']}))


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('save_path')
    parser.add_argument('storage')
    parser.add_argument('n_trials', type=int)
    parser.add_argument('--go', dest='go_file')
    parser.add_argument('--epochs', dest='num_epochs', type=int, default=3)
    parser.add_argument('--pause-at', type=int)
    parser.add_argument('--heartbeat', type=int)
    parser.add_argument('--grace', type=int)
    parser.add_argument('--hostname')
    parser.add_argument('--no-plots', action='store_true')
    return vars(parser.parse_args(argv))


if __name__ == '__main__':
    arguments = parse(sys.argv[1:])
    if arguments.pop('no_plots'):
        sys.modules['matplotlib'] = None  # every import of it now fails, as where it is absent
    hostname = arguments.pop('hostname')
    if hostname:
        take_hostname(hostname)
    main(**arguments)
