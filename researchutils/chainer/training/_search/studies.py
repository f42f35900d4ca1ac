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

A trial records its process (host, pid, start time) as its ``worker`` user attribute; a
RUNNING trial whose process is gone from this host is failed. A trial of another host is
never judged here (its pid means nothing on this one): storages made from a URL have
Optuna's heartbeat, which fails it once it stopped beating for ``GRACE_PERIOD`` s.
Tests: ``tests/chainer/training/test_search.py``.
"""
import os
import socket
import time
import uuid
import warnings

import optuna
import sqlalchemy.exc
from sqlalchemy.engine import URL, make_url

from researchutils.chainer.training._search import folders

STUDY_FILE = 'search.db'
HEARTBEAT_INTERVAL = 60
GRACE_PERIOD = 180
OPEN_ATTEMPTS = 5
STUDY_ID_ATTR = 'researchutils_study_id'
# Failures that go away when tried again: a lock held by another process, and the race of
# processes creating the tables ("already exists") and the schema version (an integrity
# error, a UNIQUE constraint) at once.
_TRANSIENT_MESSAGES = ('database is locked', 'database table is locked', 'already exists')
_SQLITE_HEADER = b'SQLite format 3\x00'


def default_url(folder):
    """The URL of ``<folder>/search.db``, escaped so that SQLAlchemy reads back the path."""
    path = os.path.join(os.path.abspath(folder), STUDY_FILE)
    url = URL.create('sqlite', database=path).render_as_string(hide_password=False)
    # Optuna fills {SCHEMA_VERSION} into a URL with str.format: a brace of the path stays one.
    return url.replace('{', '{{').replace('}', '}}')


def _rdb_storage(url):
    engine_kwargs = {}
    if url.startswith('sqlite') and 'timeout' not in make_url(url).query:
        # Processes sharing the file wait for each other's writes, not 5 s only.
        engine_kwargs = {'connect_args': {'timeout': 300}}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                          heartbeat_interval=HEARTBEAT_INTERVAL,
                                          grace_period=GRACE_PERIOD)


def _causes(error):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _transient(error):
    return any(isinstance(cause, sqlalchemy.exc.IntegrityError) or any(
        message in str(cause).lower() for message in _TRANSIENT_MESSAGES)
        for cause in _causes(error))


def _describe(storage):
    if isinstance(storage, str):
        return make_url(storage.replace('{{', '{').replace('}}', '}')).render_as_string(
            hide_password=True)
    return type(storage).__name__


def _default_file_advice(path, error):
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


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _create(storage, experiment, sampler, pruner, direction):
    return optuna.create_study(
        storage=_rdb_storage(storage) if isinstance(storage, str) else storage,
        sampler=sampler if sampler is not None else optuna.samplers.TPESampler(),
        pruner=pruner if pruner is not None else optuna.pruners.MedianPruner(),
        study_name=experiment.name, direction=direction, load_if_exists=True)


def open_study(experiment, storage, sampler, pruner):
    """The study named after the experiment (made or continued), its direction checked."""
    default = storage is None
    if default:
        os.makedirs(experiment.output_dir, exist_ok=True)
        storage = default_url(experiment.output_dir)
    direction = 'minimize' if experiment.val_score_mode == 'lowest' else 'maximize'
    path = os.path.join(experiment.output_dir, STUDY_FILE)
    where = path if default else _describe(storage)
    for attempt in range(OPEN_ATTEMPTS):
        try:
            study = _create(storage, experiment, sampler, pruner, direction)
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
    if study.direction.name.lower() != direction:
        raise ValueError('the study {!r} in the storage is to {}, but val_score_mode={!r} '
                         'asks to {}'.format(experiment.name, study.direction.name.lower(),
                                             experiment.val_score_mode, direction))
    return study


def _retry_seconds():
    return sum(0.5 * (attempt + 1) for attempt in range(OPEN_ATTEMPTS - 1))


def study_id(study):
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


def worker():
    """What a trial records of the process running it."""
    return {'host': socket.gethostname(), 'pid': os.getpid(), 'started': _start_time(
        os.getpid())}


def _start_time(pid):
    """When process ``pid`` started (clock ticks since boot, Linux), or None: with the pid,
    it tells a process from a later one given the same pid."""
    try:
        with open('/proc/{}/stat'.format(pid)) as stream:
            return int(stream.read().rsplit(')', 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _dead(worker):
    """Whether the process recorded in a trial's ``worker`` attribute is gone (this host)."""
    if not (isinstance(worker, dict) and worker.get('host') == socket.gethostname()
            and isinstance(worker.get('pid'), int) and not isinstance(worker['pid'], bool)):
        return False
    try:
        os.kill(worker['pid'], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    started = worker.get('started')
    return started is not None and _start_time(worker['pid']) not in (None, started)


def fail_dead_trials(study):
    """Marks FAIL the RUNNING trials whose process, on this host, is gone (killed)."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if _dead(trial.user_attrs.get('worker')):
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
