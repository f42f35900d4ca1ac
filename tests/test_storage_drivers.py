"""researchutils._storage_drivers: a storage URL's missing driver is named at once, with what
to install. Missing drivers are made missing for real, in a fresh interpreter whose imports
of them fail (an import blocker first on ``sys.meta_path``), not by replacing the check."""
import json
import os
import subprocess
import sys

import pytest

from researchutils._storage_drivers import check_storage_driver

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sqlalchemy = pytest.importorskip('sqlalchemy')

BLOCKED_RUN = '''
import json, sys
blocked = set(sys.argv[1].split(','))

class Blocker(object):
    """Fails the import of the blocked modules (and their submodules), as if absent."""
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in blocked:
            raise ModuleNotFoundError('No module named {!r}'.format(name), name=name)
        return None

sys.meta_path.insert(0, Blocker())
from researchutils._storage_drivers import check_storage_driver
try:
    result = {'module': check_storage_driver(sys.argv[2])}
except Exception as error:
    result = {'error': type(error).__name__, 'message': str(error),
              'cause': type(error.__cause__).__name__}
print(json.dumps(result))
'''


def check_without(blocked, url):
    """check_storage_driver(url) in a fresh interpreter where ``blocked`` cannot be imported."""
    done = subprocess.run([sys.executable, '-c', BLOCKED_RUN, ','.join(blocked), url],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sqlite_needs_only_the_standard_library():
    assert check_storage_driver('sqlite:///search.db') == 'sqlite3'
    assert check_storage_driver('sqlite://') == 'sqlite3'


def test_a_plain_postgresql_url_imports_the_driver_sqlalchemy_would_use():
    pytest.importorskip('psycopg')
    url = 'postgresql://someone:secret@127.0.0.1:1/nothing'
    # SQLAlchemy's own choice, from the engine it builds (nothing connects yet).
    engine = sqlalchemy.create_engine(url)
    try:
        assert check_storage_driver(url) == engine.dialect.loaded_dbapi.__name__
    finally:
        engine.dispose()


def test_the_psycopg_form_imports_psycopg():
    pytest.importorskip('psycopg')
    assert check_storage_driver('postgresql+psycopg://u@127.0.0.1:1/db') == 'psycopg'


def test_a_missing_postgresql_driver_names_the_dialect_module_and_extra_at_once():
    default = sqlalchemy.engine.make_url('postgresql://').get_dialect().driver
    # Port 1 has no server: the error comes from the check, before any connection.
    result = check_without([default], 'postgresql://someone:secret@127.0.0.1:1/db')
    assert result['error'] == 'ImportError' and result['cause'] == 'ModuleNotFoundError'
    message = result['message']
    assert 'postgresql' in message and "driver {} cannot be imported".format(default) in message
    assert 'pip install ' in message and 'secret' not in message
    if default == 'psycopg':  # SQLAlchemy >= 2.1, which the search-db extra asks for
        assert message.endswith('pip install researchutils[search-db]')


def test_a_missing_psycopg2_says_how_to_install_it_or_use_the_extra():
    result = check_without(['psycopg2'], 'postgresql+psycopg2://u:secret@127.0.0.1:1/db')
    assert result['error'] == 'ImportError'
    assert "the postgresql dialect's driver psycopg2 cannot be imported" in result['message']
    assert 'pip install psycopg2-binary' in result['message']
    assert 'researchutils[search-db]' in result['message']
    assert 'secret' not in result['message'] and 'u:***@' in result['message']


@pytest.mark.parametrize('url, module, install', [
    ('mysql+pymysql://u:pw@127.0.0.1:1/db', 'pymysql', 'pip install PyMySQL'),
    ('mysql://u:pw@127.0.0.1:1/db', 'MySQLdb', 'pip install mysqlclient'),
    ('mysql+mysqlconnector://u:pw@127.0.0.1:1/db', 'mysql.connector',
     'pip install mysql-connector-python'),
])
def test_a_missing_mysql_driver_is_named_with_its_package(url, module, install):
    result = check_without([module.split('.')[0]], url)
    assert result['error'] == 'ImportError'
    assert "the mysql dialect's driver {} cannot be imported".format(module) in result['message']
    assert result['message'].endswith(install)


def test_without_sqlalchemy_the_search_extra_is_named():
    result = check_without(['sqlalchemy'], 'postgresql://u@127.0.0.1:1/db')
    assert result['error'] == 'ImportError'
    assert 'pip install researchutils[search]' in result['message']


def test_a_dialect_sqlalchemy_does_not_know_is_left_to_sqlalchemy():
    assert check_storage_driver('nosuchdatabase://u@host/db') is None


@pytest.mark.parametrize('url, error, message', [
    (None, TypeError, 'storage must be a database URL string, got None'),
    ('search.db', ValueError, "storage='search.db' is not a database URL"),
])
def test_what_is_not_a_url_is_refused_by_name(url, error, message):
    with pytest.raises(error, match=message):
        check_storage_driver(url)


def test_importing_the_module_imports_no_database_library():
    code = ('import sys, researchutils._storage_drivers; '
            'print(sorted(m for m in ("sqlalchemy", "psycopg", "psycopg2", "optuna") '
            'if m in sys.modules))')
    done = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == '[]'
