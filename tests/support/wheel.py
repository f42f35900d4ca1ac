"""researchutils' wheel as a user installs it, built once a test session, and empty venvs.

:func:`build` runs setuptools' PEP 517 hook (``build_wheel`` or ``build_editable``) with this
environment's setuptools on a copy of the checkout that holds only what the build reads, so
nothing the tests or other builds leave in the working tree ends up in the wheel. The
``researchutils_wheel`` fixture builds the regular wheel once a session (a build starts an
interpreter and setuptools: seconds); tests/conftest.py keeps the tests that use it on one
pytest-xdist worker. Each test installs it into a venv of its own (:func:`make_venv`,
without pip, which the running interpreter's pip installs into with ``--python``), since
installing and uninstalling change the venv. Used by tests/test_chainer_compat.py (the .pth
files) and tests/test_typing.py (py.typed).
"""
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.processes import own_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What setup.py reads: itself, the README (the long description) and the two packages.
_SOURCES = ('setup.py', 'README.md')
_PACKAGES = ('researchutils', '_researchutils_chainer_compat')


def run(args, **kwargs):
    """``subprocess.run(args)`` with its output captured; asserts it succeeded. Unless told,
    its environment is this process's less ``PYTHONPATH`` and its kin: a venv sees only what
    was installed into it, never a clone on the caller's path."""
    kwargs.setdefault('env', own_env())
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def copy_source(folder):
    """A copy of what the build reads, in ``folder``/source; returns that folder."""
    source = folder / 'source'
    source.mkdir()
    for name in _SOURCES:
        shutil.copy(os.path.join(REPO, name), source / name)
    for package in _PACKAGES:
        shutil.copytree(os.path.join(REPO, package), source / package,
                        ignore=shutil.ignore_patterns('__pycache__'))
    return source


def build(hook, source, out):
    """Runs setuptools' PEP 517 ``hook`` on ``source``; returns the name of the wheel it
    wrote into ``out``."""
    code = 'import sys, setuptools.build_meta as b; print(b.{}(sys.argv[1]))'.format(hook)
    return run([sys.executable, '-c', code, str(out)], cwd=source).stdout.split()[-1]


def make_venv(folder):
    """An empty venv (no pip) in ``folder``; returns its interpreter's path."""
    run([sys.executable, '-m', 'venv', '--without-pip', str(folder)])
    return str(folder / 'bin' / 'python')


def pip_into(python, *arguments):
    """Runs this environment's pip on the venv of ``python``: ``pip install ...`` etc."""
    return run([sys.executable, '-m', 'pip', '--python', python, '-q',
                '--disable-pip-version-check'] + list(arguments))


@pytest.fixture(scope='session')
def researchutils_wheel(tmp_path_factory):
    """The path of researchutils' regular wheel, built once a session from this checkout."""
    pytest.importorskip('setuptools.build_meta', reason='builds need setuptools')
    folder = tmp_path_factory.mktemp('wheel')
    return folder / build('build_wheel', copy_source(folder), folder)
