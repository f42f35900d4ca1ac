"""Optuna studies that the search tests open themselves, closed when the test ends.

Optuna's RDBStorage keeps its database connections in SQLAlchemy's pool until the engine
is disposed; one left to the garbage collector is closed with a ResourceWarning (Python
3.13's sqlite3, psycopg), which the suite turns into an error. So a test never hands
Optuna a URL: :func:`create` and :func:`load` build the storage here, and the
``close_studies`` fixture (autouse in tests/chainer/training/conftest.py) closes every
storage so built when the test ends. :func:`closed_study` does the same around a block, for
helpers that outlive one test (a session's reference trials). :func:`retry_history` is
Optuna's reading of a retried trial's history; :func:`state_after_silence` what becomes of a
trial whose heartbeat stopped; ``FEW_COMPLETE`` marks a test whose searches end with fewer
than two complete trials.
Used by tests/chainer/training/test_search*.py and tests/support/search_nodes.py.
"""
import contextlib
import sqlite3
import warnings

import pytest

_opened = []
# A search that ends with fewer than two trials complete warns that it draws no parameter
# importances (test_search.py checks it with pytest.warns); a test of another behaviour
# marked with this expects that one warning, and only it.
FEW_COMPLETE = pytest.mark.filterwarnings(
    'ignore:search. search_importances.png is drawn from 2 finished trials:RuntimeWarning')


def storage(url):
    """An RDBStorage of ``url``, closed when the test ends."""
    import optuna
    built = optuna.storages.RDBStorage(url)
    _opened.append(built)
    return built


def create(url, study_name='exp', **kwargs):
    """``optuna.create_study`` on ``url`` (``load_if_exists`` and the rest as keywords)."""
    import optuna
    return optuna.create_study(storage=storage(url), study_name=study_name, **kwargs)


def load(url, study_name='exp'):
    """``optuna.load_study`` of ``url``."""
    import optuna
    return optuna.load_study(study_name=study_name, storage=storage(url))


def close(built):
    """Closes the connections of the RDBStorage ``built``."""
    built.remove_session()
    built.engine.dispose()


def close_all():
    """Closes every storage :func:`storage` built since the last call."""
    while _opened:
        close(_opened.pop())


def retry_history(trial):
    """Optuna's own reading of the trials ``trial`` retries (``RetryFailedTrialCallback.
    retry_history``, which Optuna marks experimental: that one warning is expected)."""
    import optuna
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RetryFailedTrialCallback.retry_history(trial)


@contextlib.contextmanager
def closed_study(url, study_name='exp', **kwargs):
    """The study ``study_name`` of ``url`` (made when ``create=True`` is given), closed on
    leaving the block."""
    import optuna
    make = kwargs.pop('create', False)
    built = optuna.storages.RDBStorage(url)
    try:
        if make:
            yield optuna.create_study(storage=built, study_name=study_name, **kwargs)
        else:
            yield optuna.load_study(study_name=study_name, storage=built)
    finally:
        close(built)


@pytest.fixture(autouse=True)
def close_studies():
    """Closes, when the test ends, every study storage the test built here."""
    try:
        yield
    finally:
        close_all()


def state_after_silence(path, study, seconds):
    """The state (an ``optuna.trial.TrialState``) of a new RUNNING trial of ``study``, whose
    SQLite file is ``path``, once its last heartbeat is ``seconds`` old and stale trials
    are failed (as every search does before it asks for a trial)."""
    import optuna
    with warnings.catch_warnings():
        # A trial asked for outside optimize, where the caller writes its beat.
        warnings.filterwarnings('ignore', 'Heartbeat of storage is supposed', UserWarning)
        trial = study.ask()
    with contextlib.closing(sqlite3.connect(str(path))) as database:
        with database:
            (trial_id,), = database.execute(
                'SELECT trial_id FROM trials WHERE number = ?', (trial.number,)).fetchall()
            database.execute(
                "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES "
                "(?, datetime('now', ?))", (trial_id, '-{} seconds'.format(seconds)))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return study.trials[trial.number].state
