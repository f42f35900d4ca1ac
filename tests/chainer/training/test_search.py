"""ChainerExperiment.search on real Optuna studies in SQLite and journal files on disk."""
import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from researchutils.chainer.training import (
    ChainerExperiment,
    Parameters,
    from_json_value,
    load_json,
)
from researchutils.chainer.training.search_space import FloatRange
from tests.chainer.training import search_tasks, tasks
from tests.support import search_studies

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
STATES = optuna.trial.TrialState
LR = search_tasks.LR_KEY
# What opening a study waits in all before its last attempt (0.5 + 1 + 1.5 + 2 s).
RETRY_SECONDS = 5.0
FEW_COMPLETE = search_studies.FEW_COMPLETE


def study_url(tmp_path):
    return 'sqlite:///' + str(tmp_path / 'exp' / 'search.db')


def enqueued_study(tmp_path, learning_rates, storage=None):
    """The experiment's study (by default its default one), made beforehand with these trials
    first in line."""
    os.makedirs(tmp_path / 'exp', exist_ok=True)
    study = (search_studies.create(study_url(tmp_path)) if storage is None else
             optuna.create_study(storage=storage, study_name='exp'))
    for lr in learning_rates:
        study.enqueue_trial({LR: lr})
    return study


def folder_of(tmp_path, summary_trial):
    """The folder of a trial of search.json / the summary."""
    return str(tmp_path / 'exp' / summary_trial['folder'])


def epochs_trained(folder):
    return max(entry['epoch'] for entry in tasks.read_log(folder)) if os.path.exists(
        os.path.join(folder, 'log')) else 0


@pytest.mark.slow(reason='four trials of up to three epochs')
def test_pruning_stops_a_hopeless_trial_and_diverged_ones_are_pruned(tmp_path):
    enqueued_study(tmp_path, [0.3, 0.1, 0.01, 10.0])
    experiment = search_tasks.search_experiment(str(tmp_path))
    # lr=10 diverges on purpose: NumPy computes inf and NaN in its forward and update.
    with np.errstate(over='ignore', invalid='ignore'):
        summary = experiment.search(*search_tasks.search_managers(), n_trials=4,
                                    pruner=optuna.pruners.MedianPruner(n_startup_trials=2))
    by_lr = {trial['choice'][LR]: trial for trial in summary['trials']}
    assert [by_lr[lr]['state'] for lr in (0.3, 0.1)] == ['COMPLETE', 'COMPLETE']
    # lr=0.01 learns slowly: worse than the median after epoch 1, stopped there.
    slow = by_lr[0.01]
    assert slow['state'] == 'PRUNED' and slow['diverged'] is None
    assert slow['epochs_reported'] == 1
    assert epochs_trained(folder_of(tmp_path, slow)) == 1
    assert epochs_trained(folder_of(tmp_path, by_lr[0.3])) == 3
    # lr=10 overflows in its first epoch (an infinite val/MSE): pruned, never best.
    assert by_lr[10.0]['state'] == 'PRUNED' and by_lr[10.0]['epochs_reported'] <= 1
    assert summary['best_params'].choice == {LR: 0.3}
    assert summary['best_score'] == by_lr[0.3]['score']


def test_a_pruned_trial_records_its_last_reported_value(tmp_path):
    enqueued_study(tmp_path, [0.1])
    # Never pruned at epoch 1 (warm-up), always at epoch 2 (every MSE is above 0).
    with pytest.warns(RuntimeWarning, match='search_importances.png is drawn from 2'):
        summary = search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1,
            pruner=optuna.pruners.ThresholdPruner(upper=0.0, n_warmup_steps=2))
    reported = summary['study'].trials[0].intermediate_values
    assert sorted(reported) == [1, 2] and reported[1] != reported[2]
    for trial in (summary['trials'][0], load_json(tmp_path / 'exp' / 'search.json')['trials'][0]):
        assert trial['state'] == 'PRUNED' and trial['epochs_reported'] == 2
        assert trial['last_reported'] == reported[2]


def test_best_params_in_search_json_run_again_to_the_same_score(tmp_path):
    enqueued_study(tmp_path, [0.1, 0.3])
    experiment = search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(1))
    train, val = search_tasks.search_managers()
    summary = experiment.search(train, val, n_trials=2)
    saved = load_json(tmp_path / 'exp' / 'search.json')
    assert saved['best_choice'] == {LR: 0.3} and saved['best_trial'] == 1
    assert [trial['score'] for trial in saved['trials']] == [
        score for _, score in summary['results']]
    best = Parameters.from_json(saved['best_params'], allowed_modules=['tests'])
    assert best == summary['best_params'] and best.training['optimizer_params'] == {'lr': 0.3}
    again = ChainerExperiment(best, tasks.Regressor, name='again', save_path=str(tmp_path),
                              val_score_key='MSE', seed=0)
    model = again.run(train, val)
    assert tasks.val_mse(again, model, val) == pytest.approx(saved['best_score'], rel=1e-6)


def strict_json(path):
    return json.loads(path.read_text(),
                      parse_constant=lambda name: pytest.fail('non-JSON ' + name))


def test_search_json_is_strict_json_with_nan_as_null(tmp_path):
    enqueued_study(tmp_path, [30.0])
    # lr=30 diverges on purpose: NumPy computes inf and NaN in the update.
    with pytest.warns(RuntimeWarning, match='search_importances.png is drawn from 2'), \
            np.errstate(over='ignore', invalid='ignore'):
        summary = search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)
    data = strict_json(tmp_path / 'exp' / 'search.json')
    assert data['best_params'] is None and data['best_score'] is None
    assert data['trials'][0]['state'] == 'PRUNED' and data['trials'][0]['score'] is None
    # No pruner prunes the first trial: it trained until a weight was NaN.
    assert 'training diverged: a weight is NaN' in data['trials'][0]['diverged']
    assert summary['best_params'] is None


def test_search_json_keeps_infinite_and_nan_candidates_as_strict_json(tmp_path):
    params = Parameters(search_tasks.search_params(1, [0.1]).fixed_params,
                        {'model': {'marker': [None, math.inf, math.nan]}})
    experiment = ChainerExperiment(params, search_tasks.MarkedRegressor, name='exp',
                                   save_path=str(tmp_path), val_score_key='MSE', seed=0)
    os.makedirs(tmp_path / 'exp')
    study = search_studies.create(study_url(tmp_path))
    for label in ('null', 'Infinity', 'NaN'):  # the labels Optuna holds
        study.enqueue_trial({'model/marker': label})
    summary = experiment.search(*search_tasks.search_managers(), n_trials=3)
    data = strict_json(tmp_path / 'exp' / 'search.json')
    markers = [from_json_value(trial['choice'])['model/marker'] for trial in data['trials']]
    assert markers[0] is None and markers[1] == math.inf and math.isnan(markers[2])
    assert data['best_choice'] == {'model/marker': {'__float__': 'inf'}}
    best = Parameters.from_json(data['best_params'], allowed_modules=['tests'])
    assert best.model == {'marker': math.inf} == summary['best_params'].model


@FEW_COMPLETE
def test_a_second_study_in_the_same_folder_trains_its_own_trials(tmp_path):
    # A first search, then search.db deleted to start over: the new study's trial 0 must
    # train (with its own learning rate), not return the finished run of the old trial 0.
    enqueued_study(tmp_path, [0.01])
    experiment = search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(1))
    first = experiment.search(*search_tasks.search_managers(), n_trials=1)
    old_folder = folder_of(tmp_path, first['trials'][0])
    old_state = os.stat(os.path.join(old_folder, 'run_state.json')).st_mtime_ns
    os.remove(tmp_path / 'exp' / 'search.db')
    enqueued_study(tmp_path, [0.3])
    second = experiment.search(*search_tasks.search_managers(), n_trials=1)
    assert [trial['number'] for trial in second['trials']] == [0]
    # Trained again on its own, the same parameters score the same.
    again = ChainerExperiment(second['best_params'], tasks.Regressor, name='again',
                              save_path=str(tmp_path), val_score_key='MSE', seed=0)
    train, val = search_tasks.search_managers()
    assert second['best_score'] == pytest.approx(
        tasks.val_mse(again, again.run(train, val), val), rel=1e-6)
    assert second['best_score'] != first['best_score']
    new_folder = folder_of(tmp_path, second['trials'][0])
    assert new_folder != old_folder and epochs_trained(new_folder) == 1
    assert os.stat(os.path.join(old_folder, 'run_state.json')).st_mtime_ns == old_state


@FEW_COMPLETE
def test_searches_in_new_in_memory_studies_never_share_a_trial_folder(tmp_path):
    experiment = search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(1))
    folders, trials = [], []
    for lr in (0.01, 0.3):
        storage = optuna.storages.InMemoryStorage()
        enqueued_study(tmp_path, [lr], storage=storage)
        summary = experiment.search(*search_tasks.search_managers(), n_trials=1,
                                    storage=storage)
        assert summary['best_params'].choice == {LR: lr}
        # It trained: the last epoch's validation MSE in its log is its score.
        log = tasks.read_log(folder_of(tmp_path, summary['trials'][0]))
        assert log[-1]['val/MSE'] == pytest.approx(summary['best_score'], rel=1e-5)
        folders.append(folder_of(tmp_path, summary['trials'][0]))
        with open(os.path.join(folders[-1], 'search_trial.json')) as stream:
            owner = json.load(stream)
        assert owner == {'study_name': 'exp', 'trial': 0, 'holder': 0, 'study_id': summary[
            'study'].user_attrs['researchutils_study_id']}
        trials.append(summary['study'].trials[0])
    assert folders[0] != folders[1]
    assert [epochs_trained(folder) for folder in folders] == [1, 1]
    # What a retried trial would use to find a failed trial's folder: only its own.
    from researchutils.chainer.training._experiment.search import folders as trial_folders
    assert [trial_folders.folder_of(experiment.output_dir, 'exp', trial)
            for trial in trials] == folders
    assert trial_folders.folder_of(experiment.output_dir, 'other', trials[0]) is None
    forged = optuna.trial.create_trial(
        params=trials[1].params, distributions=trials[1].distributions, value=1.0,
        user_attrs=dict(trials[1].user_attrs, folder=trials[0].user_attrs['folder']))
    assert trial_folders.folder_of(experiment.output_dir, 'exp', forged) is None


def test_a_trial_folder_of_an_unknown_owner_is_never_used(tmp_path):
    study = enqueued_study(tmp_path, [0.1])
    study.set_user_attr('researchutils_study_id', 'ab' * 16)
    taken = tmp_path / 'exp' / 'study_abababab' / 'trial_0'
    taken.mkdir(parents=True)
    (taken / 'run_state.json').write_text('{"finished": true, "epoch": 1}')
    with pytest.raises(FileExistsError, match=r'trial_0 of trial 0 of the study .exp. exists '
                                              r'already, recorded for an unknown owner'):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)
    assert sorted(os.listdir(taken)) == ['run_state.json']


def test_a_study_of_the_same_name_over_another_space_is_refused_before_training(tmp_path):
    study = enqueued_study(tmp_path, [])
    study.add_trial(optuna.trial.create_trial(
        params={'x': 1.0}, distributions={'x': optuna.distributions.FloatDistribution(0, 2)},
        value=0.5))
    for _ in range(2):  # and so does every rerun, still before training
        with pytest.raises(ValueError, match=r"trial 0 of the study 'exp' has the parameters "
                                             r"\['x'\], but this search has \['training/"):
            search_tasks.search_experiment(str(tmp_path)).search(
                *search_tasks.search_managers(), n_trials=2)
    assert len(study.trials) == 1
    assert not [name for name in os.listdir(tmp_path / 'exp') if name.startswith('study_')]


def test_parameters_search_json_cannot_hold_are_refused_before_any_trial(tmp_path):
    params = search_tasks.search_params(1, [0.1])
    params.fixed_params['training']['val_metrics'] = {'MSE': lambda pred, label: 0.0}
    with pytest.raises(ValueError, match=r'search writes the best parameters to search\.json'
                                         r'.*val_metrics/MSE is <function .*lambda'):
        search_tasks.search_experiment(str(tmp_path), params).search(
            *search_tasks.search_managers(), n_trials=1)
    assert not (tmp_path / 'exp').exists()


@pytest.mark.parametrize('make', ['random bytes', 'a folder'])
def test_a_default_study_file_that_is_no_database_fails_at_once_naming_it(tmp_path, make):
    path = tmp_path / 'exp' / 'search.db'
    if make == 'a folder':
        path.mkdir(parents=True)
        advice = 'it is a folder, not an SQLite file: move it away'
    else:
        path.parent.mkdir()
        path.write_bytes(bytes(range(256)) * 16)
        advice = 'it is no SQLite database .* move it away to start a new study there'
    started = time.monotonic()
    with pytest.raises(OSError, match=r"cannot open the study 'exp' in {}: {}".format(
            re.escape(str(path)), advice)):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)
    assert time.monotonic() - started < RETRY_SECONDS  # not retried
    assert sorted(os.listdir(tmp_path / 'exp')) == ['search.db']


READ_ONLY_SEARCH = '''
import sys
from tests.chainer.training import search_tasks
try:
    search_tasks.search_experiment(sys.argv[1]).search(*search_tasks.search_managers(),
                                                       n_trials=1)
except OSError as error:
    print(error)
'''


def test_a_read_only_experiment_folder_fails_at_once_naming_the_file(tmp_path):
    folder = tmp_path / 'exp'
    folder.mkdir()
    folder.chmod(0o555)
    command = [sys.executable, '-c', READ_ONLY_SEARCH, str(tmp_path)]
    if os.geteuid() == 0:
        # Root writes anywhere: without these capabilities the folder's mode binds it too.
        command = ['setpriv', '--inh-caps=-dac_override,-dac_read_search',
                   '--bounding-set=-dac_override,-dac_read_search'] + command
    try:
        started = time.monotonic()
        out = subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True,
                             timeout=300).stdout
        elapsed = time.monotonic() - started
    finally:
        folder.chmod(0o755)
    assert "cannot open the study 'exp' in {}".format(folder / 'search.db') in out
    assert 'this process must be able to write the file and its folder {}'.format(
        folder) in out
    assert os.listdir(folder) == []
    # Not retried: the interpreter's start and imports take the rest.
    assert 'attempts' not in out and elapsed < 60


@FEW_COMPLETE
def test_opening_a_locked_study_retries_then_names_the_storage(tmp_path):
    (tmp_path / 'exp').mkdir()
    path = tmp_path / 'exp' / 'search.db'
    url = 'sqlite:///{}?timeout=0.05'.format(path)  # each attempt waits 50 ms for the lock
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute('BEGIN EXCLUSIVE')
    try:
        started = time.monotonic()
        with pytest.raises(OSError, match=r'the study storage {} stayed busy through 5 '
                                          r'attempts over 5 s \(.*database is locked'.format(
                                              re.escape(url))):
            search_tasks.search_experiment(str(tmp_path)).search(
                *search_tasks.search_managers(), n_trials=1, storage=url)
        assert time.monotonic() - started >= RETRY_SECONDS
    finally:
        holder.close()
    # Once the lock is gone, the same storage opens.
    summary = search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(
        1, [0.1])).search(*search_tasks.search_managers(), n_trials=1, storage=url)
    assert summary['trials'][0]['state'] == 'COMPLETE'


@FEW_COMPLETE
def test_the_default_study_file_is_in_the_experiment_folder_whatever_its_name(tmp_path):
    base = tmp_path / 'runs?x=1#frag %41 {braces} é'
    summary = search_tasks.search_experiment(str(base), search_tasks.search_params(
        1, [0.1])).search(*search_tasks.search_managers(), n_trials=1)
    assert summary['trials'][0]['state'] == 'COMPLETE'
    assert sorted(os.listdir(tmp_path)) == [base.name]
    # sqlite3's own context ends the transaction only: closing() closes the connection.
    with contextlib.closing(sqlite3.connect(str(base / 'exp' / 'search.db'))) as database:
        assert database.execute('SELECT study_name FROM studies').fetchall() == [('exp',)]
        assert database.execute('SELECT state FROM trials').fetchall() == [('COMPLETE',)]


def test_ranges_are_sampled_within_their_bounds_and_searched_again_not_repeated(tmp_path):
    params = search_tasks.search_params(num_epochs=1)
    params = Parameters(params.fixed_params, {'training': {'optimizer_params': {
        'lr': FloatRange(0.05, 0.5, log=True)}}})
    experiment = search_tasks.search_experiment(str(tmp_path), params)
    first = experiment.search(*search_tasks.search_managers(), n_trials=3,
                              sampler=optuna.samplers.RandomSampler(seed=1))
    lrs = [choice[LR] for choice, _ in first['results']]
    assert len(lrs) == 3 and all(0.05 <= lr <= 0.5 for lr in lrs)
    again = experiment.search(*search_tasks.search_managers(), n_trials=3)
    assert [choice[LR] for choice, _ in again['results']] == lrs
    assert len(again['study'].trials) == 3


@FEW_COMPLETE
@pytest.mark.parametrize('storage', ['default', 'url'])
def test_the_search_leaves_no_connection_open_of_a_storage_it_built(tmp_path, storage):
    # One left open is closed by the garbage collector, with a ResourceWarning (3.13).
    sqlalchemy = pytest.importorskip('sqlalchemy')
    os.makedirs(tmp_path / 'exp')
    opened = []

    def record(connection, record):
        opened.append(connection)
    sqlalchemy.event.listen(sqlalchemy.pool.Pool, 'connect', record)
    try:
        search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(
            1, [0.1])).search(*search_tasks.search_managers(), n_trials=1,
                              storage=None if storage == 'default' else study_url(tmp_path))
    finally:
        sqlalchemy.event.remove(sqlalchemy.pool.Pool, 'connect', record)
    assert opened
    for connection in opened:
        with pytest.raises(sqlite3.ProgrammingError, match='closed database'):
            connection.execute('SELECT 1')


def test_journal_file_storage_holds_the_study(tmp_path):
    storage = search_tasks.storage(str(tmp_path), 'journal')
    search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(
        1, [0.1, 0.3])).search(*search_tasks.search_managers(), n_trials=2, storage=storage)
    assert (tmp_path / 'journal.log').stat().st_size > 0
    assert not (tmp_path / 'exp' / 'search.db').exists()
    reread = optuna.load_study(study_name='exp', storage=search_tasks.storage(
        str(tmp_path), 'journal'))
    assert [trial.state for trial in reread.trials] == [STATES.COMPLETE] * 2


def test_values_from_the_study_are_trusted_only_as_experiment_json_is(tmp_path):
    study = enqueued_study(tmp_path, [])
    distribution = optuna.distributions.CategoricalDistribution(['os:system'])
    study.add_trial(optuna.trial.create_trial(params={LR: 'os:system'},
                                              distributions={LR: distribution}, value=0.0))
    with pytest.raises(ValueError, match=r"trial 0 of the study 'exp' has training/optimizer_"
                                         r"params/lr='os:system', which is none of its "
                                         r"candidates"):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=2)
    assert len(study.trials) == 1  # refused before any trial


def test_a_range_value_outside_the_range_in_the_study_is_refused(tmp_path):
    params = search_tasks.search_params(num_epochs=1)
    params = Parameters(params.fixed_params, {'training': {'optimizer_params': {
        'lr': FloatRange(0.05, 0.5)}}})
    study = enqueued_study(tmp_path, [])
    study.add_trial(optuna.trial.create_trial(
        params={LR: 50.0}, distributions={LR: optuna.distributions.FloatDistribution(0, 100)},
        value=0.0))
    with pytest.raises(ValueError, match=r"trial 0 of the study 'exp': variable_params/"
                                         r"training/optimizer_params/lr: 50\.0 is not one"):
        search_tasks.search_experiment(str(tmp_path), params).search(
            *search_tasks.search_managers(), n_trials=1)


@pytest.mark.parametrize('kwargs, error, message', [
    ({}, ValueError, 'needs n_trials or timeout'),
    ({'n_trials': 0}, ValueError, 'n_trials'),
    ({'n_trials': 1, 'timeout': -1}, ValueError, 'timeout'),
    ({'n_trials': 1, 'sampler': 'tpe'}, TypeError, 'sampler must be'),
    ({'n_trials': 1, 'pruner': object()}, TypeError, 'pruner must be'),
    ({'n_trials': 1, 'storage': 3}, TypeError, 'storage must be'),
])
def test_bad_arguments_are_refused_before_any_trial(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=message):
        search_tasks.search_experiment(str(tmp_path)).search(*search_tasks.search_managers(),
                                                             **kwargs)
    assert not (tmp_path / 'exp').exists()


def test_the_search_settings_are_keywords(tmp_path):
    with pytest.raises(TypeError, match='positional'):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), 1)


def test_a_study_optimizing_the_other_way_is_refused(tmp_path):
    os.makedirs(tmp_path / 'exp')
    search_studies.create(study_url(tmp_path), direction='maximize')
    with pytest.raises(ValueError, match="is to maximize, but val_score_mode='lowest'"):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)


@FEW_COMPLETE
def test_a_running_trial_of_another_host_is_not_failed_here(tmp_path):
    gone = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          check=True, capture_output=True, text=True)
    pid = int(gone.stdout)  # a process that ended: no such pid alive here
    study = enqueued_study(tmp_path, [])
    running = study.ask()
    running.set_user_attr('worker', {'host': 'another-host-' + socket.gethostname(),
                                     'pid': pid, 'started': 1})
    # n_trials=1: the running trial takes the only place, so the search trains nothing.
    summary = search_tasks.search_experiment(str(tmp_path)).search(
        *search_tasks.search_managers(), n_trials=1)
    assert study.trials[0].state == STATES.RUNNING
    assert [trial['state'] for trial in summary['trials']] == ['RUNNING']


@FEW_COMPLETE
def test_a_running_trial_of_a_dead_process_of_this_host_is_failed_and_retried(tmp_path):
    gone = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          check=True, capture_output=True, text=True)
    study = enqueued_study(tmp_path, [0.3])
    running = study.ask()
    running.suggest_categorical(LR, search_tasks.LEARNING_RATES)
    running.set_user_attr('worker', {'host': socket.gethostname(), 'pid': int(gone.stdout),
                                     'started': 1})
    summary = search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(
        1)).search(*search_tasks.search_managers(), n_trials=1)
    # Failed, and retried with its parameters: the retry is the one trial counted, and
    # trains afresh, as the dead trial left no folder.
    assert [t.state for t in study.trials] == [STATES.FAIL, STATES.COMPLETE]
    assert study.trials[1].params == {LR: 0.3}
    assert search_studies.retry_history(study.trials[1]) == [0]
    assert [(t['number'], t['state'], t['retry_of'], t['resumed_at'], t['folder'])
            for t in summary['trials']] == [(1, 'COMPLETE', [0], None, study.trials[1]
                                             .user_attrs['folder'])]
    assert summary['trials'][0]['folder'].endswith('/trial_1')


@FEW_COMPLETE
def test_a_worker_record_copied_from_another_trial_says_nothing_of_this_one(tmp_path):
    gone = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          check=True, capture_output=True, text=True)
    study = enqueued_study(tmp_path, [])
    running = study.ask()
    # Optuna's own RetryFailedTrialCallback copies the failed trial's user attributes.
    running.set_user_attr('worker', {'host': socket.gethostname(), 'pid': int(gone.stdout),
                                     'started': 1, 'trial': running.number + 7})
    search_tasks.search_experiment(str(tmp_path)).search(
        *search_tasks.search_managers(), n_trials=1)
    assert study.trials[0].state == STATES.RUNNING


def worker(tmp_path, n_trials, storage='default', seconds_per_epoch=0.0):
    return subprocess.Popen(
        [sys.executable, '-m', 'tests.chainer.training.search_tasks', str(tmp_path),
         str(n_trials), storage, str(seconds_per_epoch)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process, timeout=300):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.system  # processes sharing one study (tests/support/stacks.py)
@pytest.mark.slow(reason='two worker processes train six trials')
@pytest.mark.parametrize('storage', ['default', 'journal'])
def test_two_processes_searching_one_study_finish_n_trials_in_all(tmp_path, storage):
    first, second = worker(tmp_path, 6, storage), worker(tmp_path, 6, storage)
    mine = [finish(first), finish(second)]
    journal = search_tasks.storage(str(tmp_path), storage)
    study = (search_studies.load(study_url(tmp_path)) if journal is None else
             optuna.load_study(study_name='exp', storage=journal))
    finished = [t for t in study.trials if t.state in (STATES.COMPLETE, STATES.PRUNED)]
    assert len(finished) == 6
    # Each finished trial ran once, in one process, in its own folder.
    assert sorted(mine[0] + mine[1]) == sorted(
        t.number for t in study.trials if not t.user_attrs.get('surplus'))
    assert not set(mine[0]) & set(mine[1])
    assert mine[0] and mine[1], 'both processes ran trials'
    folders = [search_tasks.trial_folder(str(tmp_path), trial) for trial in finished]
    assert len(set(folders)) == 6 and all(os.path.isdir(folder) for folder in folders)


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail('gave up waiting for ' + what)


@pytest.mark.system  # processes sharing one study (tests/support/stacks.py)
@pytest.mark.slow(reason='a worker process trains until killed, then a search finishes')
def test_a_killed_search_started_again_continues_without_redoing_finished_trials(tmp_path):
    enqueued_study(tmp_path, [0.1, 0.3, 0.03, 0.1])  # none diverges: each trains 3 epochs
    process = worker(tmp_path, 3, seconds_per_epoch=1.0)
    url = study_url(tmp_path)

    def trials():
        if not (tmp_path / 'exp' / 'search.db').exists():
            return []
        try:
            study = search_studies.load(url)
        except KeyError:  # the study is not made yet
            return []
        return [t for t in study.trials if t.state != STATES.WAITING]

    def states():
        return [t.state for t in trials()]

    def second_trial_training():
        started = trials()
        return [t.state for t in started] == [STATES.COMPLETE, STATES.RUNNING] and (
            'folder' in started[1].user_attrs) and os.path.exists(os.path.join(
                search_tasks.trial_folder(str(tmp_path), started[1]), 'log'))
    try:
        wait_for(second_trial_training, 120, 'a finished trial and one mid-run')
        first_folder = search_tasks.trial_folder(str(tmp_path), trials()[0])
        first_state = os.stat(os.path.join(first_folder, 'run_state.json')).st_mtime_ns
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
        process.communicate()
    assert states() == [STATES.COMPLETE, STATES.RUNNING]
    summary = search_tasks.search_experiment(str(tmp_path)).search(
        *search_tasks.search_managers(), n_trials=3, pruner=optuna.pruners.NopPruner())
    # The killed trial is failed, not counted; two more finish the three.
    assert states()[:2] == [STATES.COMPLETE, STATES.FAIL]
    assert len([s for s in states() if s in (STATES.COMPLETE, STATES.PRUNED)]) == 3
    assert os.stat(os.path.join(first_folder, 'run_state.json')).st_mtime_ns == first_state
    # ... and retried: its retry waits in the study's queue behind the trials enqueued
    # before it, for the next search; search.json lists the retry, not the failed trial.
    retry = search_studies.load(url).trials[-1]
    assert retry.state == STATES.WAITING and retry.system_attrs['retry_history'] == [1]
    assert retry.params == {LR: 0.3}
    assert [(t['number'], t['state']) for t in summary['trials']] == [
        (0, 'COMPLETE'), (2, 'COMPLETE'), (3, 'COMPLETE'), (retry.number, 'WAITING')]
    # Every trial that trained did so in a folder of its own, of this one study.
    assert len({t['folder'] for t in summary['trials']}) == len(summary['trials'])


def test_the_search_draws_its_history_and_parameter_importances_as_png(tmp_path):
    pytest.importorskip('matplotlib')
    image = pytest.importorskip('PIL.Image')
    enqueued_study(tmp_path, [0.1, 0.3])
    search_tasks.search_experiment(str(tmp_path), search_tasks.search_params(1)).search(
        *search_tasks.search_managers(), n_trials=2)
    for name in ('search_history.png', 'search_importances.png'):
        with image.open(tmp_path / 'exp' / name) as picture:
            assert picture.format == 'PNG' and min(picture.size) > 100


def test_without_matplotlib_the_search_writes_its_json_and_names_the_plot_extra(tmp_path):
    code = ('import sys, warnings\n'
            'sys.modules["matplotlib"] = None\n'
            'warnings.simplefilter("ignore")\n'
            'from tests.chainer.training import search_tasks\n'
            'with warnings.catch_warnings(record=True) as caught:\n'
            '    warnings.simplefilter("always")\n'
            '    search_tasks.search_experiment(sys.argv[1], search_tasks.search_params(1, [0.1]))'
            '.search(*search_tasks.search_managers(), n_trials=1)\n'
            'print([str(w.message) for w in caught if "figures" in str(w.message)])\n')
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    assert 'search figures needs matplotlib: pip install researchutils[plot]' in out
    assert load_json(tmp_path / 'exp' / 'search.json')['best_choice'] == {LR: 0.1}
    assert not (tmp_path / 'exp' / 'search_history.png').exists()


OPEN_AT_ONCE = '''
import sys
from researchutils.chainer.training._experiment.search import studies
from tests.chainer.training import search_tasks
with studies.opened_study(search_tasks.search_experiment(sys.argv[1]), None, None,
                          None) as study:
    print(studies.study_id(study))
'''


@pytest.mark.system  # processes sharing one study (tests/support/stacks.py)
@pytest.mark.slow(reason='three rounds of four processes starting at once')
def test_processes_opening_a_new_default_study_at_once_all_open_it(tmp_path):
    # They race to create the SQLite tables and to record the schema version.
    for attempt in range(3):
        folder = str(tmp_path / str(attempt))
        processes = [subprocess.Popen([sys.executable, '-c', OPEN_AT_ONCE, folder], cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for _ in range(4)]
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err[-2000:]
            assert len(out.strip()) == 32


def test_user_attributes_from_the_study_are_read_only_as_plain_values(tmp_path):
    study = enqueued_study(tmp_path, [])
    distribution = optuna.distributions.CategoricalDistribution(search_tasks.LEARNING_RATES)
    study.add_trial(optuna.trial.create_trial(
        params={LR: 0.1}, distributions={LR: distribution}, value=1.0,
        user_attrs={'surplus': 'yes', 'diverged': {'__object__': 'os:system'},
                    'worker': {'host': 'elsewhere', 'pid': 1}, 'folder': '../../etc'}))
    with pytest.warns(RuntimeWarning, match='search_importances.png is drawn from 2'):
        summary = search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)
    # Not taken for a surplus trial ('yes' is no True), no reference in search.json.
    assert [trial['number'] for trial in summary['trials']] == [0]
    assert summary['trials'][0]['diverged'] is None
    assert summary['trials'][0]['folder'] is None  # no trial folder
    assert 'os:system' not in (tmp_path / 'exp' / 'search.json').read_text()
    assert summary['best_params'].choice == {LR: 0.1}


def test_a_study_id_that_is_no_id_of_ours_is_refused(tmp_path):
    study = enqueued_study(tmp_path, [0.1])
    study.set_user_attr('researchutils_study_id', '../../elsewhere')
    with pytest.raises(ValueError, match=r"researchutils_study_id='\.\./\.\./elsewhere', which "
                                         r"is no id a search stored"):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)


def test_a_timeout_alone_ends_the_search_after_the_trial_running_then(tmp_path):
    experiment = search_tasks.search_experiment(
        str(tmp_path), search_tasks.search_params(2, [0.1, 0.3]),
        extensions=[tasks.SlowEpochs(0.5)])
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match='search_importances.png is drawn from 2'):
        summary = experiment.search(*search_tasks.search_managers(), timeout=0.2)
    # Optuna starts no trial after the timeout; the first one (two 0.5 s epochs) ran whole.
    assert len(summary['study'].trials) == 1 and summary['trials'][0]['state'] == 'COMPLETE'
    assert time.monotonic() - started >= 1.0


def test_a_folder_is_claimed_only_by_its_recorded_owner(tmp_path):
    from researchutils.chainer.training._experiment.search import folders
    folder = str(tmp_path / 'study_abababab' / 'trial_3')
    mine = folders.owner('exp', 'ab' * 16, 3)
    folders.claim(folder, mine)
    assert folders.belongs_to(folder, mine)
    folders.claim(folder, mine)  # the same trial's folder again (a resumed trial)
    for other in (folders.owner('exp', 'cd' * 16, 3), folders.owner('exp', 'ab' * 16, 4),
                  folders.owner('other', 'ab' * 16, 3)):
        assert not folders.belongs_to(folder, other)
        with pytest.raises(FileExistsError, match="recorded for {'study_name': 'exp'"):
            folders.claim(folder, other)
    shutil.rmtree(folder)
    os.mkdir(folder)
    with pytest.raises(FileExistsError, match='an unknown owner'):
        folders.claim(folder, mine)
