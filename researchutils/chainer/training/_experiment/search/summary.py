"""What a search leaves: its summary (``search.json`` and the returned dict) and figures.

``search.json`` is strict JSON: a score that is NaN or infinite is ``null``, and a
parameter that is such a float is tagged (``{"__float__": "inf"}``, by
``json_values._strict_json_value``) so that ``Parameters.from_json`` reads the best
parameters back exactly. Whatever the summary saves
is checked before the first trial (:func:`check_saveable`), not after the last. The
figures are Optuna's optimization history and parameter importances, drawn with
matplotlib when it is there (a warning says so when not).

A retried trial and its retry are one entry: the retry's, whose ``retry_of`` lists the
trials it retries (Optuna's retry history, oldest first) and whose ``resumed_at`` is the
iteration it resumed at (None from the start); a failed trial that some trial retries is
left out, as are surplus trials and duplicate retries, so that every trial counted towards
``n_trials`` is there once.
Tests: ``tests/chainer/training/test_search.py`` and ``test_search_resume.py``.
"""
from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

import optuna

from researchutils import _figures
from researchutils._files import write_atomically
from researchutils.chainer.training import json_values, train_utils
from researchutils.chainer.training._experiment.search import folders, retries
from researchutils.chainer.training._experiment.search.objective import surplus
from researchutils.chainer.training._scores import improves, score_for_json

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from researchutils.chainer.training._experiment.protocol import Experiment
    from researchutils.chainer.training._experiment.search.space import Space

SUMMARY_FILE = 'search.json'
HISTORY_FIGURE = 'search_history.png'
IMPORTANCE_FIGURE = 'search_importances.png'
_STATES = optuna.trial.TrialState


def check_saveable(experiment: Experiment) -> None:
    """Refuses, before any trial, parameters that search.json could not hold."""
    try:
        experiment.params.to_json()
    except ValueError as error:
        raise ValueError('search writes the best parameters to {}, so each must be one JSON '
                         'can hold: {}'.format(SUMMARY_FILE, error)) from error


def _diverged(trial: optuna.trial.FrozenTrial) -> str | None:
    reason = trial.user_attrs.get('diverged')
    return reason if isinstance(reason, str) else None


def _resumed_at(trial: optuna.trial.FrozenTrial) -> int | None:
    point = trial.user_attrs.get('resumed_at')
    iteration = point.get('iteration') if isinstance(point, dict) else None
    return iteration if type(iteration) is int else None


def _trial_entry(trial: optuna.trial.FrozenTrial, choice: dict[str, Any] | None
                 ) -> dict[str, Any]:
    score = trial.value if trial.state == _STATES.COMPLETE else None
    steps = sorted(trial.intermediate_values)
    return {'number': trial.number, 'state': trial.state.name, 'score': score_for_json(score),
            'choice': json_values.to_json_value(choice, 'choice'),
            'last_reported': score_for_json(
                trial.intermediate_values[steps[-1]]) if steps else None,
            'epochs_reported': len(steps), 'diverged': _diverged(trial),
            'folder': folders.recorded_folder(trial), 'retry_of': retries.history(trial),
            'resumed_at': _resumed_at(trial)}


def summarize(experiment: Experiment, study: optuna.Study, space: Space
              ) -> dict[str, Any]:
    """The summary of every trial of the study (surplus ones and retried ones left out), and
    the best."""
    trials: list[dict[str, Any]] = []
    results: list[tuple[dict[str, Any], float]] = []
    best: tuple[int, float, dict[str, Any]] | None = None
    every = study.get_trials(deepcopy=False)
    retried = {number for trial in every for number in retries.history(trial)}
    for trial in sorted(every, key=lambda t: t.number):
        if surplus(trial) or (trial.state == _STATES.FAIL and trial.number in retried):
            continue
        choice = space.read(trial, study.study_name)
        trials.append(_trial_entry(trial, choice))
        score = trial.value if trial.state == _STATES.COMPLETE else float('nan')
        if trial.state in (_STATES.COMPLETE, _STATES.PRUNED):
            assert choice is not None  # space.read refuses a finished trial missing a value
            results.append((choice, score))
            if trial.state == _STATES.COMPLETE and (
                    best is None or improves(experiment.val_score_mode, score, best[1])):
                best = (trial.number, score, choice)
    best_params = None if best is None else experiment.params.choose(best[2])
    return {'best_params': best_params, 'best_score': float('nan') if best is None else best[1],
            'best_trial': None if best is None else best[0], 'results': results,
            'trials': trials}


def write_summary(experiment: Experiment, study: optuna.Study, summary: dict[str, Any],
                  study_id: str) -> None:
    best_params = summary['best_params']
    train_utils.atomic_write_text(
        os.path.join(experiment.output_dir, SUMMARY_FILE),
        json_values.dumps_json(json_values._strict_json_value({
            'study_name': study.study_name, 'study_id': study_id,
            'direction': study.direction.name.lower(),
            'val_score_key': experiment.val_score_key,
            'best_trial': summary['best_trial'],
            'best_score': score_for_json(summary['best_score']),
            'best_choice': None if best_params is None else json_values.to_json_value(
                best_params.choice, 'best_choice'),
            'best_params': None if best_params is None else best_params.to_json(),
            'trials': summary['trials']})))


def _save_figure(axes: Axes, path: str, plt: ModuleType) -> None:
    figure = axes.figure
    try:
        # Optuna's long parameter names (paths) would be cut at the figure's edge.
        write_atomically(path, lambda stream: figure.savefig(stream, format='png',
                                                             bbox_inches='tight'))
    finally:
        plt.close(figure)


def write_figures(experiment: Experiment, study: optuna.Study) -> None:
    """The optimization history and the parameter importances, as PNG beside search.json."""
    try:
        _figures.import_matplotlib('search figures')
    except ImportError as error:
        warnings.warn('{}; search.json is written, the figures are not'.format(error))
        return
    plt = _figures.pyplot()
    from optuna.visualization import matplotlib as optuna_plots  # imports matplotlib
    complete = study.get_trials(deepcopy=False, states=(_STATES.COMPLETE,))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        if complete:
            _save_figure(optuna_plots.plot_optimization_history(study),
                         os.path.join(experiment.output_dir, HISTORY_FIGURE), plt)
        # Optuna warns when the complete trials cannot be told apart (one value of each
        # parameter among them): the figure then shows equal importances, which says so.
        warnings.filterwarnings('ignore', 'Target and region quantiles select the same set',
                                UserWarning)
        if len(complete) >= 2:
            _save_figure(optuna_plots.plot_param_importances(study),
                         os.path.join(experiment.output_dir, IMPORTANCE_FIGURE), plt)
        else:
            warnings.warn('search: {} is drawn from 2 finished trials or more; the study has '
                          '{}'.format(IMPORTANCE_FIGURE, len(complete)), RuntimeWarning)
