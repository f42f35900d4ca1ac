"""The study a search opens: the heartbeat's grace period it gives the storage it builds."""
import contextlib
import sqlite3
import warnings

import pytest

from tests.chainer.training import search_tasks

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)

# A trial whose last beat is this old: past the default grace of a 1 s heartbeat (3 beats),
# within a grace of 30 s.
SILENT_SECONDS = 10


def _searched_study(tmp_path, grace_period):
    """The study of a one-trial search with a 1 s heartbeat and ``grace_period``."""
    experiment = search_tasks.search_experiment(
        str(tmp_path), search_tasks.search_params(num_epochs=1, learning_rates=[0.1]))
    url = 'sqlite:///' + str(tmp_path / 'study.db')
    with warnings.catch_warnings():
        # One trial is too few for Optuna's importance figure, which the search says.
        warnings.filterwarnings('ignore', '.*drawn from 2 finished trials', RuntimeWarning)
        result = experiment.search(*search_tasks.search_managers(), n_trials=1, storage=url,
                                   heartbeat_interval=1, grace_period=grace_period)
    return result['study']


def _state_after_silence(tmp_path, study):
    """The state of a RUNNING trial whose last heartbeat is SILENT_SECONDS old, once stale
    trials are failed (as every search does before it asks for a trial)."""
    with warnings.catch_warnings():
        # A trial asked for outside optimize (as here, where the test writes its beat).
        warnings.filterwarnings('ignore', 'Heartbeat of storage is supposed', UserWarning)
        trial = study.ask()
    with contextlib.closing(sqlite3.connect(str(tmp_path / 'study.db'))) as database:
        with database:
            (trial_id,), = database.execute(
                'SELECT trial_id FROM trials WHERE number = ?', (trial.number,)).fetchall()
            database.execute(
                "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES "
                "(?, datetime('now', ?))", (trial_id, '-{} seconds'.format(SILENT_SECONDS)))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return study.trials[trial.number].state.name


@pytest.mark.parametrize('grace_period, state', [(30, 'RUNNING'), (5, 'FAIL'),
                                                 (None, 'FAIL')])
def test_search_gives_its_storage_the_grace_period_it_is_given(tmp_path, grace_period, state):
    study = _searched_study(tmp_path, grace_period)
    assert _state_after_silence(tmp_path, study) == state
