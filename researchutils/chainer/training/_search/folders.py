"""Trial folders: each trial of a search trains in a folder that belongs to it alone.

A trial's folder is ``<name>/study_<id>/trial_<number>``: ``<id>`` begins the study's
identity (``studies.study_id``), so a study made anew in the same folder (``search.db``
deleted, an in-memory storage) never meets the folders of an earlier one, whose finished
runs a new trial of the same number would otherwise return as its own. The folder's
owner is recorded in it, ``search_trial.json`` (the study's name and whole id, and the
trial's number), before anything else is written there. A folder found already there is
used only when its record names that same owner: never one recorded for another study or
trial, nor one whose owner is unknown (no record, or one that cannot be read). A retried
trial (a new number taking up a failed trial's parameters) finds the failed trial's folder
with :func:`folder_of`: by that trial's ``folder`` and ``study_id`` user attributes, and
only when the folder's record names that trial of that study.
Tests: ``tests/chainer/training/test_search.py``.
"""
import json
import os
import re

from researchutils.chainer.training import train_utils

OWNER_FILE = 'search_trial.json'
# A trial's user attributes saying which folder it took, for which study id.
FOLDER_ATTR = 'folder'
STUDY_ID_ATTR = 'study_id'
_FOLDER = re.compile('study_[0-9a-f]{8}/trial_[0-9]+')
_STUDY_ID = re.compile('[0-9a-f]{32}')


def is_study_id(value):
    """Whether ``value`` is a study id as a search stores it (32 hexadecimal digits)."""
    return isinstance(value, str) and _STUDY_ID.fullmatch(value) is not None


def relative_folder(study_id, number):
    """The folder of trial ``number`` of study ``study_id``, within the experiment's."""
    return 'study_{}/trial_{}'.format(study_id[:8], number)


def owner(study_name, study_id, number):
    """The record that says a folder is trial ``number``'s of that study."""
    return {'study_name': study_name, 'study_id': study_id, 'trial': number}


def recorded_folder(trial):
    """The folder a trial recorded (its user attribute, which others may write), or None when
    it recorded none or something that is no trial folder."""
    folder = trial.user_attrs.get(FOLDER_ATTR)
    return folder if isinstance(folder, str) and _FOLDER.fullmatch(folder) else None


def folder_of(output_dir, study_name, trial):
    """The folder in ``output_dir`` that ``trial`` (of the study ``study_name``) took, when
    the folder's record names that trial of that study; None otherwise."""
    folder, study_id = recorded_folder(trial), trial.user_attrs.get(STUDY_ID_ATTR)
    if folder is None or not is_study_id(study_id) or folder != relative_folder(
            study_id, trial.number):
        return None
    path = os.path.join(output_dir, folder)
    return path if belongs_to(path, owner(study_name, study_id, trial.number)) else None


def _recorded_owner(folder):
    try:
        with open(os.path.join(folder, OWNER_FILE), encoding='utf-8') as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def belongs_to(folder, expected):
    """Whether ``folder`` holds the record of owner ``expected``."""
    recorded = _recorded_owner(folder)
    return isinstance(recorded, dict) and all(
        recorded.get(key) == value and type(recorded.get(key)) is type(value)
        for key, value in expected.items())


def claim(folder, expected):
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
