"""``run_state.json``: written when a run finishes, and believed only when it says what happened.

A rerun of a finished experiment returns its model without training; so the file that says
"finished" must be whole (written atomically) and consistent with the snapshots beside it,
else it is refused with a message naming it and what to do. Tests:
``tests/chainer/training/_experiment/test_run_state.py``.
"""
from __future__ import annotations

import os
from typing import TypedDict, cast

from researchutils.chainer.training import json_values, train_utils
from researchutils.chainer.training._experiment.files import (
    STATE_FILE,
    latest_snapshot,
    snapshot_epoch,
)


class RunState(TypedDict):
    """What ``run_state.json`` holds."""

    #: Whether the run finished (True) or stopped early.
    finished: bool
    #: The epoch the run stopped at.
    epoch: int


def write_run_state(folder: str, epoch: int) -> None:
    """Records in ``folder`` that the run finished after ``epoch`` epochs."""
    train_utils.atomic_write_text(os.path.join(folder, STATE_FILE), json_values.dumps_json(
        {'finished': True, 'epoch': epoch}))


def read_run_state(folder: str) -> RunState | None:
    """What ``run_state.json`` in ``folder`` says, checked; None when there is none.

    The file is trusted only when it says what happened: a dict of exactly
    ``finished`` (a bool) and ``epoch`` (the epoch the run stopped at, a
    non-negative int), and a finished run's epoch is not older than the newest
    snapshot beside it.

    Returns:
        dict or None: ``{"finished": bool, "epoch": int}``.

    Raises:
        ValueError: The file says something else, naming it and what to do.
    """
    path = os.path.join(folder, STATE_FILE)
    if not os.path.lexists(path):
        return None
    state = json_values.load_json(path)
    if not (isinstance(state, dict) and set(state) == {'finished', 'epoch'}
            and isinstance(state['finished'], bool)
            # JSON decodes every integer as an int, never another numbers.Integral.
            and isinstance(state['epoch'], int) and not isinstance(state['epoch'], bool)
            and state['epoch'] >= 0):
        raise ValueError('{} must hold {{"finished": true or false, "epoch": <the epoch the run '
                         'stopped at>}}, but it holds {!r}: it is not trusted. Delete it to '
                         'resume from the last snapshot'.format(path, state))
    snapshot = latest_snapshot(folder)
    if state['finished'] and snapshot is not None and snapshot_epoch(snapshot) > state['epoch']:
        raise ValueError('{} says the run finished at epoch {}, but {} is newer: the file is '
                         'not trusted. Delete it to resume from that snapshot'.format(
                             path, state['epoch'], snapshot))
    # A dict of exactly these keys and kinds, as checked above.
    return cast(RunState, state)
