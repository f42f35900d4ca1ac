"""The search's study: its storage, opening it, its identity, and trials of dead processes.

By default the study is the SQLite file ``<name>/search.db``; its URL is built by
SQLAlchemy, so any folder name works (``?``, ``#``, ``%``, spaces, braces, non-ASCII).
Opening the study (the storage, then the study made or loaded) is tried up to
``OPEN_ATTEMPTS`` times, ``0.5 * k`` s after the k-th failure (5 s in all), but only for
what goes away: the storage busy (locked), or processes starting together racing to
create its tables and to record its schema version. Any other failure (a file that is
no SQLite database, a folder named ``search.db``, a folder this process cannot write) is
raised at once as an OSError naming the file and what to do; after the last attempt the
OSError names the storage too.

A study's identity is a random id stored as its user attribute ``researchutils_study_id``
when a search first opens it: a study made anew (``search.db`` deleted, an in-memory
storage) has another one, so its trials get folders of their own (``folders.py``).
Processes opening a new study at once may each store an id, the last one staying: each
trial reads the id when it starts and records the folder it took in its own user
attribute ``folder``, where that trial's folder is found later.

A storage made from a URL (the default file included) has Optuna's heartbeat: each trial
records that it is alive every ``heartbeat_interval`` s, and a trial that stopped beating
for ``grace_period`` s is failed by the next search that starts a trial, and retried
(``retries.py``); a storage object is used as it is, with its own heartbeat or none.

A storage built here is the search's to close: its connections are closed when the search
ends (:func:`opened_study`), and an SQLite file's are not pooled at all, so that none is
left for the garbage collector (which closes it with a ResourceWarning). A storage object
the user passed is the user's, and left open.
Tests: ``tests/chainer/training/test_search.py``.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

import optuna
import sqlalchemy.exc
import sqlalchemy.pool
from sqlalchemy.engine import URL, make_url

from researchutils._storage_drivers import check_storage_driver
from researchutils.chainer.training._experiment.search import folders, retries, space

if TYPE_CHECKING:
    from researchutils.chainer.training._experiment.protocol import Experiment

STUDY_FILE = 'search.db'
HEARTBEAT_INTERVAL = 60
# Without grace_period, a trial is failed after this many missed beats: three, not Optuna's
# two, as a busy database server may hold a beat back for a while.
GRACE_BEATS = 3
OPEN_ATTEMPTS = 5
STUDY_ID_ATTR = 'researchutils_study_id'
# Failures that go away when tried again: a lock held by another process, and the race of
# processes creating the tables ("already exists") and the schema version (an integrity
# error, a UNIQUE constraint) at once.
_TRANSIENT_MESSAGES = ('database is locked', 'database table is locked', 'already exists')
_SQLITE_HEADER = b'SQLite format 3\x00'

#: ``(heartbeat_interval, grace_period)`` of a storage the search builds, in seconds.
Heartbeat: TypeAlias = tuple[int | None, int | None]
#: What the search takes as its storage: a URL, or an Optuna storage object.
Storage: TypeAlias = str | optuna.storages.BaseStorage


def default_url(folder: str) -> str:
    """The URL of ``<folder>/search.db``, escaped so that SQLAlchemy reads back the path."""
    path = os.path.join(os.path.abspath(folder), STUDY_FILE)
    url = URL.create('sqlite', database=path).render_as_string(hide_password=False)
    # Optuna fills {SCHEMA_VERSION} into a URL with str.format: a brace of the path stays one.
    return url.replace('{', '{{').replace('}', '}}')


def grace_of(heartbeat_interval: int | None, grace_period: int | None) -> int | None:
    """The grace period a search gives a storage it builds (None without a heartbeat)."""
    if heartbeat_interval is None:
        return None
    return GRACE_BEATS * heartbeat_interval if grace_period is None else grace_period


def _heartbeat_kwargs(heartbeat_interval: int | None, grace_period: int | None
                      ) -> dict[str, Any]:
    if heartbeat_interval is None:
        return {}
    # Optuna 4.9 renamed failed_trial_callback; the older name warns from then on.
    parameters = inspect.signature(optuna.storages.RDBStorage).parameters
    callback = ('heartbeat_stale_trial_callback' if 'heartbeat_stale_trial_callback'
                in parameters else 'failed_trial_callback')
    return {'heartbeat_interval': heartbeat_interval,
            'grace_period': grace_of(heartbeat_interval, grace_period),
            callback: retries.retry}


def _file_sqlite(url: str) -> bool:
    """Whether ``url`` is an SQLite file (SQLAlchemy's own test: not ``:memory:``, not
    ``mode=memory``), where each connection may be closed once released."""
    parsed = make_url(url)
    return (parsed.get_backend_name() == 'sqlite'
            and parsed.database not in (None, '', ':memory:')
            and parsed.query.get('mode') != 'memory')


def _rdb_storage(url: str, heartbeat_interval: int | None, grace_period: int | None
                 ) -> optuna.storages.RDBStorage:
    engine_kwargs: dict[str, Any] = {}
    if _file_sqlite(url):
        # A connection pooled by SQLAlchemy stays open until the engine is disposed or
        # garbage collected (a ResourceWarning, an error in our suite): for a file, opening
        # one costs microseconds, so none is kept once released, not even by the study the
        # search returns.
        engine_kwargs['poolclass'] = sqlalchemy.pool.NullPool
        if 'timeout' not in make_url(url).query:
            # Processes sharing the file wait for each other's writes, not 5 s only.
            engine_kwargs['connect_args'] = {'timeout': 300}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                          **_heartbeat_kwargs(heartbeat_interval, grace_period))


def close_storage(storage: optuna.storages.RDBStorage) -> None:
    """Closes the database connections of an RDBStorage the search built (its pool, for a
    server); the storage stays usable and opens new ones when asked again."""
    storage.remove_session()
    storage.engine.dispose()


def _causes(error: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _transient(error: BaseException) -> bool:
    return any(isinstance(cause, sqlalchemy.exc.IntegrityError) or any(
        message in str(cause).lower() for message in _TRANSIENT_MESSAGES)
        for cause in _causes(error))


def _describe(storage: Storage) -> str:
    if isinstance(storage, str):
        return make_url(storage.replace('{{', '{').replace('}}', '}')).render_as_string(
            hide_password=True)
    return type(storage).__name__


def _default_file_advice(path: str, error: BaseException) -> str:
    """What is wrong with the default study file ``path``, and what to do."""
    if os.path.isdir(path):
        return 'it is a folder, not an SQLite file: move it away'
    try:
        with open(path, 'rb') as stream:
            header = stream.read(len(_SQLITE_HEADER))
    except OSError:
        header = b''
    if header and header != _SQLITE_HEADER[:len(header)]:
        return ('it is no SQLite database (it does not begin as one): move it away to start '
                'a new study there')
    return ('SQLite cannot create or write it ({}): this process must be able to write the '
            'file and its folder {}'.format(_first_line(error), os.path.dirname(path)))


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _create(storage: Storage, experiment: Experiment,
            sampler: optuna.samplers.BaseSampler | None, pruner: optuna.pruners.BasePruner | None,
            direction: str, heartbeat: Heartbeat
            ) -> tuple[optuna.Study, optuna.storages.RDBStorage | None]:
    """The study in ``storage``, and the RDBStorage built for it from a URL (else None)."""
    built = _rdb_storage(storage, *heartbeat) if isinstance(storage, str) else None
    try:
        study = optuna.create_study(
            storage=storage if built is None else built,
            sampler=sampler if sampler is not None else optuna.samplers.TPESampler(),
            pruner=pruner if pruner is not None else optuna.pruners.MedianPruner(),
            study_name=experiment.name, direction=direction, load_if_exists=True)
    except BaseException:
        if built is not None:
            close_storage(built)
        raise
    return study, built


def check_storage(storage: Storage | None) -> None:
    """Refuses, before anything is opened, a storage URL whose database driver is missing
    (an ImportError naming the driver and what to install)."""
    if isinstance(storage, str):
        check_storage_driver(storage)


@contextlib.contextmanager
def opened_study(experiment: Experiment, storage: Storage | None,
                 sampler: optuna.samplers.BaseSampler | None,
                 pruner: optuna.pruners.BasePruner | None,
                 heartbeat: Heartbeat = (HEARTBEAT_INTERVAL, None)) -> Iterator[optuna.Study]:
    """The study named after the experiment (made or continued), its direction checked;
    on leaving, the connections of a storage built here from a URL (or the default file)
    are closed. A storage object the user passed is left as it is: it is the user's.

    ``heartbeat`` is ``(heartbeat_interval, grace_period)`` for a storage built from a URL.
    """
    default = storage is None
    if default:
        os.makedirs(experiment.output_dir, exist_ok=True)
        storage = default_url(experiment.output_dir)
    direction = 'minimize' if experiment.val_score_mode == 'lowest' else 'maximize'
    path = os.path.join(experiment.output_dir, STUDY_FILE)
    where = path if default else _describe(storage)
    for attempt in range(OPEN_ATTEMPTS):
        try:
            study, built = _create(storage, experiment, sampler, pruner, direction, heartbeat)
            break
        except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError,
                OSError) as error:
            if not _transient(error):
                advice = _default_file_advice(path, error) if default else _first_line(error)
                raise OSError('search: cannot open the study {!r} in {}: {}; or give the '
                              'search another storage'.format(experiment.name, where, advice)
                              ) from error
            if attempt == OPEN_ATTEMPTS - 1:
                raise OSError('search: the study storage {} stayed busy through {} attempts '
                              'over {:.0f} s ({}): another process holds it; try again when '
                              'it is free'.format(where, OPEN_ATTEMPTS, _retry_seconds(),
                                                  _first_line(error))) from error
            time.sleep(0.5 * (attempt + 1))
    try:
        if study.direction.name.lower() != direction:
            raise ValueError('the study {!r} in the storage is to {}, but val_score_mode={!r} '
                             'asks to {}{}'.format(experiment.name, study.direction.name.lower(),
                                                   experiment.val_score_mode, direction,
                                                   space.NEW_STUDY))
        yield study
    finally:
        if built is not None:
            close_storage(built)


def _retry_seconds() -> float:
    return sum(0.5 * (attempt + 1) for attempt in range(OPEN_ATTEMPTS - 1))


def study_id(study: optuna.Study) -> str:
    """The study's identity: the id stored in it, stored now when it has none."""
    if STUDY_ID_ATTR not in study.user_attrs:
        study.set_user_attr(STUDY_ID_ATTR, uuid.uuid4().hex)
    value = study.user_attrs[STUDY_ID_ATTR]  # read back: another process may have set it
    if not folders.is_study_id(value):
        raise ValueError('the study {!r} has the user attribute {}={!r}, which is no id a '
                         'search stored (32 hexadecimal digits): it names the folders of its '
                         'trials, so it is not used'.format(study.study_name, STUDY_ID_ATTR,
                                                            value))
    return value
