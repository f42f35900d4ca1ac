"""Tiny training runs with a tracking extension, for TensorBoardReport's and MLflowReport's
tests: a LogReport row every two iterations, reported at each, a PreemptionSnapshot, and
Chainer's snapshot autoload, so that a run signalled mid-way resumes when built again."""
import os
import signal

from chainer.training import extensions

from researchutils.chainer.training.extensions import PreemptionSnapshot
from tests.support.preemptible_training import signal_self_at
from tests.support.tiny_training import make_trainer

LOG_EVERY = 2


def tracked_trainer(out, report, stop_iteration=8, signal_at=None, log_every=LOG_EVERY):
    """A Trainer of the tiny classifier reporting to ``report`` every ``log_every``
    iterations; it resumes from the newest snapshot in ``out``; ``signal_at``: SIGUSR1
    after that iteration (PreemptionSnapshot then stops the run)."""
    trainer = make_trainer(out, stop_iteration=stop_iteration)
    trainer.extend(extensions.LogReport(trigger=(log_every, 'iteration')))
    trainer.extend(report, trigger=(log_every, 'iteration'))
    trainer.extend(PreemptionSnapshot())
    # Never triggered: here for its autoload of PreemptionSnapshot's snapshot.
    trainer.extend(extensions.snapshot(filename='snapshot_iter_{.updater.iteration}',
                                       autoload=True), trigger=(10 ** 6, 'iteration'))
    if signal_at is not None:
        trainer.extend(signal_self_at(signal_at, signal.SIGUSR1))
    return trainer


def logged_rows(out):
    """The rows of the LogReport's log file in ``out``."""
    import json
    with open(os.path.join(str(out), 'log')) as stream:
        return json.load(stream)
