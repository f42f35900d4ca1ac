"""``run_state.json``: written when a run finishes, and believed only when it says what happened.

A rerun of a finished experiment returns its model without training; so the file that says
"finished" must be whole (written atomically) and consistent with the snapshots beside it,
else it is refused with a message naming it and what to do. It also records the
``num_epochs`` the run was given: a finished run is returned only to an experiment that asks
for as many epochs (:func:`check_num_epochs`). Tests:
``tests/chainer/training/_experiment/test_run_state.py``.
"""
from __future__ import annotations

import os
from typing import NotRequired, TypedDict, cast

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
    #: The epochs the run was given (not in files written before it was recorded).
    num_epochs: NotRequired[int]


def write_run_state(folder: str, epoch: int, num_epochs: int) -> None:
    """Records in ``folder`` that the run given ``num_epochs`` epochs finished after
    ``epoch`` (fewer when it stopped early)."""
    train_utils.atomic_write_text(os.path.join(folder, STATE_FILE), json_values.dumps_json(
        {'finished': True, 'epoch': epoch, 'num_epochs': num_epochs}))


def _is_count(value: object) -> bool:
    # JSON decodes every integer as an int, never another numbers.Integral.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_run_state(folder: str) -> RunState | None:
    """What ``run_state.json`` in ``folder`` says, checked; None when there is none.

    The file is trusted only when it says what happened: a dict of exactly
    ``finished`` (a bool), ``epoch`` (the epoch the run stopped at, a
    non-negative int) and, in files written since it was recorded,
    ``num_epochs`` (a positive int), and a finished run's epoch is not older
    than the newest snapshot beside it.

    Returns:
        dict or None: ``{"finished": bool, "epoch": int}``, and ``"num_epochs": int``
        when the file has it.

    Raises:
        ValueError: The file says something else, naming it and what to do.
    """
    path = os.path.join(folder, STATE_FILE)
    if not os.path.lexists(path):
        return None
    state = json_values.load_json(path)
    if not (isinstance(state, dict)
            and set(state) in ({'finished', 'epoch'}, {'finished', 'epoch', 'num_epochs'})
            and isinstance(state['finished'], bool) and _is_count(state['epoch'])
            and ('num_epochs' not in state
                 or (_is_count(state['num_epochs']) and state['num_epochs'] > 0))):
        raise ValueError('{} must hold {{"finished": true or false, "epoch": <the epoch the run '
                         'stopped at>, "num_epochs": <the epochs it was given>}}, but it holds '
                         '{!r}: it is not trusted. Delete it to resume from the last '
                         'snapshot'.format(path, state))
    snapshot = latest_snapshot(folder)
    if state['finished'] and snapshot is not None and snapshot_epoch(snapshot) > state['epoch']:
        raise ValueError('{} says the run finished at epoch {}, but {} is newer: the file is '
                         'not trusted. Delete it to resume from that snapshot'.format(
                             path, state['epoch'], snapshot))
    # A dict of exactly these keys and kinds, as checked above.
    return cast(RunState, state)


def check_num_epochs(folder: str, state: RunState, num_epochs: int) -> None:
    """Refuses to return the finished run of ``folder`` (its ``state``) to an experiment
    that asks for another ``num_epochs`` than the run was given.

    Raises:
        ValueError: The counts differ; the message names both and the ways on: the
            run's count to get its model, ``run_state.json`` deleted to train on from the
            last snapshot, or a new folder.
    """
    given = state.get('num_epochs')
    if given is None or given == num_epochs:
        return
    path = os.path.join(folder, STATE_FILE)
    raise ValueError(
        '{} holds a run that finished at epoch {} of num_epochs {}, but this experiment asks '
        'for num_epochs {}: a finished run is returned only for the epochs it was given. Set '
        'num_epochs to {} to get its model; delete {} to train on to {} epochs from the last '
        'snapshot ({}); or give the experiment another name or save_path to train anew'.format(
            folder, state['epoch'], given, num_epochs, given, path, num_epochs,
            latest_snapshot(folder) or 'there is none: from the start'))
