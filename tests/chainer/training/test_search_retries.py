"""Retried search trials, in this process: which folder a retry takes up, duplicates, a
series of retries, and what search.json says of them (real Optuna, real SQLite files,
real signals to this process; tests/chainer/training/test_search_resume.py does it with
worker processes)."""
import json
import os
import signal
import subprocess
import sys

import chainer
import pytest

from researchutils.chainer.training import load_json
from researchutils.chainer.training._experiment.search import folders, retries
from researchutils.chainer.training.extensions import Preempted
from tests.chainer.training import search_tasks
from tests.support import search_nodes, search_studies
from tests.support.processes import REPO

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

STATES = optuna.trial.TrialState
pytestmark = search_studies.FEW_COMPLETE  # each search here ends with one trial complete
LR = search_tasks.LR_KEY
RATE = 0.1
RATES = [RATE, 0.03]


class SignalAt(chainer.training.Extension):
    """Sends SIGTERM to this process once the Trainer reaches ``iteration``, as a cluster
    stopping the job would."""

    trigger = 1, 'iteration'

    def __init__(self, iteration):
        self.iteration = iteration

    def __call__(self, trainer):
        if trainer.updater.iteration == self.iteration:
            os.kill(os.getpid(), signal.SIGTERM)


def search(tmp_path, n_trials, *extensions):
    experiment = search_tasks.search_experiment(
        str(tmp_path), search_tasks.search_params(3, RATES), extensions=list(extensions))
    return experiment.search(*search_tasks.search_managers(), n_trials=n_trials,
                             pruner=optuna.pruners.NopPruner(),
                             sampler=optuna.samplers.RandomSampler(seed=0))


def study_of(tmp_path):
    return search_studies.load(search_nodes.default_url(tmp_path))


def test_a_storage_url_whose_driver_is_missing_fails_before_any_trial(tmp_path):
    pytest.importorskip('sqlalchemy')
    try:
        import psycopg2  # noqa: F401
        pytest.skip('psycopg2 is installed here: its absence cannot be shown')
    except ImportError:
        pass
    experiment = search_tasks.search_experiment(str(tmp_path))
    with pytest.raises(ImportError) as raised:
        experiment.search(*search_tasks.search_managers(), n_trials=1,
                          storage='postgresql+psycopg2://u:pw@127.0.0.1:1/db')
    message = str(raised.value)
    assert 'psycopg2' in message and 'psycopg2-binary' in message
    assert 'researchutils[search-db]' in message and 'pw' not in message
    # Before any trial: nothing written (no folder, no study file).
    assert not os.path.exists(tmp_path / 'exp')


@pytest.mark.slow(reason='three searches of one trial, two stopped by a signal: 20-40 s')
def test_a_trial_stopped_by_a_signal_is_failed_and_retried_before_the_process_exits(
        tmp_path, tmp_path_factory):
    reference = search_nodes.uninterrupted(tmp_path_factory, RATE)
    search_nodes.enqueue(search_nodes.default_url(tmp_path), [RATE])
    with pytest.raises(Preempted):
        search(tmp_path, 1, SignalAt(6))
    study = study_of(tmp_path)
    assert [t.state for t in study.trials] == [STATES.FAIL, STATES.WAITING]
    assert study.trials[1].params == {LR: RATE}
    # A retry of the retry, stopped too, then a third run: each takes the folder up.
    with pytest.raises(Preempted):
        search(tmp_path, 1, SignalAt(9))
    summary = search(tmp_path, 1)
    study = study_of(tmp_path)
    assert [t.state for t in study.trials] == [STATES.FAIL, STATES.FAIL, STATES.COMPLETE]
    assert search_studies.retry_history(study.trials[2]) == [0, 1]
    assert [t.user_attrs['resumed_at']['iteration'] for t in study.trials[1:]] == [6, 9]
    folder = folders.folder_of(str(tmp_path / 'exp'), 'exp', study.trials[2])
    assert folder == str(tmp_path / 'exp' / study.trials[0].user_attrs['folder'])
    assert study.trials[2].value == reference['value']
    assert search_nodes.arrays(os.path.join(folder, 'best_model.npz')) == \
        reference['best_model']
    assert search_nodes.log_rows(folder) == reference['log']
    # The lineage: the first retry of trial 0 is trial 1, the second trial 2.
    lineage = tmp_path / 'exp' / os.path.dirname(study.trials[0].user_attrs['folder']) / \
        folders.RETRIES_FOLDER
    assert sorted(os.listdir(lineage)) == ['trial_0_1.json', 'trial_0_2.json']
    assert [entry['number'] for entry in summary['trials']] == [2]
    assert summary['trials'][0]['retry_of'] == [0, 1]


@pytest.mark.slow(reason='two searches, one stopped by a signal: 15-30 s')
def test_a_second_retry_of_one_failed_trial_ends_at_once_and_is_not_counted(tmp_path):
    search_nodes.enqueue(search_nodes.default_url(tmp_path), [RATE])
    with pytest.raises(Preempted):
        search(tmp_path, 1, SignalAt(6))
    study = study_of(tmp_path)
    # A second process found the trial dead too, and enqueued a retry of its own.
    retries.retry(study, study.trials[0])
    summary = search(tmp_path, 2)
    study = study_of(tmp_path)
    states = [t.state for t in study.trials]
    assert states[:3] == [STATES.FAIL, STATES.COMPLETE, STATES.FAIL]
    duplicate = study.trials[2]
    assert duplicate.user_attrs['surplus'] is True and duplicate.user_attrs['duplicate_of'] == 1
    assert 'folder' not in duplicate.user_attrs  # it took no folder
    # Two trials count: the retry (resumed) and a new one; the duplicate is not there.
    assert states[3:] == [STATES.COMPLETE] and len(states) == 4
    assert [(entry['number'], entry['retry_of']) for entry in summary['trials']] == [
        (1, [0]), (3, [])]
    saved = load_json(tmp_path / 'exp' / 'search.json')
    assert [entry['number'] for entry in saved['trials']] == [1, 3]


def failed_trial(study, folder=None, rate=RATE, study_id=None):
    """Adds a FAIL trial of ``rate`` that recorded ``folder``; returns its number."""
    user_attrs = {}
    if folder is not None:
        user_attrs = {'folder': folder, 'study_id': study_id}
    study.add_trial(optuna.trial.create_trial(
        state=STATES.FAIL, params={LR: rate},
        distributions={LR: optuna.distributions.CategoricalDistribution(RATES)},
        user_attrs=user_attrs))
    return study.trials[-1].number


def new_study(tmp_path):
    """The experiment's default study, opened by a search once (so that it has its id),
    with no trial."""
    search(tmp_path, 1)
    study = study_of(tmp_path)
    return study, study.user_attrs['researchutils_study_id']


@pytest.mark.slow(reason='two searches of a trial each: 10-15 s')
@pytest.mark.parametrize('kind', ['missing', 'another trial', 'another study', 'no record'])
def test_a_retry_whose_failed_trial_left_no_folder_of_its_own_starts_afresh(tmp_path, kind):
    study, study_id = new_study(tmp_path)
    number = len(study.trials)
    folder = folders.relative_folder(study_id, number)
    path = tmp_path / 'exp' / folder
    if kind != 'missing':
        os.makedirs(path)
        record = {'another trial': folders.owner('exp', study_id, number + 5),
                  'another study': folders.owner('exp', 'cd' * 16, number),
                  'no record': None}[kind]
        if record is not None:
            (path / folders.OWNER_FILE).write_text(json.dumps(record))
        (path / 'snapshot_epoch_1').write_text('not this trial\'s')
    before = sorted(os.listdir(path)) if kind != 'missing' else None
    number = failed_trial(study, folder, study_id=study_id)
    retries.retry(study, study.trials[number])
    summary = search(tmp_path, 2)
    retry = study_of(tmp_path).trials[-1]
    assert retry.state == STATES.COMPLETE and retry.system_attrs['retry_history'] == [number]
    assert retry.user_attrs['folder'] == folders.relative_folder(study_id, retry.number)
    assert 'resumed_at' not in retry.user_attrs
    assert summary['trials'][-1]['resumed_at'] is None
    if kind != 'missing':  # the foreign folder is left as it was
        assert sorted(os.listdir(path)) == before


@pytest.mark.slow(reason='two searches of a trial each: 10-15 s')
@pytest.mark.parametrize('kind', ['other parameters', 'not failed', 'later trial'])
def test_a_retry_history_that_does_not_hold_is_not_followed(tmp_path, kind):
    study, study_id = new_study(tmp_path)
    first = study.trials[0]  # COMPLETE (its run finished), with a folder it holds
    rate = first.params[LR]
    if kind == 'other parameters':  # a failed trial that holds a folder of its own
        number = len(study.trials)
        folder = folders.relative_folder(study_id, number)
        folders.claim(str(tmp_path / 'exp' / folder), folders.owner('exp', study_id, number))
        failed_trial(study, folder, rate=[r for r in RATES if r != rate][0],
                     study_id=study_id)
    else:
        folder = first.user_attrs['folder']
        number = first.number if kind == 'not failed' else len(study.trials) + 3
    study.add_trial(optuna.trial.create_trial(
        state=STATES.WAITING, params={LR: rate},
        distributions={LR: optuna.distributions.CategoricalDistribution(RATES)},
        system_attrs={'failed_trial': number, 'retry_history': [number]}))
    owner_before = (tmp_path / 'exp' / folder / folders.OWNER_FILE).read_text()
    search(tmp_path, 2)
    retry = study_of(tmp_path).trials[-1]
    assert retry.state == STATES.COMPLETE and retry.system_attrs['retry_history'] == [number]
    assert retry.user_attrs['folder'] == folders.relative_folder(study_id, retry.number)
    assert 'resumed_at' not in retry.user_attrs
    assert (tmp_path / 'exp' / folder / folders.OWNER_FILE).read_text() == owner_before


TAKE_UP = '''
import os, sys, time
from researchutils.chainer.training._experiment.search import folders
output_dir, study_id, number, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
print('ready', flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
print(folders.take_up(output_dir, 'exp', study_id, [3], number)[0])
'''


@pytest.mark.slow(reason='six interpreters race to take one failed trial up')
def test_of_processes_racing_to_take_up_one_failed_trial_exactly_one_does(tmp_path):
    study_id = 'ab' * 16
    go = tmp_path / 'go'
    processes = [subprocess.Popen([sys.executable, '-c', TAKE_UP, str(tmp_path), study_id,
                                   str(10 + k), str(go)], cwd=REPO, stdout=subprocess.PIPE,
                                  text=True) for k in range(6)]
    try:
        for process in processes:
            assert process.stdout.readline().strip() == 'ready'
        go.write_text('go')
        taken = [process.communicate(timeout=120)[0].strip() for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert sorted(taken) == ['False'] * 5 + ['True']
    winner = 10 + taken.index('True')
    lineage = tmp_path / 'study_abababab' / folders.RETRIES_FOLDER
    assert os.listdir(lineage) == ['trial_3_1.json']
    assert json.loads((lineage / 'trial_3_1.json').read_text())['trial'] == winner
    # Every loser is told who won.
    assert [folders.take_up(str(tmp_path), 'exp', study_id, [3], 10 + k)
            for k in range(6)] == [(True, winner) if 10 + k == winner else (False, winner)
                                   for k in range(6)]


def test_a_retry_writes_the_lineage_of_predecessors_killed_before_they_wrote_theirs(
        tmp_path):
    study_id = 'ab' * 16
    # Trial 7 retried trial 3 and was killed before it wrote its file; trial 9 retries 7.
    assert folders.take_up(str(tmp_path), 'exp', study_id, [3, 7], 9) == (True, 9)
    # Trial 8, another retry of trial 3, comes too late: 7 holds that place.
    assert folders.take_up(str(tmp_path), 'exp', study_id, [3], 8) == (False, 7)
    # And a retry of trial 8 (a duplicate's) is a duplicate too.
    assert folders.take_up(str(tmp_path), 'exp', study_id, [3, 8], 11) == (False, 7)
