"""PreemptionSnapshot serves several runs in turn, as in a k-fold loop: one extension, in one
process, through a run it stopped, that run resumed, and the next runs, with real signals.

The reference is the same run never interrupted (tests/support/preemptible_training.py).
"""
import os
import signal

import pytest

from researchutils.chainer.training.extensions import Preempted, PreemptionSnapshot
from tests.chainer.training.extensions.test_preemption_snapshot import _assert_same_run
from tests.support import preemptible_training as run
from tests.support.processes import no_process_left  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures('no_process_left')


def _fold(out, extension, signal_at=None, signal_number=signal.SIGUSR1, **settings):
    """One run of the loop with the shared ``extension``, resuming from ``out`` if it holds a
    snapshot; ``signal_at``: the iteration after which this process is signalled."""
    trainer = run.build_trainer(out, preemption=False, **settings)
    trainer.extend(extension)
    if signal_at is not None:
        trainer.extend(run.signal_self_at(signal_at, signal_number))
    return trainer


def _stopped(trainer, iteration, signal_number):
    with pytest.raises(Preempted) as preempted:
        trainer.run()
    assert (preempted.value.iteration, preempted.value.signal_number) == (
        iteration, signal_number)
    assert os.path.exists(os.path.join(trainer.out, 'snapshot_iter_{}'.format(iteration)))


def test_one_extension_stops_resumes_and_stops_the_next_fold_on_a_new_signal(tmp_path):
    reference = run.build_trainer(tmp_path / 'reference')
    reference.run()
    expected = run.final_state(reference)
    extension = PreemptionSnapshot()

    # Fold 1: stopped by SIGTERM after iteration 2, then resumed to its end.
    _stopped(_fold(tmp_path / 'fold1', extension, 2, signal.SIGTERM), 2, signal.SIGTERM)
    resumed = _fold(tmp_path / 'fold1', extension)
    resumed.run()
    _assert_same_run(run.final_state(resumed), expected)

    # Fold 2: the same extension snapshots and stops on a new signal, from a clean start
    # (no random states of fold 1's snapshot set again), and resumes exactly.
    _stopped(_fold(tmp_path / 'fold2', extension, 3), 3, signal.SIGUSR1)
    resumed = _fold(tmp_path / 'fold2', extension)
    resumed.run()
    _assert_same_run(run.final_state(resumed), expected)


def test_after_a_fold_it_stopped_a_signal_the_next_fold_ends_before_acting_on_takes_effect(
        tmp_path):
    # A fold stopped by the extension, then one that a signal reaches after the extension's
    # turn in its last iteration: nothing is left to save, so the signal meets the handler
    # of before the run, as in a first run.
    extension = PreemptionSnapshot()
    _stopped(_fold(tmp_path / 'fold1', extension, 2), 2, signal.SIGUSR1)
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: received.append(number))
    try:
        last = run.build_trainer(tmp_path / 'fold2', stop_iteration=3, preemption=False)
        last.extend(extension)
        last.extend(run.signal_self_at(3, signal.SIGUSR1),
                    priority=PreemptionSnapshot.priority - 1)
        last.run()
        assert received == [signal.SIGUSR1]
        assert not os.path.exists(str(tmp_path / 'fold2' / 'snapshot_iter_3'))
    finally:
        signal.signal(signal.SIGUSR1, previous)
