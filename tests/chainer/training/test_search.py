"""ChainerExperiment.search on real Optuna studies in SQLite and journal files on disk."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from researchutils.chainer.training import ChainerExperiment, Parameters, load_json
from researchutils.chainer.training.search_space import FloatRange
from tests.chainer.training import search_tasks, tasks

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
STATES = optuna.trial.TrialState
LR = search_tasks.LR_KEY


def study_url(tmp_path):
    return 'sqlite:///' + str(tmp_path / 'exp' / 'search.db')


def enqueued_study(tmp_path, learning_rates):
    """The experiment's default study, made beforehand with these trials first in line."""
    os.makedirs(tmp_path / 'exp', exist_ok=True)
    study = optuna.create_study(storage=study_url(tmp_path), study_name='exp')
    for lr in learning_rates:
        study.enqueue_trial({LR: lr})
    return study


def epochs_trained(folder):
    return max(entry['epoch'] for entry in tasks.read_log(folder)) if os.path.exists(
        os.path.join(folder, 'log')) else 0


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
    assert epochs_trained(str(tmp_path / 'exp' / 'trial_{}'.format(slow['number']))) == 1
    assert epochs_trained(str(tmp_path / 'exp' / 'trial_0')) == 3
    # lr=10 overflows in its first epoch (an infinite val/MSE): pruned, never best.
    assert by_lr[10.0]['state'] == 'PRUNED' and by_lr[10.0]['epochs_reported'] <= 1
    assert summary['best_params'].choice == {LR: 0.3}
    assert summary['best_score'] == by_lr[0.3]['score']


def test_best_params_in_search_json_run_again_to_the_same_score(tmp_path):
    enqueued_study(tmp_path, [0.1, 0.3])
    experiment = search_tasks.search_experiment(str(tmp_path))
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


def test_search_json_is_strict_json_with_nan_as_null(tmp_path):
    enqueued_study(tmp_path, [30.0])
    # lr=30 diverges on purpose: NumPy computes inf and NaN in the update.
    with pytest.warns(RuntimeWarning, match='search_importances.png is drawn from 2'), \
            np.errstate(over='ignore', invalid='ignore'):
        summary = search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)
    text = (tmp_path / 'exp' / 'search.json').read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail('non-JSON ' + name))
    assert data['best_params'] is None and data['best_score'] is None
    assert data['trials'][0]['state'] == 'PRUNED' and data['trials'][0]['score'] is None
    # No pruner prunes the first trial: it trained until a weight was NaN.
    assert 'training diverged: a weight is NaN' in data['trials'][0]['diverged']
    assert summary['best_params'] is None


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
    with pytest.raises(ValueError, match=r"trial 0 of the study has training/optimizer_params/"
                                         r"lr='os:system', which is none of its candidates"):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)


def test_a_range_value_outside_the_range_in_the_study_is_refused(tmp_path):
    params = search_tasks.search_params(num_epochs=1)
    params = Parameters(params.fixed_params, {'training': {'optimizer_params': {
        'lr': FloatRange(0.05, 0.5)}}})
    study = enqueued_study(tmp_path, [])
    study.add_trial(optuna.trial.create_trial(
        params={LR: 50.0}, distributions={LR: optuna.distributions.FloatDistribution(0, 100)},
        value=0.0))
    with pytest.raises(ValueError, match=r'trial 0 of the study: variable_params/training/'
                                         r'optimizer_params/lr: 50\.0 is not one'):
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
    assert not (tmp_path / 'exp' / 'trial_0').exists()


def test_a_study_optimizing_the_other_way_is_refused(tmp_path):
    os.makedirs(tmp_path / 'exp')
    optuna.create_study(storage=study_url(tmp_path), study_name='exp', direction='maximize')
    with pytest.raises(ValueError, match="is to maximize, but val_score_mode='lowest'"):
        search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)


def worker(tmp_path, n_trials, storage='default', seconds_per_epoch=0.0):
    return subprocess.Popen(
        [sys.executable, '-m', 'tests.chainer.training.search_tasks', str(tmp_path),
         str(n_trials), storage, str(seconds_per_epoch)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process, timeout=300):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize('storage', ['default', 'journal'])
def test_two_processes_searching_one_study_finish_n_trials_in_all(tmp_path, storage):
    first, second = worker(tmp_path, 6, storage), worker(tmp_path, 6, storage)
    mine = [finish(first), finish(second)]
    study = optuna.load_study(study_name='exp', storage=search_tasks.storage(
        str(tmp_path), storage) or study_url(tmp_path))
    finished = [t for t in study.trials if t.state in (STATES.COMPLETE, STATES.PRUNED)]
    assert len(finished) == 6
    # Each finished trial ran once, in one process, in its own folder.
    assert sorted(mine[0] + mine[1]) == sorted(
        t.number for t in study.trials if not t.user_attrs.get('surplus'))
    assert not set(mine[0]) & set(mine[1])
    assert mine[0] and mine[1], 'both processes ran trials'
    for trial in finished:
        assert os.path.isdir(tmp_path / 'exp' / 'trial_{}'.format(trial.number))


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail('gave up waiting for ' + what)


@pytest.mark.slow
def test_a_killed_search_started_again_continues_without_redoing_finished_trials(tmp_path):
    enqueued_study(tmp_path, [0.1, 0.3, 0.03, 0.1])  # none diverges: each trains 3 epochs
    process = worker(tmp_path, 3, seconds_per_epoch=1.0)
    url = study_url(tmp_path)

    def states():
        if not (tmp_path / 'exp' / 'search.db').exists():
            return []
        try:
            study = optuna.load_study(study_name='exp', storage=url)
        except KeyError:  # the study is not made yet
            return []
        return [t.state for t in study.trials if t.state != STATES.WAITING]
    try:
        wait_for(lambda: states()[:1] == [STATES.COMPLETE] and len(states()) == 2
                 and os.path.exists(tmp_path / 'exp' / 'trial_1' / 'log'), 120,
                 'a finished trial and one mid-run')
        first_state = (tmp_path / 'exp' / 'trial_0' / 'run_state.json').stat().st_mtime_ns
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
    assert (tmp_path / 'exp' / 'trial_0' / 'run_state.json').stat().st_mtime_ns == first_state
    assert [t['state'] for t in summary['trials']][1] == 'FAIL'


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


@pytest.mark.slow
def test_processes_opening_a_new_default_study_at_once_all_open_it(tmp_path):
    # They race to create the SQLite tables and to record the schema version.
    code = ('import sys, optuna\n'
            'from researchutils.chainer.training import _search\n'
            '_search._storage(optuna, None, sys.argv[1])\n')
    for attempt in range(3):
        folder = str(tmp_path / str(attempt))
        processes = [subprocess.Popen([sys.executable, '-c', code, folder], cwd=REPO,
                                      stderr=subprocess.PIPE, text=True) for _ in range(4)]
        for process in processes:
            _, err = process.communicate(timeout=120)
            assert process.returncode == 0, err[-2000:]


def test_user_attributes_from_the_study_are_read_only_as_plain_values(tmp_path):
    study = enqueued_study(tmp_path, [])
    distribution = optuna.distributions.CategoricalDistribution(search_tasks.LEARNING_RATES)
    study.add_trial(optuna.trial.create_trial(
        params={LR: 0.1}, distributions={LR: distribution}, value=1.0,
        user_attrs={'surplus': 'yes', 'diverged': {'__object__': 'os:system'},
                    'worker': {'host': 'elsewhere', 'pid': 1}}))
    with pytest.warns(RuntimeWarning, match='search_importances.png is drawn from 2'):
        summary = search_tasks.search_experiment(str(tmp_path)).search(
            *search_tasks.search_managers(), n_trials=1)
    # Not taken for a surplus trial ('yes' is no True), no reference in search.json.
    assert [trial['number'] for trial in summary['trials']] == [0]
    assert summary['trials'][0]['diverged'] is None
    assert 'os:system' not in (tmp_path / 'exp' / 'search.json').read_text()
    assert summary['best_params'].choice == {LR: 0.1}


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
