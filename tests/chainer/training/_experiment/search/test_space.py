"""The search space as Optuna suggestions: log-scale ranges are sampled on a log scale."""
import math

import numpy as np
import pytest

from researchutils.chainer.training._experiment.search.space import Space
from researchutils.chainer.training.search_space import FloatRange, IntRange
from tests.chainer.training import tasks

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

N_TRIALS = 120
# The samplers a search takes without further packages: None gives TPESampler().
SAMPLERS = {
    'tpe': lambda: optuna.samplers.TPESampler(seed=0),
    'random': lambda: optuna.samplers.RandomSampler(seed=0),
    'nsga2': lambda: optuna.samplers.NSGAIISampler(seed=0),
}


def _drawn(sampler, ranges):
    """The values ``sampler`` draws for ``ranges`` (path to range) over N_TRIALS trials, all
    told the same score: no value is better, so a sampler spreads its draws over the range
    by its scale alone (TPE included, past its random start-up trials)."""
    space = Space(tasks.make_params(variable={'model': dict(ranges)}))
    study = optuna.create_study(sampler=sampler)
    drawn = {name: [] for name in ranges}
    for _ in range(N_TRIALS):
        trial = study.ask()
        choice = space.suggest(trial)
        for name in ranges:
            drawn[name].append(choice['model/' + name])
        study.tell(trial, 0.0)
    return drawn


@pytest.mark.parametrize('sampler', sorted(SAMPLERS))
def test_log_ranges_are_sampled_on_a_log_scale_by_every_sampler(sampler):
    ranges = {'rate': FloatRange(1e-4, 1.0, log=True), 'width': IntRange(1, 10000, log=True)}
    drawn = _drawn(SAMPLERS[sampler](), ranges)
    for name, values in drawn.items():
        low, high = ranges[name].low, ranges[name].high
        assert all(low <= value <= high for value in values)
        logs = np.log(values)
        # Spread over the logarithms' range: about half below the geometric middle (on a
        # linear scale, 1 in 100), and both ends of it reached.
        below_middle = np.mean(logs < (math.log(low) + math.log(high)) / 2)
        assert 0.3 <= below_middle <= 0.7, (name, below_middle)
        quarter = (math.log(high) - math.log(low)) / 4
        assert logs.min() < math.log(low) + quarter, (name, sorted(values)[:5])
        assert logs.max() > math.log(high) - quarter, (name, sorted(values)[-5:])


# TPE's draws on a linear scale, told equal scores, lean towards the low end: the spread
# test holds for the samplers that draw independently of the scores.
@pytest.mark.parametrize('sampler', ['nsga2', 'random'])
def test_linear_ranges_are_sampled_on_a_linear_scale(sampler):
    ranges = {'rate': FloatRange(1e-4, 1.0), 'width': IntRange(1, 10000)}
    drawn = _drawn(SAMPLERS[sampler](), ranges)
    for name, values in drawn.items():
        middle = (ranges[name].low + ranges[name].high) / 2
        assert 0.3 <= np.mean(np.array(values) < middle) <= 0.7, name


class Kind(object):
    """A class as a candidate: Optuna cannot store it, its JSON text stands for it."""


def _space(**variable):
    return Space(tasks.make_params(variable={'model': variable}))


def _asked(space, study=None):
    """A trial of a real study asked for the space's values; (its choice, the trial)."""
    study = study or optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    return space.suggest(trial), study.trials[trial.number]


def _stored(state, params, distributions, study=None):
    """A trial of ``state`` with ``params`` added to a study; (the study, the trial)."""
    study = study or optuna.create_study(study_name='other')
    study.add_trial(optuna.trial.create_trial(
        state=state, params=params, distributions=distributions,
        **({'value': 0.0} if state == optuna.trial.TrialState.COMPLETE else {})))
    return study, study.trials[-1]


_COMPLETE = optuna.trial.TrialState.COMPLETE
_RUNNING = optuna.trial.TrialState.RUNNING
_WIDTH = {'model/width': optuna.distributions.CategoricalDistribution([8, 16])}
_RATE = {'model/rate': optuna.distributions.FloatDistribution(0.0, 1.0)}


def test_a_space_needs_variable_parameters():
    with pytest.raises(ValueError, match='variable_params'):
        Space(tasks.make_params())


def test_plain_candidates_are_stored_in_the_study_as_themselves():
    choice, trial = _asked(_space(width=[8, 16], act='relu'.split() + ['tanh'],
                                  rate=FloatRange(0.1, 0.2), depth=IntRange(1, 3)))
    assert trial.params == {'model/' + name: value for name, value in
                            [(key.split('/')[1], value) for key, value in choice.items()]}
    assert choice['model/width'] in (8, 16) and choice['model/act'] in ('relu', 'tanh')
    assert 0.1 <= choice['model/rate'] <= 0.2 and choice['model/depth'] in (1, 2, 3)
    assert type(choice['model/depth']) is int


@pytest.mark.parametrize('candidates, position', [
    ([1, 1.0, True], 1),        # equal under ==: each stands for itself by its JSON text
    ([1, 1.0, True], 2),
    ([1, 1.0, True], 0),
    ([2, 2.0], 1),              # two equal ones side by side
    ([(1, 2), (3, 4)], 1),      # a tuple Optuna cannot store
    ([None, Kind], 1),          # nor a class
])
def test_candidates_optuna_cannot_store_or_tell_apart_are_chosen_by_their_json_text(
        candidates, position):
    space = _space(choice=candidates)
    labels = space.labels['model/choice']
    assert all(isinstance(label, str) for label in labels) and len(set(labels)) == len(labels)
    choice = space.suggest(optuna.trial.FixedTrial({'model/choice': labels[position]}))
    value = candidates[position]
    assert choice['model/choice'] == value and type(choice['model/choice']) is type(value)
    # And read back from a study as that candidate.
    _, trial = _stored(_COMPLETE, {'model/choice': labels[position]},
                       {'model/choice': optuna.distributions.CategoricalDistribution(labels)})
    read = space.read(trial, 'other')['model/choice']
    assert read == value and type(read) is type(value)


def test_a_nan_candidate_is_chosen_by_its_json_text():
    space = _space(choice=[0.5, float('nan')])
    labels = space.labels['model/choice']
    assert all(isinstance(label, str) for label in labels)
    choice = space.suggest(optuna.trial.FixedTrial({'model/choice': labels[1]}))
    assert math.isnan(choice['model/choice'])


def test_a_finished_trial_is_read_back_as_the_candidates_and_numbers_it_drew():
    space = _space(width=[8, 16], rate=FloatRange(0.0, 1.0))
    _, trial = _stored(_COMPLETE, {'model/width': 16, 'model/rate': 0.25}, {**_WIDTH, **_RATE})
    assert space.read(trial, 'other') == {'model/width': 16, 'model/rate': 0.25}


def test_a_trial_stopped_before_it_drew_every_value_is_read_as_none():
    space = _space(width=[8, 16], rate=FloatRange(0.0, 1.0))
    _, trial = _stored(_RUNNING, {'model/width': 16}, _WIDTH)
    assert space.read(trial, 'other') is None


@pytest.mark.parametrize('state, params, distributions', [
    (_COMPLETE, {'model/width': 16}, _WIDTH),                       # one value short
    (_RUNNING, {'model/depth': 0.5}, {'model/depth': _RATE['model/rate']}),   # another's
])
def test_a_trial_of_another_space_is_refused_naming_the_study_and_trial(
        state, params, distributions):
    space = _space(width=[8, 16], rate=FloatRange(0.0, 1.0))
    _, trial = _stored(state, params, distributions)
    with pytest.raises(ValueError, match=r"trial 0 of the study 'other'") as info:
        space.read(trial, 'other')
    # It names the trial's parameters and the search's.
    assert str(sorted(params)) in str(info.value)
    assert "['model/rate', 'model/width']" in str(info.value)


def test_a_stored_value_that_is_none_of_the_candidates_is_refused_naming_it():
    space = _space(width=[8, 16])
    _, trial = _stored(_COMPLETE, {'model/width': 32},
                       {'model/width': optuna.distributions.CategoricalDistribution([8, 32])})
    with pytest.raises(ValueError, match=r"trial 0 of the study 'other' has model/width=32"
                                         r".*\[8, 16\]"):
        space.read(trial, 'other')


def test_a_stored_label_of_another_type_is_none_of_the_candidates():
    # 1.0 is a float label, the candidate 1 an int: Optuna's == would take one for the other.
    space = _space(width=[1, 2])
    _, trial = _stored(_COMPLETE, {'model/width': 1.0},
                       {'model/width': optuna.distributions.CategoricalDistribution([1.0, 2.0])})
    with pytest.raises(ValueError, match='model/width=1.0'):
        space.read(trial, 'other')


def test_a_stored_number_outside_its_range_is_refused_naming_the_trial():
    space = _space(rate=FloatRange(0.0, 0.5))
    _, trial = _stored(_COMPLETE, {'model/rate': 0.75}, _RATE)
    with pytest.raises(ValueError, match=r"^trial 0 of the study 'other': .*0\.75"):
        space.read(trial, 'other')


def test_a_dict_candidate_is_read_back_whatever_the_order_of_its_keys_in_the_study():
    # Another process may build the same candidate with its keys in another order.
    space = _space(optimizer=[{'name': 'sgd', 'lr': 0.1}, {'name': 'adam', 'lr': 0.01}])
    other = _space(optimizer=[{'lr': 0.1, 'name': 'sgd'}, {'lr': 0.01, 'name': 'adam'}])
    labels = other.labels['model/optimizer']
    _, trial = _stored(_COMPLETE, {'model/optimizer': labels[1]},
                       {'model/optimizer': optuna.distributions.CategoricalDistribution(labels)})
    assert space.read(trial, 'other') == {'model/optimizer': {'name': 'adam', 'lr': 0.01}}


def test_ranges_with_a_step_are_suggested_on_their_steps():
    space = _space(rate=FloatRange(0.0, 1.0, step=0.25), width=IntRange(0, 20, step=5))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    rates, widths = set(), set()
    for _ in range(40):
        choice, _ = _asked(space, study)
        rates.add(choice['model/rate'])
        widths.add(choice['model/width'])
    assert rates <= {0.0, 0.25, 0.5, 0.75, 1.0} and len(rates) > 2
    assert widths <= {0, 5, 10, 15, 20} and len(widths) > 2


_NEW_STUDY = ('To search with these settings, start a new study: give the experiment another '
              'name (its study is named after it) or save_path (its default storage is '
              '<save_path>/<name>/search.db), or the search another storage; to go on with '
              'this study, search it with the settings it was made with')


@pytest.mark.parametrize('space, state, params, distributions', [
    ({'width': [8, 16]}, _COMPLETE, {'model/depth': 0.5},
     {'model/depth': _RATE['model/rate']}),                                  # another space
    ({'width': [8, 16]}, _COMPLETE, {'model/width': 32},
     {'model/width': optuna.distributions.CategoricalDistribution([8, 32])}),  # candidates
    ({'rate': FloatRange(0.0, 0.5)}, _COMPLETE, {'model/rate': 0.75}, _RATE),  # a range
])
def test_every_change_of_space_the_study_refuses_says_how_to_start_a_new_study(
        space, state, params, distributions):
    _, trial = _stored(state, params, distributions)
    with pytest.raises(ValueError) as refused:
        _space(**space).read(trial, 'other')
    assert str(refused.value).endswith('. ' + _NEW_STUDY)
