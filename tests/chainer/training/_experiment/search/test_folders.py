"""Trial folders: which folder a trial gets, whose it is by its record, and which folder a
retry of failed trials takes up; real files in tmp_path, real FrozenTrials of Optuna
studies."""
import json
import os

import pytest

from researchutils.chainer.training._experiment.search import folders

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

NAME = 'search'
STUDY_ID = '5f3a9c0e' + '7b' * 12
# Another study of the same name (made anew in the same folder), another prefix.
OTHER_ID = '0d41e8b2' + '9c' * 12


def _trials(*user_attrs):
    """FrozenTrials 0, 1, ... of a study, failed, the ``i``-th with ``user_attrs[i]``."""
    study = optuna.create_study(study_name=NAME)
    for attrs in user_attrs:
        study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL,
                                                  user_attrs=attrs))
    return study.trials


def _attrs(number, study_id=STUDY_ID):
    """The user attributes a trial records when it takes folder ``number`` of ``study_id``."""
    return {folders.STUDY_ID_ATTR: study_id,
            folders.FOLDER_ATTR: folders.relative_folder(study_id, number)}


def _claimed(output_dir, number, study_id=STUDY_ID, name=NAME):
    """Claims trial ``number``'s folder (as the search does for a new trial); its path."""
    path = os.path.join(str(output_dir), folders.relative_folder(study_id, number))
    folders.claim(path, folders.owner(name, study_id, number))
    return path


def _write_record(folder, record):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, folders.OWNER_FILE), 'w', encoding='utf-8') as stream:
        stream.write(record if isinstance(record, str) else json.dumps(record))


# -- Names -------------------------------------------------------------------------------

def test_a_trial_folder_is_named_by_its_study_prefix_and_number():
    assert folders.relative_folder(STUDY_ID, 7) == 'study_5f3a9c0e/trial_7'
    assert folders.relative_folder(OTHER_ID, 12) == 'study_0d41e8b2/trial_12'


@pytest.mark.parametrize('path', ['out/study_5f3a9c0e/trial_12', 'out/study_5f3a9c0e/trial_12/',
                                  'trial_12'])
def test_the_maker_of_a_folder_is_the_number_in_its_name(path):
    assert folders.maker_of(path) == 12


@pytest.mark.parametrize('value, expected', [
    (STUDY_ID, True), (OTHER_ID, True), ('0' * 32, True),
    (STUDY_ID.upper(), False), (STUDY_ID[:-1], False), (STUDY_ID + '0', False),
    ('g' + STUDY_ID[1:], False), (' ' + STUDY_ID[1:], False), (STUDY_ID + '\n', False),
    (int(STUDY_ID, 16), False), (STUDY_ID.encode(), False), (None, False)])
def test_a_study_id_is_32_lowercase_hexadecimal_digits(value, expected):
    assert folders.is_study_id(value) is expected


def test_an_owner_is_held_by_its_maker_unless_another_holder_is_named():
    assert folders.owner(NAME, STUDY_ID, 3) == {
        'study_name': NAME, 'study_id': STUDY_ID, 'trial': 3, 'holder': 3}
    assert folders.owner(NAME, STUDY_ID, 3, 0)['holder'] == 0
    assert folders.owner(NAME, STUDY_ID, 3, 8)['holder'] == 8


def test_the_recorded_folder_is_the_trial_folder_its_attribute_names():
    trial, = _trials(_attrs(4))
    assert folders.recorded_folder(trial) == 'study_5f3a9c0e/trial_4'


@pytest.mark.parametrize('folder', [
    None, 4, 'study_5f3a9c0e/trial_', 'study_5f3a9c0e/trial_x', 'study_5f3a9c0/trial_4',
    'study_5F3A9C0E/trial_4', 'study_5f3a9c0e/trial_4/..', '../study_5f3a9c0e/trial_4',
    'study_5f3a9c0e/trial_4/x', 'study_5f3a9c0e\\trial_4', '/study_5f3a9c0e/trial_4'])
def test_an_attribute_that_names_no_trial_folder_records_none(folder):
    attrs = {folders.STUDY_ID_ATTR: STUDY_ID}
    if folder is not None:
        attrs[folders.FOLDER_ATTR] = folder
    trial, = _trials(attrs)
    assert folders.recorded_folder(trial) is None


# -- Claiming a new trial's folder -------------------------------------------------------

def test_a_claimed_folder_is_made_with_its_owner_recorded(tmp_path):
    output_dir = tmp_path / 'not' / 'made' / 'yet'
    path = _claimed(output_dir, 0)
    assert os.path.isdir(path)
    assert path == os.path.join(str(output_dir), 'study_5f3a9c0e', 'trial_0')
    with open(os.path.join(path, folders.OWNER_FILE), encoding='utf-8') as stream:
        assert json.load(stream) == folders.owner(NAME, STUDY_ID, 0)
    assert folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0))


def test_trials_of_one_study_claim_folders_side_by_side(tmp_path):
    first, second = _claimed(tmp_path, 0), _claimed(tmp_path, 1)
    assert sorted(os.listdir(tmp_path / 'study_5f3a9c0e')) == ['trial_0', 'trial_1']
    assert folders.belongs_to(first, folders.owner(NAME, STUDY_ID, 0))
    assert folders.belongs_to(second, folders.owner(NAME, STUDY_ID, 1))
    assert not folders.belongs_to(first, folders.owner(NAME, STUDY_ID, 1))


def test_a_folder_is_claimed_again_by_its_owner_and_keeps_what_it_holds(tmp_path):
    path = _claimed(tmp_path, 0)
    with open(os.path.join(path, 'snapshot'), 'w', encoding='utf-8') as stream:
        stream.write('trained')
    assert _claimed(tmp_path, 0) == path
    with open(os.path.join(path, 'snapshot'), encoding='utf-8') as stream:
        assert stream.read() == 'trained'
    assert folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0))


def _contents(folder):
    """The files of ``folder``, name to bytes."""
    contents = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), 'rb') as stream:
            contents[name] = stream.read()
    return contents


def _refusal(path, expected):
    """The message of claim's refusal of ``path`` for ``expected``; the folder's files are
    left as they were."""
    before = _contents(path)
    with pytest.raises(FileExistsError) as raised:
        folders.claim(path, expected)
    assert _contents(path) == before
    message = str(raised.value)
    assert path in message
    return message


def test_a_folder_without_a_record_is_refused_as_of_an_unknown_owner(tmp_path):
    path = os.path.join(str(tmp_path), folders.relative_folder(STUDY_ID, 0))
    os.makedirs(path)
    message = _refusal(path, folders.owner(NAME, STUDY_ID, 0))
    assert 'unknown' in message
    assert not os.path.exists(os.path.join(path, folders.OWNER_FILE))


@pytest.mark.parametrize('record', ['{"study_name": "search", ', '', '[1, 2]', 'null'])
def test_a_folder_whose_record_cannot_be_read_is_refused(tmp_path, record):
    path = os.path.join(str(tmp_path), folders.relative_folder(STUDY_ID, 0))
    _write_record(path, record)
    _refusal(path, folders.owner(NAME, STUDY_ID, 0))


def _record(**changes):
    record = dict(folders.owner(NAME, STUDY_ID, 0))
    record.update(changes)
    return record


@pytest.mark.parametrize('record', [
    _record(study_name='other search'), _record(study_id=OTHER_ID), _record(trial=1),
    _record(trial=True), _record(trial='0'), _record(trial=0.0), _record(study_name=None),
    _record(study_id=None), _record(holder=1), _record(holder='0'), _record(holder=False),
    _record(holder=None), {'study_id': STUDY_ID, 'trial': 0, 'holder': 0},
    {'study_name': NAME, 'trial': 0, 'holder': 0},
    {'study_name': NAME, 'study_id': STUDY_ID, 'holder': 0}])
def test_a_folder_recorded_for_anyone_else_is_refused_naming_its_owner(tmp_path, record):
    path = os.path.join(str(tmp_path), folders.relative_folder(STUDY_ID, 0))
    _write_record(path, record)
    assert not folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0))
    message = _refusal(path, folders.owner(NAME, STUDY_ID, 0))
    assert repr(NAME) in message
    assert 'unknown' not in message


def test_a_refusal_names_the_trial_and_what_the_folder_is_recorded_for(tmp_path):
    # A folder whose name does not give the trial's number away.
    path = os.path.join(str(tmp_path), 'chosen')
    _write_record(path, folders.owner('other search', OTHER_ID, 5))
    message = _refusal(path, folders.owner(NAME, STUDY_ID, 4321)).replace(path, '')
    assert '4321' in message
    assert 'other search' in message and OTHER_ID in message


def test_a_record_written_before_retries_is_held_by_its_maker(tmp_path):
    path = os.path.join(str(tmp_path), folders.relative_folder(STUDY_ID, 0))
    record = _record()
    del record['holder']
    _write_record(path, record)
    assert folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0))
    assert not folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0, 1))
    folders.claim(path, folders.owner(NAME, STUDY_ID, 0))
    trial, = _trials(_attrs(0))
    assert folders.folder_of(str(tmp_path), NAME, trial) == path


def test_a_folder_handed_over_is_refused_to_its_maker(tmp_path):
    path = _claimed(tmp_path, 0)
    folders.hand_over(path, NAME, STUDY_ID, 0, 2)
    assert folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0, 2))
    assert not folders.belongs_to(path, folders.owner(NAME, STUDY_ID, 0))
    _refusal(path, folders.owner(NAME, STUDY_ID, 0))


# -- Finding a trial's folder ------------------------------------------------------------

def test_a_trial_finds_the_folder_it_claimed(tmp_path):
    path = _claimed(tmp_path, 1)
    _claimed(tmp_path, 0)
    trials = _trials(_attrs(0), _attrs(1))
    assert folders.folder_of(str(tmp_path), NAME, trials[1]) == path
    assert folders.folder_of(str(tmp_path), NAME, trials[0]) == os.path.join(
        str(tmp_path), 'study_5f3a9c0e', 'trial_0')


def test_a_trial_of_another_study_name_finds_no_folder(tmp_path):
    _claimed(tmp_path, 0)
    trial, = _trials(_attrs(0))
    assert folders.folder_of(str(tmp_path), 'other search', trial) is None


def test_a_trial_whose_folder_is_missing_or_unrecorded_finds_none(tmp_path):
    trial, = _trials(_attrs(0))
    assert folders.folder_of(str(tmp_path), NAME, trial) is None
    os.makedirs(os.path.join(str(tmp_path), folders.relative_folder(STUDY_ID, 0)))
    assert folders.folder_of(str(tmp_path), NAME, trial) is None


def test_a_trial_without_recorded_folder_or_study_finds_none(tmp_path):
    _claimed(tmp_path, 0)
    attrs = _attrs(0)
    no_folder, no_study, bad_folder, = _trials(
        {folders.STUDY_ID_ATTR: STUDY_ID}, {folders.FOLDER_ATTR: attrs[folders.FOLDER_ATTR]},
        dict(attrs, folder='study_5f3a9c0e/trial_0/'))
    for trial in (no_folder, no_study, bad_folder):
        assert folders.folder_of(str(tmp_path), NAME, trial) is None


def test_a_trial_whose_study_attribute_is_no_study_id_finds_none(tmp_path):
    # The folder is recorded for exactly the (short) id the trial names; that id is not
    # a study's, so the trial has no folder.
    short = STUDY_ID[:8]
    _claimed(tmp_path, 0, study_id=short)
    trial, = _trials({folders.STUDY_ID_ATTR: short,
                      folders.FOLDER_ATTR: folders.relative_folder(short, 0)})
    assert folders.folder_of(str(tmp_path), NAME, trial) is None


def test_a_trial_finds_no_folder_of_a_study_other_than_its_own(tmp_path):
    # Its attributes were written by others: they name a folder of another study, which
    # holds a record for this trial's study.
    path = os.path.join(str(tmp_path), folders.relative_folder(OTHER_ID, 0))
    _write_record(path, folders.owner(NAME, STUDY_ID, 0))
    trial, = _trials({folders.STUDY_ID_ATTR: STUDY_ID,
                      folders.FOLDER_ATTR: folders.relative_folder(OTHER_ID, 0)})
    assert folders.folder_of(str(tmp_path), NAME, trial) is None


def test_a_study_made_anew_never_finds_the_folders_of_the_earlier_one(tmp_path):
    _claimed(tmp_path, 0, study_id=OTHER_ID)
    new, = _trials(_attrs(0))
    assert folders.folder_of(str(tmp_path), NAME, new) is None
    path = _claimed(tmp_path, 0)
    assert path != os.path.join(str(tmp_path), folders.relative_folder(OTHER_ID, 0))
    assert folders.folder_of(str(tmp_path), NAME, new) == path
    old, = _trials(_attrs(0, OTHER_ID))
    assert folders.folder_of(str(tmp_path), NAME, old) == os.path.join(
        str(tmp_path), folders.relative_folder(OTHER_ID, 0))


def test_a_folder_handed_over_is_found_by_its_holder_only(tmp_path):
    path = _claimed(tmp_path, 0)
    folders.hand_over(path, NAME, STUDY_ID, 0, 2)
    maker, _, holder = _trials(_attrs(0), {}, _attrs(0))
    assert folders.folder_of(str(tmp_path), NAME, holder) == path
    assert folders.folder_of(str(tmp_path), NAME, maker) is None


# -- Retries -----------------------------------------------------------------------------

def _retry_file(output_dir, study_id, first, generation):
    path = os.path.join(str(output_dir), 'study_{}'.format(study_id[:8]), folders.RETRIES_FOLDER,
                        'trial_{}_{}.json'.format(first, generation))
    with open(path, encoding='utf-8') as stream:
        return json.load(stream)


def test_a_retry_takes_up_its_series_and_records_it(tmp_path):
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (True, 3)
    assert _retry_file(tmp_path, STUDY_ID, 0, 1) == {
        'study_name': NAME, 'study_id': STUDY_ID, 'series': 0, 'retry': 1, 'trial': 3}
    assert os.listdir(tmp_path / 'study_5f3a9c0e' / folders.RETRIES_FOLDER) == [
        'trial_0_1.json']


def test_a_retry_taking_up_its_series_again_is_still_its_retry(tmp_path):
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (True, 3)
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (True, 3)


def test_a_second_retry_of_one_failed_trial_is_a_duplicate_of_the_first(tmp_path):
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (True, 3)
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 4) == (False, 3)
    assert _retry_file(tmp_path, STUDY_ID, 0, 1)['trial'] == 3


def test_a_retry_writes_the_lineage_of_predecessors_killed_before_they_wrote_it(tmp_path):
    # Trial 3 retried trial 0 and was killed before it wrote its file; trial 5 retries both.
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0, 3], 5) == (True, 5)
    assert _retry_file(tmp_path, STUDY_ID, 0, 1)['trial'] == 3
    assert _retry_file(tmp_path, STUDY_ID, 0, 2) == {
        'study_name': NAME, 'study_id': STUDY_ID, 'series': 0, 'retry': 2, 'trial': 5}
    # Trial 3's own files agree; another retry of 0 and 3 is a duplicate of 5.
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (True, 3)
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0, 3], 6) == (False, 5)
    # A retry of trial 0 taking the place of 3 is a duplicate of 3.
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 4) == (False, 3)


def test_series_of_other_first_trials_and_other_studies_are_apart(tmp_path):
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (True, 3)
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [1], 4) == (True, 4)
    assert folders.take_up(str(tmp_path), NAME, OTHER_ID, [0], 5) == (True, 5)
    assert _retry_file(tmp_path, OTHER_ID, 0, 1)['trial'] == 5
    assert _retry_file(tmp_path, STUDY_ID, 1, 1)['trial'] == 4


def test_a_lineage_file_written_for_another_study_name_makes_a_duplicate(tmp_path):
    assert folders.take_up(str(tmp_path), 'other search', STUDY_ID, [0], 3) == (True, 3)
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (False, 3)


@pytest.mark.parametrize('written', [
    '{"trial": ', '[3]', '"trial"', '{"study_name": "search"}', '{"trial": true}',
    '{"trial": "3"}'])
def test_a_lineage_file_that_names_no_trial_makes_a_duplicate_of_an_unknown_one(tmp_path,
                                                                               written):
    folder = tmp_path / 'study_5f3a9c0e' / folders.RETRIES_FOLDER
    folder.mkdir(parents=True)
    (folder / 'trial_0_1.json').write_text(written, encoding='utf-8')
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 3) == (False, None)
    assert (folder / 'trial_0_1.json').read_text(encoding='utf-8') == written


def test_a_retry_finds_the_folder_of_the_trial_it_retries(tmp_path):
    path = _claimed(tmp_path, 0)
    chain = _trials(_attrs(0))
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) == path


def test_a_retry_finds_the_folder_a_retry_before_it_held(tmp_path):
    # Trial 0 made the folder, retry 2 took it up and failed too: retry 3 finds it.
    path = _claimed(tmp_path, 0)
    folders.hand_over(path, NAME, STUDY_ID, 0, 2)
    trials = _trials(_attrs(0), {}, _attrs(0))
    chain = [trials[0], trials[2]]
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) == path


def test_a_retry_finds_the_newest_folder_of_its_series(tmp_path):
    # Retry 1 started afresh in its own folder (trial 0 had left none it could take).
    _claimed(tmp_path, 0)
    newest = _claimed(tmp_path, 1)
    chain = _trials(_attrs(0), _attrs(1))
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) == newest


def test_a_retry_passes_over_trials_recorded_for_another_study(tmp_path):
    path = _claimed(tmp_path, 0)
    _claimed(tmp_path, 1, study_id=OTHER_ID)
    chain = _trials(_attrs(0), _attrs(1, OTHER_ID))
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) == path
    assert folders.retried_folder(str(tmp_path), NAME, OTHER_ID, chain) == os.path.join(
        str(tmp_path), folders.relative_folder(OTHER_ID, 1))


def test_a_retry_never_takes_a_folder_held_outside_its_series(tmp_path):
    path = _claimed(tmp_path, 0)
    folders.hand_over(path, NAME, STUDY_ID, 0, 7)
    chain = _trials(_attrs(0))
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) is None


@pytest.mark.parametrize('record', [None, '{"study_name": ', _record(study_name='other')])
def test_a_retry_never_takes_a_folder_of_unknown_or_other_owner(tmp_path, record):
    path = os.path.join(str(tmp_path), folders.relative_folder(STUDY_ID, 0))
    os.makedirs(path)
    if record is not None:
        _write_record(path, record)
    chain = _trials(_attrs(0))
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) is None


def test_a_retry_of_trials_that_left_no_folder_finds_none(tmp_path):
    chain = _trials({}, _attrs(1))
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, chain) is None
    assert folders.retried_folder(str(tmp_path), NAME, STUDY_ID, []) is None


def test_a_retry_takes_up_its_folder_and_the_folder_then_is_its_own(tmp_path):
    # The whole course of a retry: trial 0 trained in its folder and died; trial 1 retries
    # it, takes the series up, finds the folder and is handed it; a duplicate retry 2 is
    # refused, and trial 0 can no longer claim its folder.
    path = _claimed(tmp_path, 0)
    with open(os.path.join(path, 'snapshot_iter_10'), 'w', encoding='utf-8') as stream:
        stream.write('state')
    trials = _trials(_attrs(0), _attrs(0))
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 1) == (True, 1)
    found = folders.retried_folder(str(tmp_path), NAME, STUDY_ID, trials[:1])
    assert found == path
    folders.hand_over(found, NAME, STUDY_ID, folders.maker_of(found), 1)
    assert folders.folder_of(str(tmp_path), NAME, trials[1]) == path
    assert folders.folder_of(str(tmp_path), NAME, trials[0]) is None
    assert 'snapshot_iter_10' in os.listdir(path)
    assert folders.take_up(str(tmp_path), NAME, STUDY_ID, [0], 2) == (False, 1)
    with pytest.raises(FileExistsError):
        folders.claim(path, folders.owner(NAME, STUDY_ID, 0))
