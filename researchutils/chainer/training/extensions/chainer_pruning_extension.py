"""ChainerPruningExtension: Optuna's pruning inside a Chainer Trainer.

Optuna's own Chainer extension (``optuna_integration.ChainerPruningExtension``) is gone with
Optuna 5; this one takes the same arguments in the same order, so a script needs only a new
import line. Needs Optuna (``pip install researchutils[search]``), imported when the extension
is made. Its tests are in
``tests/chainer/training/extensions/test_chainer_pruning_extension.py``.
"""
from __future__ import annotations

import math
import numbers
import types
import warnings
from typing import TYPE_CHECKING, Any, cast

import chainer
from chainer.training import triggers as chainer_triggers

from researchutils._checks import check_comm
from researchutils._optuna import import_optuna
from researchutils.chainer.training._ranks import is_rank_zero

if TYPE_CHECKING:  # Optuna is imported when an extension is made
    import optuna

_TRIGGERS = (chainer_triggers.IntervalTrigger, chainer_triggers.ManualScheduleTrigger)


def _check_period(trigger: chainer.training.triggers.IntervalTrigger
                  | chainer.training.triggers.ManualScheduleTrigger, argument: object) -> None:
    """An interval trigger fires every ``period`` units: a positive, finite number."""
    if not isinstance(trigger, chainer_triggers.IntervalTrigger):
        return
    period = trigger.period
    # Written with <= and < alone, the comparisons numbers.Real declares (NaN fails both).
    if isinstance(period, bool) or not isinstance(period, numbers.Real) or (
            period <= 0 or not period < math.inf):
        raise ValueError('pruner_trigger must fire every positive, finite number of epochs or '
                         'iterations, got the period {!r} in {!r}'.format(period, argument))


class ChainerPruningExtension(chainer.training.Extension):
    """Reports a value to an Optuna trial and ends the trial when the pruner says so.

    At each firing of ``pruner_trigger`` it reports the observation
    ``observation_key`` (a float, or a scalar Variable or array) as the
    trial's intermediate value at the trigger's step (the epoch or the
    iteration, by the trigger's unit), then asks the trial's pruner. When
    the trial is to be pruned it raises :class:`optuna.TrialPruned`: Chainer
    calls every extension's ``on_error`` (a SlackReport posts the
    TrialPruned and its message) and ``finalize`` (iterator workers stop)
    and the Trainer's ``run`` raises it again, so ``study.optimize``
    records the trial PRUNED. A NaN value is reported as it is (Optuna's
    median and percentile pruners prune it).

    It runs after the evaluators of the same iteration (its priority is
    ``PRIORITY_READER``), so it sees the validation values they report. Its
    trigger's state is saved in Trainer snapshots, so that a run resumed
    mid-epoch reports at the epochs it ends. An
    observation missing when the trigger fires is not reported (as in
    Optuna's extension), with one warning naming the keys there are.

    Args:
        trial (optuna.trial.Trial): The trial being run.
        observation_key (str): The value to report, such as
            ``"validation/main/loss"`` (``"val/<name>"`` in a
            :class:`~researchutils.chainer.training.ChainerExperiment`).
        pruner_trigger: When to report: an ``IntervalTrigger``, a
            ``ManualScheduleTrigger`` or a ``(period, unit)`` pair such as
            ``(1, "epoch")``.
        comm: A ChainerMN communicator, when every rank runs the trial: only
            rank 0 holds the trial (the others pass ``trial=None``); rank 0
            reports and decides, and every rank learns the decision, so all
            raise TrialPruned at the same iteration. None: one process.
            With a communicator its ``every_rank`` attribute is True, so a
            :class:`~researchutils.chainer.training.ChainerExperiment` runs
            it on every rank.

    Raises:
        TypeError: ``pruner_trigger`` is another kind of trigger (one that
            gives no step, such as a MinValueTrigger), or ``observation_key``
            is not a string.
        ValueError: ``pruner_trigger``'s period is not a positive, finite
            number (``(0, "epoch")``).
        ImportError: Optuna is missing (``pip install researchutils[search]``).

    Example:
        >>> trainer.extend(ChainerPruningExtension(
        ...     trial, 'validation/main/loss', (1, 'epoch')))  # doctest: +SKIP
    """

    trigger = 1, 'iteration'
    priority = chainer.training.PRIORITY_READER

    def __init__(self, trial: optuna.trial.Trial | None, observation_key: str,
                 pruner_trigger: chainer.training.triggers.IntervalTrigger
                 | chainer.training.triggers.ManualScheduleTrigger | tuple[float, str],
                 comm: Any = None) -> None:
        self._optuna: types.ModuleType = import_optuna('ChainerPruningExtension')
        if not isinstance(observation_key, str):
            raise TypeError('observation_key must be a str such as "validation/main/loss", '
                            'got {!r}'.format(observation_key))
        check_comm(comm)
        try:
            self._pruner_trigger = chainer.training.get_trigger(pruner_trigger)
        except (TypeError, ValueError) as error:
            raise type(error)('pruner_trigger must be an IntervalTrigger, a ManualScheduleTrigger '
                              'or a (period, unit) pair such as (1, "epoch"), got {!r}: {}'.format(
                                  pruner_trigger, error)) from None
        if not isinstance(self._pruner_trigger, _TRIGGERS):
            raise TypeError('pruner_trigger must be an IntervalTrigger, a ManualScheduleTrigger '
                            'or a (period, unit) pair, got {!r}: pruning reports at a step, '
                            'which other triggers do not give'.format(pruner_trigger))
        _check_period(self._pruner_trigger, pruner_trigger)
        self._comm = comm
        # A ChainerExperiment runs this extension on every rank, not only on rank 0.
        self.every_rank = comm is not None
        self._rank_zero = is_rank_zero(comm)
        if self._rank_zero and trial is None:
            raise TypeError('trial must be an optuna Trial (None only on ChainerMN ranks '
                            'other than 0)')
        self._trial = trial
        self._observation_key = observation_key
        self._warned_missing = False
        self._last_value: float | None = None

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        if not self._pruner_trigger(trainer):
            return
        step = getattr(trainer.updater, self._pruner_trigger.unit)
        prune = self._report(trainer, step) if self._rank_zero else None
        if self._comm is not None:
            prune = self._comm.bcast_obj(prune, root=0)
        if prune:
            raise self._optuna.TrialPruned('trial {} pruned at {} {}: {} was {}'.format(
                getattr(self._trial, 'number', '?'), self._pruner_trigger.unit, step,
                self._observation_key, self._last_value))

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        # A resumed Trainer (a search trial's retry) must not take its first iteration for
        # the end of a period: the trigger's place comes back with the snapshot.
        serialize = getattr(self._pruner_trigger, 'serialize', None)
        if serialize is not None:
            serialize(serializer['pruner_trigger'])

    def _report(self, trainer: chainer.training.Trainer, step: int) -> bool:
        """Reports this step's value to the trial; whether the pruner prunes the trial."""
        # Only rank 0 reports, and __init__ refuses a trial of None there.
        trial = cast('optuna.trial.Trial', self._trial)
        observation = trainer.observation
        if self._observation_key not in observation:
            if not self._warned_missing:
                self._warned_missing = True
                warnings.warn('ChainerPruningExtension: {!r} is not observed at {} {} (the '
                              'observation has {}), so nothing is reported to trial {} then'
                              .format(self._observation_key, self._pruner_trigger.unit, step,
                                      sorted(observation), trial.number),
                              RuntimeWarning)
            return False
        value = observation[self._observation_key]
        if isinstance(value, chainer.Variable):
            value = value.array
        try:
            value = float(value)
        except TypeError:
            raise TypeError('ChainerPruningExtension: the observation {!r} is {!r}, which is '
                            'no number to report'.format(self._observation_key, value)
                            ) from None
        self._last_value = value
        trial.report(value, step)
        return trial.should_prune()
