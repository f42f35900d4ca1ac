"""One run owns a folder: a claim file with a heartbeat, that a dead owner's claim outlives only
for a bound.

A run (``ChainerExperiment.run``, ``kfold``, ``grid_search``) takes its folder before it writes
anything there, by publishing ``run_owner.json`` with a hard link: the link fails when the name
is taken, atomically, on a local disk and over NFS alike, so of two runs only one gets the
folder. The record names the owner (host, pid, since when) and its heartbeat, which a thread
of the owner rewrites every :data:`HEARTBEAT_INTERVAL` seconds while it holds the folder: the
same idea as the search's trial folders, whose owners are recorded in them and whose liveness
Optuna's heartbeat tells. A second run meets a live owner and is refused at once, naming the
folder, the owner and since when, or, when asked, waits for it up to a bound and says so.

A claim is dead, and taken over, when its owner is gone: on the same host, when its process
no longer exists (or the pid now belongs to another process); on another host, when its
heartbeat is older than :data:`GRACE_PERIOD` seconds by this host's clock (a claim whose
heartbeat missed two beats is waited for until then, so that a job requeued on another
node takes over as soon as it may). A dead claim is moved aside under a name of the taker's
and removed, and the taker links its own: of two takers only one moves it, and one that
moved a live claim by mistake (it was renewed meanwhile) puts it back.

The claim is re-entrant within a process: ``kfold`` holds the experiment's folder while each
fold's run holds its own, and a search trial's folder, which the search owns already, is
claimed by its run as any other. Released (the file removed) when the run ends, by return or
exception; a hard kill leaves it, and the next run takes it over as above.

Tests: ``tests/chainer/training/test_ownership.py``.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import secrets
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from researchutils import _files
from researchutils.chainer.training._ranks import is_rank_zero

OWNER_FILE = 'run_owner.json'
#: Seconds between two heartbeats of a held folder.
HEARTBEAT_INTERVAL = 10.0
#: Seconds without a heartbeat after which another host's claim is dead.
GRACE_PERIOD = 60.0
# How often a waiting run looks at the claim again.
_POLL = 0.2

_held: dict[str, int] = {}  # folders this process holds (real path) -> depth of holds
_held_lock = threading.Lock()


class FolderInUseError(RuntimeError):
    """A run holds the folder another run asked for; the message names the folder, the
    owner's host and pid, and since when."""


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), to tell it from a later
    process given the same pid; None where that is unknown."""
    try:
        with open('/proc/{}/stat'.format(pid), 'rb') as stream:
            fields = stream.read().rsplit(b')', 1)[1].split()
        return fields[19].decode('ascii')
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: object) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    return started is None or _process_start(pid) in (None, started)


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding='utf-8') as stream:
            record = json.load(stream)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _describe(record: dict[str, Any] | None) -> str:
    if record is None:
        return 'an owner whose record cannot be read'
    return 'pid {} on host {}, since {}'.format(record.get('pid'), record.get('host'),
                                                record.get('since'))


def _heartbeat_age(record: dict[str, Any], path: str) -> float:
    beat = record.get('heartbeat')
    if not isinstance(beat, (int, float)) or isinstance(beat, bool):
        try:
            beat = os.stat(path).st_mtime
        except OSError:
            return 0.0
    return time.time() - float(beat)


def _state(record: dict[str, Any] | None, path: str) -> str:
    """'dead', 'live', or 'late' (another host's owner that missed two heartbeats)."""
    if record is None:
        # Unreadable: a crash cannot leave it (it is published whole), so someone wrote it by
        # hand; judge it by its age alone.
        try:
            age = time.time() - os.stat(path).st_mtime
        except OSError:
            return 'dead'
        return 'dead' if age > GRACE_PERIOD else 'live'
    if record.get('host') == socket.gethostname() and isinstance(record.get('pid'), int):
        return 'live' if _alive(record['pid'], record.get('started')) else 'dead'
    age = _heartbeat_age(record, path)
    if age > GRACE_PERIOD:
        return 'dead'
    return 'late' if age > 2 * HEARTBEAT_INTERVAL else 'live'


class _Claim(object):
    """This process's claim of one folder and the thread that keeps its heartbeat."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.path = os.path.join(folder, OWNER_FILE)
        self.token = secrets.token_hex(8)
        self.record = {'host': socket.gethostname(), 'pid': os.getpid(),
                       'started': _process_start(os.getpid()),
                       'since': datetime.datetime.now().astimezone().isoformat(
                           timespec='seconds'),
                       'token': self.token, 'heartbeat': time.time()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _data(self) -> bytes:
        return json.dumps(self.record).encode('utf-8')

    def try_take(self) -> bool:
        """Publishes the claim; False when the name is taken."""
        data = self._data()
        try:
            _files.write_atomically(self.path, lambda stream: stream.write(data),
                                    overwrite=False)
        except FileExistsError:
            return False
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name='researchutils-folder-heartbeat')
        self._thread.start()
        return True

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL):
            current = _read(self.path)
            if current is None or current.get('token') != self.token:
                warnings.warn('{} no longer holds the claim of this run ({}): another run '
                              'took the folder over; this run goes on but its files may '
                              'be mixed with the other run\'s'.format(self.folder,
                                                                      _describe(current)),
                              RuntimeWarning)
                return
            self.record['heartbeat'] = time.time()
            try:
                _files.write_text(self.path, self._data().decode('utf-8'))
            except OSError:
                pass  # a full disk or a network glitch: the next beat tries again

    def release(self) -> None:
        self._stop.set()
        # At the interpreter's exit (a hold never left, closed as its frame is collected) the
        # daemon thread runs no more: joining it would never return.
        if self._thread is not None and not sys.is_finalizing():
            self._thread.join()
        current = _read(self.path)
        if current is not None and current.get('token') == self.token:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)


def _take_over(path: str, record: dict[str, Any] | None) -> None:
    """Removes the dead claim ``record`` at ``path``, unless it changed meanwhile."""
    aside = '{}.dead-{}'.format(path, secrets.token_hex(6))
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another taker moved it first
    moved = _read(aside)
    if record is not None and moved != record:
        # Renewed (a new heartbeat) or replaced since we judged it: not ours to remove; put
        # it back.
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)
    os.remove(aside)


def _claim(folder: str, wait: float) -> _Claim:
    os.makedirs(folder, exist_ok=True)
    claim = _Claim(folder)
    deadline = time.monotonic() + wait
    said_waiting = False
    while not claim.try_take():
        record = _read(claim.path)
        state = _state(record, claim.path)
        if state == 'dead':
            _take_over(claim.path, record)
            continue
        if state == 'live' and time.monotonic() >= deadline:
            raise FolderInUseError(
                '{} is held by another run ({}); one run owns an experiment folder, so this '
                'one does not start there. Wait for it to end, give this experiment another '
                'name or save_path, or, if that run is gone, delete {}'.format(
                    folder, _describe(record), claim.path))
        if not said_waiting:
            warnings.warn('{} is held by another run ({}); {}'.format(
                folder, _describe(record),
                'waiting up to {:g} s for it to end'.format(wait) if state == 'live' else
                'its heartbeat stopped, so it is taken over once {:g} s have passed '
                'without one'.format(GRACE_PERIOD)), RuntimeWarning, stacklevel=4)
            said_waiting = True
        time.sleep(_POLL)
    return claim


@contextlib.contextmanager
def hold(folder: str, *, wait: float = 0.0, comm: Any = None) -> Iterator[None]:
    """Holds ``folder`` for the run inside the block: claimed (made if missing) on entry,
    released on exit.

    Under ChainerMN, rank 0 claims it for every rank and tells them whether it could, so
    each rank raises the same error.

    Args:
        folder (str): The folder the run writes in.
        wait (float): Seconds to wait for a live owner to end; 0: refuse at once.
        comm: A ChainerMN communicator, or None.

    Raises:
        FolderInUseError: Another run holds ``folder`` (and did not end within ``wait``).
    """
    real = os.path.realpath(folder)
    with _held_lock:
        depth = _held.get(real, 0)
        if depth:
            _held[real] = depth + 1
    if depth:
        try:
            yield
        finally:
            with _held_lock:
                _held[real] -= 1
        return
    claim = None
    error: BaseException | None = None
    if is_rank_zero(comm):
        try:
            claim = _claim(folder, wait)
        except FolderInUseError as refused:
            error = refused
    if comm is not None:
        # ChainerMN's bcast_obj takes an object (never None) from the root, None elsewhere.
        said = (str(error),) if error is not None else ()
        refusal = comm.bcast_obj(said if is_rank_zero(comm) else None, root=0)
        if refusal and error is None:
            error = FolderInUseError(refusal[0])
    if error is not None:
        raise error
    with _held_lock:
        _held[real] = 1
    try:
        yield
    finally:
        with _held_lock:
            del _held[real]
        if claim is not None:
            claim.release()
