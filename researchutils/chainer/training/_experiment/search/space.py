"""The search space: the experiment's variable parameters as Optuna suggestions, and back.

Lists are categorical choices; FloatRange and IntRange are Optuna's float and int
distributions. A study is data that other processes write, so what is read back from it
is trusted as ``experiment.json`` is: a list's value only by its label, a range's only as a
number in it. A trial with parameters other than this space's (a study of the same name
from another search) is refused, naming the study and the trial, before it could count
towards ``n_trials``. Tests: ``tests/chainer/training/test_search.py``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import optuna

from researchutils.chainer.training import json_values
from researchutils.chainer.training._trees import leaves
from researchutils.chainer.training.search_space import FloatRange, IntRange

if TYPE_CHECKING:
    from researchutils.chainer.training.parameters import Parameters

_PLAIN = (type(None), bool, int, float, str)
# Ends every refusal of a study that another search space made, or another direction.
NEW_STUDY = ('. To search with these settings, start a new study: give the experiment another '
             'name (its study is named after it) or save_path (its default storage is '
             '<save_path>/<name>/search.db), or the search another storage; to go on with this '
             'study, search it with the settings it was made with')
# The trials that count towards n_trials: each drew every parameter of its space.
_FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def _labels(candidates: Sequence[object]) -> list[object]:
    """The Optuna choices standing for a list's candidates: the values themselves when Optuna
    can store and tell them apart, else the JSON text of each (a class, a tuple; or values
    Optuna finds equal, as 1, 1.0 and True, which it stores by their position found with
    ``==``)."""
    plain = all(isinstance(candidate, _PLAIN) and not (
        isinstance(candidate, float) and math.isnan(candidate)) for candidate in candidates)
    if plain and all(first != second for i, first in enumerate(candidates)
                     for second in candidates[i + 1:]):
        return list(candidates)
    return [json.dumps(json_values.to_json_value(candidate), sort_keys=True)
            for candidate in candidates]


def _index(labels: Sequence[object], raw: object) -> int | None:
    """Where ``raw`` is among ``labels``, by type and value (1, 1.0 and True are three), or
    None."""
    return next((i for i, label in enumerate(labels)
                 if type(label) is type(raw) and label == raw), None)


class Space(object):
    """The experiment's variable parameters as Optuna suggestions, and back."""

    def __init__(self, params: Parameters) -> None:
        self.params = params
        # (path, candidates or range) of each variable parameter, as Parameters checked it.
        self.dimensions: list[tuple[str, list[Any] | FloatRange | IntRange]] = [
            ('/'.join(path), value) for path, value in leaves(params.variable_params)]
        if not self.dimensions:
            raise ValueError('search needs variable parameters to search over: give '
                             'Parameters variable_params (lists, FloatRange, IntRange)')
        self.names = {name for name, _ in self.dimensions}
        self.labels = {name: _labels(value) for name, value in self.dimensions
                       if isinstance(value, list)}

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Asks ``trial`` for a value of every parameter: the choice, path to value."""
        choice: dict[str, Any] = {}
        for name, value in self.dimensions:
            if isinstance(value, FloatRange):
                choice[name] = trial.suggest_float(name, value.low, value.high, step=value.step,
                                                   log=value.log)
            elif isinstance(value, IntRange):
                choice[name] = trial.suggest_int(name, value.low, value.high, step=value.step,
                                                 log=value.log)
            else:
                label = trial.suggest_categorical(name, self.labels[name])
                index = _index(self.labels[name], label)
                assert index is not None  # Optuna suggests one of the labels it was given
                choice[name] = value[index]
        return choice

    def read(self, trial: optuna.trial.FrozenTrial, study_name: str) -> dict[str, Any] | None:
        """The choice of a trial of the study ``study_name`` read back (run by anyone), by the
        rules of experiment.json; None for a trial stopped before it drew every value."""
        where = 'trial {} of the study {!r}'.format(trial.number, study_name)
        drawn = set(trial.params)
        if not drawn <= self.names or (trial.state in _FINISHED and drawn != self.names):
            raise ValueError(
                '{} has the parameters {}, but this search has {}: the study is another '
                "search's (a study of the same name over another space){}".format(
                    where, sorted(drawn), sorted(self.names), NEW_STUDY))
        if drawn != self.names:
            return None  # stopped before all its values were drawn
        choice: dict[str, Any] = {}
        for name, value in self.dimensions:
            raw = trial.params[name]
            if isinstance(value, list):
                index = _index(self.labels[name], raw)
                if index is None:
                    raise ValueError('{} has {}={!r}, which is none of its candidates {}{}'
                                     .format(where, name, raw, self.labels[name], NEW_STUDY))
                raw = value[index]
            choice[name] = raw
        try:
            self.params.choose(choice)
        except ValueError as error:
            raise ValueError('{}: {}{}'.format(where, error, NEW_STUDY)) from None
        return choice
