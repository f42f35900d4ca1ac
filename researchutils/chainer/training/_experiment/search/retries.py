"""Trials whose worker died: found, failed, and retried with the same parameters.

A worker killed mid-trial (SIGKILL, a node lost) leaves its trial RUNNING; a worker
stopped by a signal with the preemption snapshot (SIGTERM or SIGUSR1, exit status 75)
fails its trial itself before it exits (:func:`fail_and_retry`). A RUNNING trial is found
dead when its process is gone from this host (:func:`fail_dead_trials`: by host, pid and
start time; a trial of another host is never judged by a pid of this one) or, where the
storage has Optuna's heartbeat, when it stopped beating for the grace period (Optuna's
``fail_stale_trials``, which every search runs before it asks for a trial, calls
:func:`retry`). Whoever fails such a trial enqueues its retry: a WAITING trial of the same
parameters, with Optuna's system attributes ``failed_trial`` (the first trial of the
series) and ``retry_history`` (every trial before it), which
``optuna.storages.RetryFailedTrialCallback.retry_history`` reads. The next trial a worker
asks for is that retry, and it takes up the folder its failed predecessors trained in
(``folders.take_up``), so it resumes from their newest snapshot. A trial failed by an
exception of its own is not retried: it would fail again.

Two processes may both fail one trial (each saw it dead) and enqueue two retries; the
folder's lineage (``folders.py``) lets one of them take it up and ends the other as a
duplicate. A retry's history is data others write: it is followed only through trials
of this study that failed with the same parameters (:func:`failed_chain`).
Tests: ``tests/chainer/training/test_search.py`` and ``test_search_resume.py``.
"""
from __future__ import annotations

import os
import socket
from typing import Any

import optuna

WORKER_ATTR = 'worker'
# Optuna's names (RetryFailedTrialCallback): its retry_history reads our retries too.
FAILED_TRIAL = 'failed_trial'
RETRY_HISTORY = 'retry_history'
_STATES = optuna.trial.TrialState


def worker(number: int) -> dict[str, Any]:
    """What trial ``number`` records of the process running it (its ``worker`` attribute)."""
    return {'host': socket.gethostname(), 'pid': os.getpid(),
            'started': _start_time(os.getpid()), 'trial': number}


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, Linux), or None: with the pid,
    it tells a process from a later one given the same pid."""
    try:
        with open('/proc/{}/stat'.format(pid)) as stream:
            return int(stream.read().rsplit(')', 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _plain_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dead(worker: object, number: int) -> bool:
    """Whether the process that trial ``number`` recorded in ``worker`` is gone (this host).

    A record naming another trial (a retry enqueued by Optuna's own callback copies the
    failed trial's attributes) says nothing of this one.
    """
    if not (isinstance(worker, dict) and worker.get('host') == socket.gethostname()
            and _plain_int(worker.get('pid')) and worker.get('trial', number) == number):
        return False
    try:
        os.kill(worker['pid'], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    started = worker.get('started')
    return started is not None and _start_time(worker['pid']) not in (None, started)


def alive_here(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether ``trial`` is run by a live process of this host (what its record says)."""
    worker = trial.user_attrs.get(WORKER_ATTR)
    return (isinstance(worker, dict) and worker.get('host') == socket.gethostname()
            and _plain_int(worker.get('pid')) and worker.get('trial') == trial.number
            and not _dead(worker, trial.number))


def fail_dead_trials(study: optuna.Study) -> None:
    """Fails, and retries, the RUNNING trials whose process is gone from this host."""
    for trial in study.get_trials(deepcopy=False, states=(_STATES.RUNNING,)):
        if _dead(trial.user_attrs.get(WORKER_ATTR), trial.number):
            fail_and_retry(study, trial)


def fail_and_retry(study: optuna.Study, trial: optuna.trial.FrozenTrial | optuna.Trial
                   ) -> None:
    """Fails the RUNNING ``trial`` (a FrozenTrial or a Trial) and enqueues its retry,
    unless another process finished it first."""
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number)
    try:
        study.tell(trial.number, state=_STATES.FAIL)
    except (ValueError, optuna.exceptions.UpdateFinishedTrialError):
        return  # finished meanwhile: failed (and retried) by another process, or done
    retry(study, frozen)


def retry(study: optuna.Study, failed: optuna.trial.FrozenTrial) -> None:
    """Enqueues the retry of the trial ``failed`` (a FrozenTrial): its parameters, and
    Optuna's retry attributes. Also the heartbeat's callback for a stale trial."""
    series = history(failed)
    study.add_trial(optuna.trial.create_trial(
        state=_STATES.WAITING, params=failed.params, distributions=failed.distributions,
        system_attrs={FAILED_TRIAL: series[0] if series else failed.number,
                      RETRY_HISTORY: series + [failed.number]}))


def history(trial: optuna.trial.FrozenTrial) -> list[int]:
    """The numbers of the trials ``trial`` retries, oldest first ([] for a first trial, or
    a history that is no list of earlier trial numbers)."""
    numbers = trial.system_attrs.get(RETRY_HISTORY)
    if not (isinstance(numbers, list) and numbers and all(_plain_int(n) for n in numbers)
            and numbers == sorted(set(numbers)) and numbers[0] >= 0
            and numbers[-1] < trial.number):
        return []
    return numbers


def failed_chain(study: optuna.Study, number: int) -> list[optuna.trial.FrozenTrial]:
    """The trials that trial ``number`` retries, oldest first, when each of them is a trial
    of this study that failed with the same parameters; [] otherwise (a first trial, or a
    history that does not hold: nothing of those trials is then used)."""
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    trial = by_number[number]
    chain = [by_number.get(earlier) for earlier in history(trial)]
    if any(t is None or t.state != _STATES.FAIL or t.params != trial.params for t in chain):
        return []
    return chain
