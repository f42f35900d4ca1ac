"""A process that finds the study full: one line instead of a traceback, and the study's best.

Processes sharing a study each ask Optuna for trials until the study holds ``n_trials``
(``objective.py``). The one that asks when the others took the last trial ends that trial
as ``surplus`` by raising :class:`~.objective.SurplusTrial`, which Optuna logs as any failed
trial, traceback and all: :func:`one_line_per_surplus_trial` makes that one line saying why
the trial was not run. The trials the others still run count towards ``n_trials`` but
have no score yet, so :func:`wait_for_others` waits for them before the search summarizes
the study: its best trial is the study's, not an older one. It waits for the trials of live
processes of this host (two processes on one machine, as the tutorial starts them), which
it can tell from dead ones; a trial whose process died is failed and retried meanwhile
(``retries.py``), and the retry frees a place in the study, which this process then takes.
A trial of another host may belong to a process that died without a trace (a storage
without a heartbeat keeps it RUNNING for ever), so it is not waited for: the line names the
trials left out of the summary. A search with ``timeout`` waits no longer than that.
Tests:
``tests/chainer/training/_experiment/search/test_full_study.py``.
"""
from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any

import optuna

from researchutils.chainer.training._experiment import progress
from researchutils.chainer.training._experiment.search import objective, retries

# The logger of Optuna's optimize loop, which logs each failed trial (Optuna 4 and 5).
_OPTIMIZE_LOGGER = 'optuna.study._optimize'
# Seconds between two looks at the trials that others run.
POLL = 1.0
_STATES = optuna.trial.TrialState


class _OneLine(logging.Filter):
    """Turns Optuna's two warnings about a surplus trial (its error with the traceback, then
    its value) into one line without a traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._surplus: set[int] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, objective.SurplusTrial):
            self._surplus.add(error.number)
            record.msg = 'search: trial {} was not run: {}'.format(error.number, error)
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            return True
        return not any(record.getMessage() == 'Trial {} failed with value None.'.format(number)
                       for number in self._surplus)


@contextlib.contextmanager
def one_line_per_surplus_trial() -> Iterator[None]:
    """Inside the block, Optuna logs a surplus trial in one line (see :class:`_OneLine`)."""
    logger = logging.getLogger(_OPTIMIZE_LOGGER)
    one_line = _OneLine()
    logger.addFilter(one_line)
    try:
        yield
    finally:
        logger.removeFilter(one_line)


def wait_for_others(study: optuna.Study, n_trials: int, deadline: float | None,
                    comm: Any) -> bool:
    """Waits while the study holds its ``n_trials`` but some still run in other processes
    of this host (see the module's text).

    Args:
        study (optuna.Study): The study, full or not.
        n_trials (int): The trials the study should hold.
        deadline (float or None): ``time.monotonic()`` past which it waits no more.
        comm: A ChainerMN communicator or None: who prints the lines.

    Returns:
        bool: True when the study has a place free again (a dead trial was failed and
        retried): the search asks for trials again. False when nothing is left to wait for.
    """
    said = False
    while True:
        retries.fail_dead_trials(study)
        with warnings.catch_warnings():
            # Optuna's heartbeat, which the search relies on, is still called experimental.
            warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)  # retried by the storage's callback
        counted = [trial for trial in study.get_trials(
            deepcopy=False, states=(_STATES.COMPLETE, _STATES.PRUNED, _STATES.RUNNING))
            if not objective.surplus(trial)]
        if len(counted) < n_trials:
            return True
        running = [trial for trial in counted if trial.state == _STATES.RUNNING]
        timed_out = deadline is not None and time.monotonic() >= deadline
        waited = [] if timed_out else [trial.number for trial in running
                                       if retries.alive_here(trial)]
        left_out = [trial.number for trial in running if trial.number not in waited]
        if left_out and (timed_out or not said):
            progress.say(comm, 'search: trial(s) {} of the study {!r} still run in other '
                               'processes and are left out of this summary ({})'.format(
                                   left_out, study.study_name, 'the timeout has passed'
                                   if timed_out else 'another host\'s, which this one '
                                   'cannot tell from a dead one'))
        if not waited:
            return False
        if not said:
            progress.say(comm, 'search: the study {!r} has its n_trials={} trials; waiting '
                               'for trial(s) {}, run by other processes, to end, to return '
                               "the study's best".format(study.study_name, n_trials, waited))
            said = True
        time.sleep(POLL)
