"""The study a search opens: the heartbeat's grace period it gives the storage it builds."""
import contextlib
import itertools
import sqlite3
import warnings

import pytest

from researchutils.chainer.training._experiment.search import studies
from tests.chainer.training import search_tasks, tasks
from tests.support import search_studies

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


@pytest.mark.parametrize('grace_period, state', [(30, 'RUNNING'), (5, 'FAIL'),
                                                 (None, 'FAIL')])
def test_search_gives_its_storage_the_grace_period_it_is_given(tmp_path, grace_period, state):
    study = _searched_study(tmp_path, grace_period)
    assert search_studies.state_after_silence(tmp_path / 'study.db', study,
                                              SILENT_SECONDS).name == state


def _experiment(save_path, **kwargs):
    return tasks.experiment(save_path, search_tasks.search_params(), val_score_key='MSE',
                            **kwargs)


@pytest.mark.parametrize('folder', ['plain', 'a?b#c%d {e} f\u00e9'])
def test_the_default_study_is_search_db_in_the_experiments_folder_whatever_its_name(
        tmp_path, folder):
    experiment = _experiment(tmp_path / folder)
    with studies.opened_study(experiment, None, None, None) as study:
        assert study.study_name == experiment.name
        assert study.direction.name.lower() == 'minimize'
        study.set_user_attr('mark', 1)
    path = tmp_path / folder / experiment.name / 'search.db'
    assert path.is_file()
    with contextlib.closing(sqlite3.connect(str(path))) as database:
        (name,), = database.execute('SELECT study_name FROM studies').fetchall()
    assert name == experiment.name


def test_a_highest_score_mode_opens_a_study_to_maximize(tmp_path):
    experiment = _experiment(tmp_path, val_score_mode='highest')
    with studies.opened_study(experiment, None, None, None) as study:
        assert study.direction.name.lower() == 'maximize'


def test_a_study_of_the_other_direction_is_refused_naming_it(tmp_path):
    import sqlalchemy.pool
    url = 'sqlite:///' + str(tmp_path / 'shared.db')
    # Made by another search; no connection of it is left open.
    storage = optuna.storages.RDBStorage(url, engine_kwargs={
        'poolclass': sqlalchemy.pool.NullPool})
    optuna.create_study(storage=storage, study_name='exp', direction='maximize')
    storage.remove_session()
    storage.engine.dispose()
    with pytest.raises(ValueError, match=r"'exp'.*maximize.*'lowest'.*minimize") as refused:
        with studies.opened_study(_experiment(tmp_path), url, None, None):
            pass
    assert str(refused.value).endswith('; to go on with this study, search it with the '
                                       'settings it was made with')
    assert 'start a new study: give the experiment another name' in str(refused.value)


def test_a_folder_named_search_db_is_refused_naming_it(tmp_path):
    experiment = _experiment(tmp_path)
    path = tmp_path / experiment.name / 'search.db'
    path.mkdir(parents=True)
    with pytest.raises(OSError, match='search.db.*folder'):
        with studies.opened_study(experiment, None, None, None):
            pass


def test_a_file_that_is_no_sqlite_database_is_refused_naming_it(tmp_path):
    experiment = _experiment(tmp_path)
    path = tmp_path / experiment.name / 'search.db'
    path.parent.mkdir(parents=True)
    path.write_text('not a database, long enough to be read as one ' * 4)
    with pytest.raises(OSError, match='search.db.*no SQLite database'):
        with studies.opened_study(experiment, None, None, None):
            pass


def test_a_url_that_cannot_be_opened_is_refused_naming_the_study_and_the_storage(tmp_path):
    url = 'sqlite:///' + str(tmp_path / 'missing' / 'folder' / 'study.db')
    with pytest.raises(OSError, match=r"study 'exp' in sqlite:///.*missing/folder/study\.db"
                                      r".*unable to open database file"):
        with studies.opened_study(_experiment(tmp_path), url, None, None):
            pass


def test_a_url_refused_is_named_without_its_password(tmp_path):
    url = 'sqlite://user:secret@/' + str(tmp_path / 'study.db')
    with pytest.raises(OSError, match=r"study 'exp' in sqlite://user:\*\*\*@") as info:
        with studies.opened_study(_experiment(tmp_path), url, None, None):
            pass
    assert 'secret' not in str(info.value)


def test_a_storage_object_is_used_as_it_is_and_left_open(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    with studies.opened_study(_experiment(tmp_path), storage, None, None) as study:
        study.set_user_attr('mark', 1)
    # The user's storage still answers.
    assert optuna.load_study(study_name='exp', storage=storage).user_attrs == {'mark': 1}


def test_the_samplers_and_pruners_given_are_the_studys(tmp_path):
    sampler, pruner = optuna.samplers.RandomSampler(seed=0), optuna.pruners.NopPruner()
    with studies.opened_study(_experiment(tmp_path), optuna.storages.InMemoryStorage(),
                              sampler, pruner) as study:
        assert (study.sampler, study.pruner) == (sampler, pruner)
    with studies.opened_study(_experiment(tmp_path), optuna.storages.InMemoryStorage(),
                              None, None) as study:
        assert isinstance(study.sampler, optuna.samplers.TPESampler)
        assert isinstance(study.pruner, optuna.pruners.MedianPruner)


def test_a_study_id_is_stored_once_and_kept():
    study = optuna.create_study()
    first = studies.study_id(study)
    assert len(first) == 32 and int(first, 16) >= 0
    assert studies.study_id(study) == first
    assert study.user_attrs[studies.STUDY_ID_ATTR] == first
    assert studies.study_id(optuna.create_study()) != first


@pytest.mark.parametrize('value', ['not-an-id', 'A' * 32, 5])
def test_a_stored_study_id_that_no_search_wrote_is_refused_naming_it(value):
    study = optuna.create_study(study_name='named')
    study.set_user_attr(studies.STUDY_ID_ATTR, value)
    with pytest.raises(ValueError, match=r"'named'.*researchutils_study_id={!r}".format(value)):
        studies.study_id(study)


@pytest.mark.parametrize('heartbeat, grace', [((60, None), 180), ((60, 7), 7), ((None, 7), None),
                                              ((None, None), None)])
def test_the_grace_period_is_three_beats_unless_given(heartbeat, grace):
    assert studies.grace_of(*heartbeat) == grace


def test_a_url_refused_is_named_as_given_before_optunas_brace_escaping(tmp_path):
    # {{ and }} stand for one brace in a URL Optuna reads (it fills in {SCHEMA_VERSION}).
    from sqlalchemy.engine import make_url
    given = 'sqlite:///' + str(tmp_path / 'missing' / '{a}' / 'study.db')
    escaped = given.replace('{', '{{').replace('}', '}}')
    with pytest.raises(OSError) as info:
        with studies.opened_study(_experiment(tmp_path), escaped, None, None):
            pass
    assert ' in {}: '.format(make_url(given).render_as_string()) in str(info.value)


def test_a_storage_locked_by_another_process_is_tried_again_then_named_busy(tmp_path):
    path = tmp_path / 'study.db'
    url = 'sqlite:///{}?timeout=0'.format(path)   # no wait inside SQLite for the lock
    with contextlib.closing(sqlite3.connect(str(path), isolation_level=None)) as other:
        other.execute('BEGIN EXCLUSIVE')
        with pytest.raises(OSError, match=r'stayed busy through 5 attempts over 5 s .*locked'):
            with studies.opened_study(_experiment(tmp_path), url, None, None):
                pass
        other.execute('ROLLBACK')
    # Once free, it opens.
    with studies.opened_study(_experiment(tmp_path), url, None, None) as study:
        assert study.study_name == 'exp'


def _locked_for_writes(path):
    """Another process's connection to the SQLite file ``path`` holding its write lock
    (others may read, none may write)."""
    other = sqlite3.connect(str(path), isolation_level=None)
    other.execute('BEGIN IMMEDIATE')
    return other


def _made_study_file(path):
    storage = studies._rdb_storage('sqlite:///{}'.format(path), None, None)
    optuna.create_study(storage=storage, study_name='other')
    studies.close_storage(storage)


def test_a_url_storage_whose_study_cannot_be_written_is_named_busy(tmp_path):
    # The storage opens (its tables are there) but the study cannot be recorded: the storage
    # built is closed and the busy storage named, whatever the cleanup.
    path = tmp_path / 'study.db'
    _made_study_file(path)
    url = 'sqlite:///{}?timeout=0'.format(path)
    with contextlib.closing(_locked_for_writes(path)):
        with pytest.raises(OSError, match=r'study\.db\?timeout=0 stayed busy'):
            with studies.opened_study(_experiment(tmp_path), url, None, None):
                pass


def test_a_storage_object_whose_study_cannot_be_written_is_named_by_its_type(tmp_path):
    import sqlalchemy.pool
    path = tmp_path / 'study.db'
    _made_study_file(path)
    storage = optuna.storages.RDBStorage('sqlite:///{}'.format(path), engine_kwargs={
        'poolclass': sqlalchemy.pool.NullPool, 'connect_args': {'timeout': 0}})
    try:
        with contextlib.closing(_locked_for_writes(path)):
            with pytest.raises(OSError, match=r'storage RDBStorage stayed busy'):
                with studies.opened_study(_experiment(tmp_path), storage, None, None):
                    pass
        # The user's storage is left usable.
        with studies.opened_study(_experiment(tmp_path), storage, None, None) as study:
            assert study.study_name == 'exp'
    finally:
        studies.close_storage(storage)


def test_a_default_file_that_is_an_sqlite_database_is_not_called_no_database(tmp_path):
    # An SQLite database of another program (its own studies table): the advice names the
    # error and the folder, and does not call the file no database.
    experiment = _experiment(tmp_path)
    path = tmp_path / experiment.name / 'search.db'
    path.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(str(path))) as database:
        with database:
            database.execute('CREATE TABLE studies (unrelated TEXT)')
            database.execute('CREATE TABLE version_info (unrelated TEXT)')
            database.execute('CREATE TABLE alembic_version (unrelated TEXT)')
            database.execute('CREATE TABLE trials (unrelated TEXT)')
    with pytest.raises(OSError) as info:
        with studies.opened_study(experiment, None, None, None):
            pass
    message = str(info.value)
    assert str(path) in message and str(path.parent) in message.split(str(path), 1)[1]
    assert 'no SQLite database' not in message
    assert studies._first_line(info.value.__cause__) in message


def test_a_default_file_sqlite_cannot_create_names_the_error_and_its_folder(tmp_path):
    # search.db links to a folder that does not exist: SQLite cannot create the file.
    experiment = _experiment(tmp_path)
    path = tmp_path / experiment.name / 'search.db'
    path.parent.mkdir(parents=True)
    path.symlink_to(tmp_path / 'missing' / 'search.db')
    with pytest.raises(OSError) as info:
        with studies.opened_study(experiment, None, None, None):
            pass
    message = str(info.value)
    assert 'unable to open database file' in message
    assert 'no SQLite database' not in message
    assert str(path.parent) in message.split(str(path), 1)[1]


@pytest.mark.parametrize('url', ['sqlite:///:memory:', 'sqlite:///',
                                 'sqlite:///file:studies?mode=memory&cache=shared&uri=true'])
def test_an_in_memory_sqlite_url_keeps_its_study_while_open(tmp_path, url):
    # Its connections are pooled: one closed would take the in-memory database with it.
    warnings.filterwarnings('ignore', '.*mode=memory', DeprecationWarning)  # SQLAlchemy's
    with studies.opened_study(_experiment(tmp_path), url, None, None) as study:
        study.set_user_attr('mark', 1)
        assert optuna.load_study(study_name='exp', storage=study._storage).user_attrs == {
            'mark': 1}


@pytest.mark.parametrize('query, busy_timeout', [('', 300000), ('?timeout=2', 2000)])
def test_a_file_storage_waits_for_other_writers_and_keeps_no_connection(
        tmp_path, query, busy_timeout):
    import sqlalchemy.pool
    storage = studies._rdb_storage('sqlite:///{}{}'.format(tmp_path / 'study.db', query),
                                   None, None)
    try:
        assert isinstance(storage.engine.pool, sqlalchemy.pool.NullPool)
        with storage.engine.connect() as connection:
            (value,), = connection.exec_driver_sql('PRAGMA busy_timeout').fetchall()
        assert value == busy_timeout
    finally:
        studies.close_storage(storage)


def test_the_causes_of_an_error_are_its_chain_each_once():
    first, second, third = ValueError('a'), KeyError('b'), OSError('c')
    first.__cause__, second.__context__ = second, third
    third.__context__ = first   # a cycle
    assert list(itertools.islice(studies._causes(first), 6)) == [first, second, third]
    assert studies._transient(ValueError('x')) is False
    locked = ValueError('outer')
    locked.__context__ = OSError('database is locked')
    assert studies._transient(locked)


@pytest.mark.parametrize('error, line', [(OSError(), 'OSError'),
                                         (ValueError('  \n '), 'ValueError'),
                                         (KeyError('one\ntwo'), "'one\\ntwo'"),
                                         (ValueError(' one\ntwo'), 'one')])
def test_the_first_line_of_an_error_or_its_type_when_it_says_nothing(error, line):
    assert studies._first_line(error) == line


def test_sqlalchemys_warnings_about_a_url_reach_the_user(tmp_path):
    # Only Optuna's warning that the heartbeat is experimental is kept from the user; what
    # SQLAlchemy says of the URL given (here: its pool for mode=memory will change) is not.
    url = 'sqlite:///file:studies?mode=memory&cache=shared&uri=true'
    with pytest.warns(DeprecationWarning, match='mode=memory'):
        with studies.opened_study(_experiment(tmp_path), url, None, None):
            pass
