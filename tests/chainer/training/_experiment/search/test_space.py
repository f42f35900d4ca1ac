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
