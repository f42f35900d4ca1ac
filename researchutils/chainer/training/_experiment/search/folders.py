"""Trial folders: each trial of a search trains in a folder that belongs to it alone.

A trial's folder is ``<name>/study_<id>/trial_<number>``: ``<id>`` begins the study's
identity (``studies.study_id``), so a study made anew in the same folder (``search.db``
deleted, an in-memory storage) never meets the folders of an earlier one, whose finished
runs a new trial of the same number would otherwise return as its own. The folder's
owner is recorded in it, ``search_trial.json`` (the study's name and whole id, the number
of the trial that made it, and ``holder``, the trial training there now), before anything
else is written there. A folder found already there is used only when its record names
that same owner: never one recorded for another study or trial, nor one whose owner is
unknown (no record, or one that cannot be read). :func:`folder_of` finds a trial's folder
by the trial's ``folder`` and ``study_id`` user attributes, when the record says that
trial holds it.

A retry (``retries.py``: a new trial taking up the parameters of trials whose workers
died) takes up the folder they trained in, so that it resumes from their snapshots
(:func:`take_up`, :func:`retried_folder`, :func:`hand_over`). Two retries of one failed
trial may exist (two processes found it dead at once): the folder's lineage decides which
one takes it up. The lineage is a file per retry in ``study_<id>/retries/``,
``trial_<first>_<k>.json`` naming the k-th retry of the series begun by trial ``<first>``;
each is published with a hard link, which fails when the name exists, so of two
processes only one can write it, on a local disk and over NFS alike, and no lock is left
behind by a process killed meanwhile. A retry writes the files of its series up to its
own (those of predecessors killed before they wrote theirs on their behalf); one that
finds a file naming another trial is a duplicate, and ends without training. The record
is then rewritten, atomically, with the retry as holder. A retry whose predecessors left
no folder of theirs (or one recorded for anyone outside the series) starts afresh in its
own folder: nothing of another trial is ever used.
Tests: ``tests/chainer/training/test_search.py`` and ``test_search_resume.py``.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict, TypeGuard

from researchutils import _files
from researchutils.chainer.training import train_utils

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

OWNER_FILE = 'search_trial.json'
# A trial's user attributes saying which folder it took, for which study id.
FOLDER_ATTR = 'folder'
STUDY_ID_ATTR = 'study_id'
RETRIES_FOLDER = 'retries'
_FOLDER = re.compile('study_[0-9a-f]{8}/trial_([0-9]+)')
_STUDY_ID = re.compile('[0-9a-f]{32}')


class Owner(TypedDict):
    """A folder's record (:data:`OWNER_FILE`): whose folder it is, who trains in it."""

    study_name: str
    study_id: str
    trial: int
    holder: int


def is_study_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a study id as a search stores it (32 hexadecimal digits)."""
    return isinstance(value, str) and _STUDY_ID.fullmatch(value) is not None


def relative_folder(study_id: str, number: int) -> str:
    """The folder of trial ``number`` of study ``study_id``, within the experiment's."""
    return 'study_{}/trial_{}'.format(study_id[:8], number)


def owner(study_name: str, study_id: str, number: int, holder: int | None = None) -> Owner:
    """The record that says a folder is trial ``number``'s of that study, trained in by
    trial ``holder`` (by default ``number`` itself)."""
    return {'study_name': study_name, 'study_id': study_id, 'trial': number,
            'holder': number if holder is None else holder}


def recorded_folder(trial: FrozenTrial) -> str | None:
    """The folder a trial recorded (its user attribute, which others may write), or None when
    it recorded none or something that is no trial folder."""
    folder = trial.user_attrs.get(FOLDER_ATTR)
    return folder if isinstance(folder, str) and _FOLDER.fullmatch(folder) else None


def _plain_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _holder(record: object, study_name: str, study_id: str, number: int) -> int | None:
    """The trial holding a folder made by trial ``number`` of that study, by its record;
    None when the record is not such a folder's (another study's, another trial's, none).
    A record without ``holder`` (written before retries) is held by its maker."""
    if not (isinstance(record, dict) and record.get('study_name') == study_name
            and type(record.get('study_name')) is str and record.get('study_id') == study_id
            and type(record.get('study_id')) is str and _plain_int(record.get('trial'))
            and record['trial'] == number):
        return None
    holder = record.get('holder', number)
    return holder if _plain_int(holder) else None


def _recorded_folder(output_dir: str, study_name: str, trial: FrozenTrial
                     ) -> tuple[str, int | None] | tuple[None, None]:
    """The path of the folder ``trial`` recorded, and its holder by the folder's record."""
    folder, study_id = recorded_folder(trial), trial.user_attrs.get(STUDY_ID_ATTR)
    if folder is None or not is_study_id(study_id) or not folder.startswith(
            'study_{}/'.format(study_id[:8])):
        return None, None
    path = os.path.join(output_dir, folder)
    maker = maker_of(path)
    return path, _holder(_recorded_owner(path), study_name, study_id, maker)


def folder_of(output_dir: str, study_name: str, trial: FrozenTrial) -> str | None:
    """The folder in ``output_dir`` that ``trial`` (of the study ``study_name``) trained in,
    when the folder's record says that trial holds it; None otherwise."""
    path, holder = _recorded_folder(output_dir, study_name, trial)
    return path if holder is not None and holder == trial.number else None


def retried_folder(output_dir: str, study_name: str, study_id: str,
                   chain: Sequence[FrozenTrial]) -> str | None:
    """The folder that the newest of the failed trials ``chain`` (FrozenTrials of the study
    ``study_id``, oldest first) trained in, when its record says one of them holds it;
    None otherwise."""
    numbers = {trial.number for trial in chain}
    for trial in reversed(chain):
        if trial.user_attrs.get(STUDY_ID_ATTR) != study_id:
            continue
        path, holder = _recorded_folder(output_dir, study_name, trial)
        if holder in numbers:
            return path
    return None


def take_up(output_dir: str, study_name: str, study_id: str, series: Sequence[int],
            number: int) -> tuple[bool, int | None]:
    """Makes trial ``number`` the retry of the failed trials ``series`` (their numbers,
    oldest first) in the lineage: writes the lineage's files up to its own.

    Returns:
        tuple: ``(True, number)`` when ``number`` took the series up; else ``(False,
        other)``, ``other`` the trial another process wrote in its place (None when its
        file cannot be read): ``number`` is a duplicate.
    """
    folder = os.path.join(output_dir, 'study_{}'.format(study_id[:8]), RETRIES_FOLDER)
    os.makedirs(folder, exist_ok=True)
    members = list(series) + [number]
    for generation in range(1, len(members)):
        record = {'study_name': study_name, 'study_id': study_id, 'series': members[0],
                  'retry': generation, 'trial': members[generation]}
        path = os.path.join(folder, 'trial_{}_{}.json'.format(members[0], generation))
        try:
            _write_new(path, json.dumps(record).encode('utf-8'))
        except FileExistsError:
            written = _read_json(path)
            if written != record:
                other = written.get('trial') if isinstance(written, dict) else None
                return False, other if _plain_int(other) else None
    return True, number


def _write_new(path: str, data: bytes) -> None:
    """Writes the new file ``path`` whole; FileExistsError when the name is taken."""
    _files.write_atomically(path, lambda stream: stream.write(data), overwrite=False)


def hand_over(folder: str, study_name: str, study_id: str, maker: int, holder: int) -> None:
    """Records, atomically, that trial ``holder`` now trains in the folder trial ``maker``
    made."""
    train_utils.atomic_write_text(os.path.join(folder, OWNER_FILE), json.dumps(
        owner(study_name, study_id, maker, holder)))


def maker_of(folder: str) -> int:
    """The number of the trial that made ``folder`` (a trial folder's path), by its name."""
    return int(os.path.basename(os.path.normpath(folder)).split('_')[1])


def _read_json(path: str) -> object:
    try:
        with open(path, encoding='utf-8') as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def _recorded_owner(folder: str) -> object:
    return _read_json(os.path.join(folder, OWNER_FILE))


def belongs_to(folder: str, expected: Owner) -> bool:
    """Whether ``folder`` holds the record of owner ``expected`` (an :func:`owner`)."""
    holder = _holder(_recorded_owner(folder), expected['study_name'], expected['study_id'],
                     expected['trial'])
    return holder is not None and holder == expected['holder']


def claim(folder: str, expected: Owner) -> None:
    """Makes ``folder`` trial ``expected``'s: a new folder with the owner's record, or one
    already recorded for that owner. Raises FileExistsError for a folder of anyone else."""
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    try:
        os.mkdir(folder)
    except FileExistsError:
        if belongs_to(folder, expected):
            return
        recorded = _recorded_owner(folder)
        raise FileExistsError(
            'search: the folder {} of trial {} of the study {!r} exists already, recorded for '
            '{}: a trial never trains in a folder that is not its own; move it away'.format(
                folder, expected['trial'], expected['study_name'],
                'an unknown owner' if recorded is None else recorded)) from None
    train_utils.atomic_write_text(os.path.join(folder, OWNER_FILE), json.dumps(expected))
