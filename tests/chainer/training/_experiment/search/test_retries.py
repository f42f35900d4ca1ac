"""Retries of failed trials: a series of retries leads back to its first trial."""
import warnings

import pytest

from researchutils.chainer.training._experiment.search import retries

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _fail_the_next_trial(study):
    """Asks for the next trial (the waiting retry, when there is one), and fails it as a
    worker's death does."""
    trial = study.ask({'x': optuna.distributions.FloatDistribution(0.0, 1.0)})
    retries.fail_and_retry(study, trial)
    return trial.number


def test_a_trial_retried_twice_records_the_first_trial_of_its_series():
    study = optuna.create_study()
    first = _fail_the_next_trial(study)
    first_retry = _fail_the_next_trial(study)
    second_retry = _fail_the_next_trial(study)
    waiting, = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting.system_attrs[retries.FAILED_TRIAL] == first
    assert retries.history(waiting) == [first, first_retry, second_retry]
    # Optuna's own reader of retries follows it back to the origin as well.
    callback = optuna.storages.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        assert callback.retried_trial_number(waiting) == first
        assert callback.retry_history(waiting) == [first, first_retry, second_retry]
    assert len({trial.params['x'] for trial in study.trials}) == 1


def test_a_first_failure_is_its_own_origin():
    study = optuna.create_study()
    first = _fail_the_next_trial(study)
    waiting, = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting.system_attrs[retries.FAILED_TRIAL] == first
    assert retries.history(waiting) == [first]
