"""What a search leaves: search.json, the summary it returns and its figures, made from real
Optuna studies (in memory) holding trials as a search leaves them, and read back from the
files written."""
import json
import math
import os
import re
import sys
import warnings

import pytest

from researchutils.chainer.training import ChainerExperiment, Parameters
from researchutils.chainer.training._experiment.search import folders, retries, summary
from researchutils.chainer.training._experiment.search.space import Space
from tests.chainer.training import search_tasks, tasks

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

STATES = optuna.trial.TrialState
LR = search_tasks.LR_KEY
STUDY_ID = '0123456789abcdef' * 2
_LR = optuna.distributions.CategoricalDistribution(search_tasks.LEARNING_RATES)


def _experiment(tmp_path, **kwargs):
    experiment = tasks.experiment(tmp_path, search_tasks.search_params(), val_score_key='MSE',
                                  **kwargs)
    (tmp_path / 'exp').mkdir(exist_ok=True)
    return experiment


def _study(direction='minimize'):
    return optuna.create_study(study_name='exp', direction=direction)


def _add(study, lr=0.1, state=STATES.COMPLETE, value=None, reported=None, user_attrs=None,
         system_attrs=None, params=None, distributions=None):
    """Adds a trial as a search leaves it (``lr`` None: one that drew no value); returns its
    number. A pruned trial's value is its last report, as Optuna records it."""
    if state == STATES.PRUNED and reported:
        value = reported[max(reported)]
    if params is None:
        params, distributions = ({}, {}) if lr is None else ({LR: lr}, {LR: _LR})
    study.add_trial(optuna.trial.create_trial(
        state=state, value=value, params=params, distributions=distributions,
        intermediate_values=reported or {}, user_attrs=user_attrs or {},
        system_attrs=system_attrs or {}))
    return study.trials[-1].number


def _folder(number):
    return folders.relative_folder(STUDY_ID, number)


def _retry_of(*numbers):
    return {retries.FAILED_TRIAL: numbers[0], retries.RETRY_HISTORY: list(numbers)}


def _summarize(experiment, study):
    """The summary the search returns, and search.json as it wrote it (strict JSON)."""
    result = summary.summarize(experiment, study, Space(experiment.params))
    summary.write_summary(experiment, study, result, STUDY_ID)
    with open(os.path.join(experiment.output_dir, 'search.json')) as stream:
        saved = json.load(stream, parse_constant=lambda name: pytest.fail('non-JSON ' + name))
    return result, saved


def _entry(number, state, choice, score=None, last_reported=None, epochs_reported=0,
           diverged=None, folder=None, retry_of=(), resumed_at=None):
    return {'number': number, 'state': state, 'score': score, 'choice': choice,
            'last_reported': last_reported, 'epochs_reported': epochs_reported,
            'diverged': diverged, 'folder': folder, 'retry_of': list(retry_of),
            'resumed_at': resumed_at}


def test_search_json_lists_each_trial_with_its_state_score_reports_and_folder(tmp_path):
    experiment = _experiment(tmp_path)
    study = _study()
    # Reports in no order of their epochs: the last reported is the last epoch's.
    _add(study, 0.1, value=0.5, reported={3: 0.5, 1: 0.9, 2: 0.7},
         user_attrs={folders.FOLDER_ATTR: _folder(0), folders.STUDY_ID_ATTR: STUDY_ID})
    _add(study, 3.0, STATES.PRUNED, reported={1: math.nan},
         user_attrs={'diverged': 'training diverged: a weight is NaN',
                     folders.FOLDER_ATTR: _folder(1)})
    _add(study, 0.03, value=math.inf, reported={1: math.inf})
    _add(study, None, STATES.FAIL, user_attrs={folders.FOLDER_ATTR: 'elsewhere/trial_3'})
    _add(study, 0.01, STATES.PRUNED, reported={1: 2.0, 2: 1.5})
    result, saved = _summarize(experiment, study)
    assert saved['trials'] == result['trials'] == [
        _entry(0, 'COMPLETE', {LR: 0.1}, 0.5, 0.5, 3, folder=_folder(0)),
        _entry(1, 'PRUNED', {LR: 3.0}, None, None, 1, 'training diverged: a weight is NaN',
               _folder(1)),
        _entry(2, 'COMPLETE', {LR: 0.03}, None, None, 1),
        _entry(3, 'FAIL', None),
        _entry(4, 'PRUNED', {LR: 0.01}, None, 1.5, 2)]
    assert {key: saved[key] for key in ('study_name', 'study_id', 'direction', 'val_score_key',
                                        'best_trial', 'best_score', 'best_choice')} == {
        'study_name': 'exp', 'study_id': STUDY_ID, 'direction': 'minimize',
        'val_score_key': 'MSE', 'best_trial': 0, 'best_score': 0.5, 'best_choice': {LR: 0.1}}
    # Each finished trial's choice and score, NaN for a pruned one.
    assert [choice for choice, _ in result['results']] == [{LR: 0.1}, {LR: 3.0}, {LR: 0.03},
                                                           {LR: 0.01}]
    scores = [score for _, score in result['results']]
    assert scores[0] == 0.5 and math.isnan(scores[1]) and scores[2] == math.inf
    assert math.isnan(scores[3])


def test_the_best_parameters_in_search_json_read_back_as_the_search_returned_them(tmp_path):
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.3, value=0.8)
    _add(study, 0.1, value=0.25)
    result, saved = _summarize(experiment, study)
    assert result['best_trial'] == saved['best_trial'] == 1
    assert result['best_score'] == saved['best_score'] == 0.25
    assert result['best_params'].choice == {LR: 0.1}
    best = Parameters.from_json(saved['best_params'], allowed_modules=['tests'])
    assert best.training['optimizer_params'] == {'lr': 0.1}
    assert best.to_json() == result['best_params'].to_json()
    assert best.to_json() == experiment.params.choose({LR: 0.1}).to_json()


@pytest.mark.parametrize('mode, direction, best', [('lowest', 'minimize', 2),
                                                   ('highest', 'maximize', 3)])
def test_the_best_trial_is_the_first_with_the_best_score_of_the_experiment_s_mode(
        tmp_path, mode, direction, best):
    experiment = _experiment(tmp_path, val_score_mode=mode)
    study = _study(direction)
    _add(study, 0.01, STATES.PRUNED, reported={1: 0.1})  # pruned: never the best
    for lr, value in ((0.03, 0.5), (0.1, 0.2), (0.3, 0.9), (3.0, 0.2), (10.0, 0.9)):
        _add(study, lr, value=value)
    result, saved = _summarize(experiment, study)
    assert result['best_trial'] == saved['best_trial'] == best
    assert saved['direction'] == direction
    assert saved['best_choice'] == {LR: study.trials[best].params[LR]}


def test_an_infinite_best_score_is_null_in_search_json(tmp_path):
    experiment = _experiment(tmp_path, val_score_mode='highest')
    study = _study('maximize')
    _add(study, 0.1, value=1.0)
    _add(study, 0.3, value=math.inf)
    result, saved = _summarize(experiment, study)
    assert result['best_trial'] == saved['best_trial'] == 1
    assert result['best_score'] == math.inf and saved['best_score'] is None


def test_without_a_complete_trial_there_is_no_best(tmp_path):
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 3.0, STATES.PRUNED, reported={1: math.nan})
    _add(study, None, STATES.FAIL)
    result, saved = _summarize(experiment, study)
    assert result['best_params'] is None and result['best_trial'] is None
    assert math.isnan(result['best_score'])
    assert [saved[key] for key in ('best_trial', 'best_score', 'best_choice', 'best_params')
            ] == [None] * 4
    assert [entry['state'] for entry in saved['trials']] == ['PRUNED', 'FAIL']


def test_a_retried_trial_is_one_entry_its_retry_s_naming_the_trials_it_retries(tmp_path):
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, STATES.FAIL, user_attrs={folders.FOLDER_ATTR: _folder(0)})
    _add(study, 0.1, STATES.FAIL, system_attrs=_retry_of(0),
         user_attrs={folders.FOLDER_ATTR: _folder(0), 'resumed_at': {'iteration': 3,
                                                                      'epoch': 1}})
    _add(study, 0.1, value=0.5, system_attrs=_retry_of(0, 1),
         user_attrs={folders.FOLDER_ATTR: _folder(0), 'resumed_at': {'iteration': 6,
                                                                      'epoch': 2}})
    _add(study, 0.3, STATES.FAIL)  # failed, retried by none: listed
    result, saved = _summarize(experiment, study)
    assert saved['trials'] == result['trials'] == [
        _entry(2, 'COMPLETE', {LR: 0.1}, 0.5, folder=_folder(0), retry_of=[0, 1],
               resumed_at=6),
        _entry(3, 'FAIL', {LR: 0.3})]
    assert saved['best_trial'] == 2


def test_a_retry_that_has_not_finished_yet_is_listed_instead_of_the_trial_it_retries(tmp_path):
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, STATES.FAIL)
    _add(study, 0.1, STATES.WAITING, system_attrs=_retry_of(0))
    result, saved = _summarize(experiment, study)
    assert saved['trials'] == [_entry(1, 'WAITING', {LR: 0.1}, retry_of=[0])]
    assert result['results'] == [] and saved['best_trial'] is None


def test_surplus_trials_and_duplicate_retries_are_left_out(tmp_path):
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, STATES.FAIL)
    _add(study, 0.1, value=0.5, system_attrs=_retry_of(0))
    _add(study, 0.1, STATES.FAIL, system_attrs=_retry_of(0),
         user_attrs={'surplus': True, 'duplicate_of': 1})
    _add(study, 0.3, STATES.FAIL, user_attrs={'surplus': True})
    # Only a plain True marks a surplus trial: another process's 'yes' does not.
    _add(study, 0.03, value=0.75, user_attrs={'surplus': 'yes'})
    result, saved = _summarize(experiment, study)
    assert [(entry['number'], entry['state']) for entry in saved['trials']] == [
        (1, 'COMPLETE'), (4, 'COMPLETE')]
    assert [choice for choice, _ in result['results']] == [{LR: 0.1}, {LR: 0.03}]


@pytest.mark.parametrize('attrs, diverged, resumed_at', [
    ({'diverged': 'val/MSE is NaN', 'resumed_at': {'iteration': 4, 'epoch': 1}},
     'val/MSE is NaN', 4),
    ({'diverged': 1, 'resumed_at': {'iteration': True, 'epoch': 1}}, None, None),
    ({'diverged': None, 'resumed_at': {'iteration': 4.0}}, None, None),
    ({'resumed_at': {'epoch': 1}}, None, None),
    ({'resumed_at': 4}, None, None),
    ({'resumed_at': [4]}, None, None),
])
def test_what_other_processes_wrote_in_a_trial_s_attributes_is_kept_only_when_it_fits(
        tmp_path, attrs, diverged, resumed_at):
    # User attributes are written by whoever shares the study.
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, value=0.5, user_attrs=dict(attrs, folder='../../etc'))
    _, saved = _summarize(experiment, study)
    entry, = saved['trials']
    assert (entry['diverged'], entry['resumed_at'], entry['folder']) == (
        diverged, resumed_at, None)


def test_infinite_and_nan_candidates_are_tagged_and_the_best_reads_back_exactly(tmp_path):
    params = Parameters(search_tasks.search_params(1, [0.1]).fixed_params,
                        {'model': {'marker': [None, math.inf, math.nan]}})
    experiment = ChainerExperiment(params, search_tasks.MarkedRegressor, name='exp',
                                   save_path=str(tmp_path), val_score_key='MSE', seed=0)
    (tmp_path / 'exp').mkdir()
    study = _study()
    # The labels Optuna holds for these candidates: their JSON text.
    labels = optuna.distributions.CategoricalDistribution(['null', 'Infinity', 'NaN'])
    for label, value in (('null', 2.0), ('Infinity', 1.0), ('NaN', 3.0)):
        _add(study, value=value, params={'model/marker': label},
             distributions={'model/marker': labels})
    result, saved = _summarize(experiment, study)
    assert [entry['choice'] for entry in saved['trials']] == [
        {'model/marker': None}, {'model/marker': {'__float__': 'inf'}},
        {'model/marker': {'__float__': 'nan'}}]
    assert saved['best_choice'] == {'model/marker': {'__float__': 'inf'}}
    best = Parameters.from_json(saved['best_params'], allowed_modules=['tests'])
    assert best.model == {'marker': math.inf} == result['best_params'].model


def test_a_trial_of_another_search_s_space_added_meanwhile_is_refused_naming_the_study(
        tmp_path):
    # Another search's process may add it to a study of the same name during the search.
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, value=0.5)
    _add(study, value=0.25, params={'model/other': 1},
         distributions={'model/other': optuna.distributions.IntDistribution(0, 3)})
    with pytest.raises(ValueError, match=r"trial 1 of the study 'exp'.*model/other"):
        summary.summarize(experiment, study, Space(experiment.params))


def test_parameters_search_json_cannot_hold_are_refused_naming_it_and_the_parameter(tmp_path):
    params = search_tasks.search_params(1, [0.1])
    params.fixed_params['training']['val_metrics'] = {'MSE': lambda pred, label: 0.0}
    experiment = search_tasks.search_experiment(str(tmp_path), params)
    with pytest.raises(ValueError, match=r'search\.json.*val_metrics/MSE') as raised:
        summary.check_saveable(experiment)
    assert isinstance(raised.value.__cause__, ValueError)
    assert summary.check_saveable(search_tasks.search_experiment(str(tmp_path))) is None


# The figures.

def _png_size(path):
    image = pytest.importorskip('PIL.Image')
    with image.open(path) as picture:
        assert picture.format == 'PNG'
        return picture.size


def _figures(experiment, study):
    """Draws the figures; returns the warnings they gave and the names of the files there."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        summary.write_figures(experiment, study)
    return caught, sorted(os.listdir(experiment.output_dir))


def test_the_figures_are_pngs_that_hold_long_parameter_names_whole(tmp_path):
    pytest.importorskip('matplotlib')
    plt = pytest.importorskip('matplotlib.pyplot')
    experiment = _experiment(tmp_path)
    study = _study()
    name = 'model/' + 'a_parameter_whose_name_is_long_' * 4
    distribution = optuna.distributions.CategoricalDistribution([1, 2])
    # Equal scores: Optuna warns that it cannot tell the parameter's values apart, which the
    # figure shows (equal importances) and the search does not repeat.
    for value in (1, 2):
        _add(study, value=0.5, params={name: value}, distributions={name: distribution})
    figures_before = plt.get_fignums()
    caught, names = _figures(experiment, study)
    assert [str(warning.message) for warning in caught] == []
    assert names == [summary.HISTORY_FIGURE, summary.IMPORTANCE_FIGURE] == [
        'search_history.png', 'search_importances.png']
    assert min(_png_size(tmp_path / 'exp' / 'search_history.png')) > 100
    # The name is wider than Optuna's figure leaves it: the picture grows to hold it.
    width, _ = _png_size(tmp_path / 'exp' / 'search_importances.png')
    figure_width = plt.rcParams['figure.figsize'][0] * plt.rcParams['figure.dpi']
    assert width > figure_width
    assert plt.get_fignums() == figures_before  # none left open


def test_with_one_complete_trial_the_history_is_drawn_and_the_importances_said_missing(
        tmp_path):
    pytest.importorskip('matplotlib')
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, value=0.5)
    _add(study, 3.0, STATES.PRUNED, reported={1: 9.0})
    caught, names = _figures(experiment, study)
    assert names == ['search_history.png']
    warning, = caught
    assert warning.category is RuntimeWarning
    assert 'search_importances.png' in str(warning.message)
    assert 'has 1' in str(warning.message)


def test_without_a_complete_trial_no_figure_is_drawn(tmp_path):
    pytest.importorskip('matplotlib')
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 3.0, STATES.PRUNED, reported={1: 9.0})
    caught, names = _figures(experiment, study)
    assert names == []
    warning, = caught
    assert warning.category is RuntimeWarning and 'has 0' in str(warning.message)


def test_without_matplotlib_a_warning_names_the_extra_and_no_figure_is_written(
        tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # as where it is not installed
    experiment = _experiment(tmp_path)
    study = _study()
    for lr, value in ((0.1, 0.5), (0.3, 0.25)):
        _add(study, lr, value=value)
    caught, names = _figures(experiment, study)
    assert names == []
    warning, = caught
    assert re.search(r'\bsearch figures\b', str(warning.message))
    assert 'matplotlib' in str(warning.message)
    assert 'researchutils[plot]' in str(warning.message)


def test_the_figures_are_pngs_whatever_format_matplotlib_is_set_to_save(tmp_path):
    matplotlib = pytest.importorskip('matplotlib')
    experiment = _experiment(tmp_path)
    study = _study()
    _add(study, 0.1, value=0.5)
    with matplotlib.rc_context({'savefig.format': 'pdf'}):
        _figures(experiment, study)
    assert min(_png_size(tmp_path / 'exp' / 'search_history.png')) > 100
