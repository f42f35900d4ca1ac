"""Whether the database driver of an Optuna storage URL is installed (private).

Optuna's RDBStorage hands the URL to SQLAlchemy, which reads the driver from the scheme
(``dialect+driver://``) or, with no ``+driver``, takes the dialect's default, and imports
that driver only when it builds the engine: a missing one surfaces as a
ModuleNotFoundError from inside SQLAlchemy naming a module the user never chose (a plain
``postgresql://`` names psycopg2 or psycopg, depending on the SQLAlchemy version), with no
word of what to install. :func:`check_storage_driver` imports the driver first, connecting to
nothing, and raises an ImportError that names the URL's dialect, the missing module and
what to install (the ``search-db`` extra for PostgreSQL).

Which driver a dialect defaults to is asked of the installed SQLAlchemy, not written here:
SQLAlchemy 2.1 moved ``postgresql://`` from psycopg2 to psycopg (3). Importing this module
imports nothing; SQLAlchemy (which comes with Optuna) is imported when a URL is checked.
The password of a URL never appears in a message. Tested by tests/test_storage_drivers.py.
"""
import importlib

SEARCH_EXTRA = 'pip install researchutils[search]'
DB_EXTRA = 'pip install researchutils[search-db]'

# SQLAlchemy's name of a driver: the module it imports, and what installs that module.
# A driver not listed is taken to be a module of its own name.
_DRIVERS = {
    'psycopg': ('psycopg', DB_EXTRA),
    'psycopg2': ('psycopg2', 'pip install psycopg2-binary (or write postgresql+psycopg:// '
                             'and {})'.format(DB_EXTRA)),
    'pg8000': ('pg8000', 'pip install pg8000'),
    'mysqldb': ('MySQLdb', 'pip install mysqlclient'),
    'pymysql': ('pymysql', 'pip install PyMySQL'),
    'mysqlconnector': ('mysql.connector', 'pip install mysql-connector-python'),
    'mariadbconnector': ('mariadb', 'pip install mariadb'),
    'pysqlite': ('sqlite3', 'a Python built with SQLite (the standard library\'s sqlite3)'),
}


def check_storage_driver(url: str) -> str | None:
    """Imports the database driver that SQLAlchemy will use for ``url``.

    Args:
        url (str): An SQLAlchemy database URL, as Optuna's RDBStorage takes
            (``"postgresql://user:password@host:port/database"``,
            ``"mysql+pymysql://..."``, ``"sqlite:///search.db"``).

    Returns:
        str: The driver module imported (``"psycopg"``, ``"sqlite3"``...), or
        None for a dialect SQLAlchemy does not know (its own error follows when
        the storage opens).

    Raises:
        TypeError: ``url`` is not a string.
        ValueError: ``url`` is not a database URL (no ``scheme://``).
        ImportError: SQLAlchemy is missing (the ``search`` extra), or the
            driver is; the message names the dialect, the module and what to
            install, the original error being its cause.

    Example:
        >>> check_storage_driver('sqlite:///search.db')
        'sqlite3'
    """
    if not isinstance(url, str):
        raise TypeError('storage must be a database URL string, got {!r}'.format(url))
    if '://' not in url:
        raise ValueError('storage={!r} is not a database URL (dialect[+driver]://...), as '
                         '"sqlite:///search.db" or "postgresql://user@host/db"'.format(url))
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import NoSuchModuleError
    except ImportError as error:
        raise ImportError('a storage URL needs SQLAlchemy, which comes with Optuna: '
                          '{}'.format(SEARCH_EXTRA)) from error
    parsed = make_url(url)
    try:
        driver = parsed.get_dialect().driver
    except NoSuchModuleError:
        return None
    module, install = _DRIVERS.get(driver, (driver, 'pip install ' + driver))
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise ImportError('storage {}: the {} dialect\'s driver {} cannot be imported ({}): '
                          '{}'.format(parsed.render_as_string(hide_password=True),
                                      parsed.get_backend_name(), module, error, install)
                          ) from error
    return module
