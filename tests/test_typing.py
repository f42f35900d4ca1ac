"""The package is typed for its users: the wheel ships ``py.typed`` (PEP 561), so a user's
mypy reads our annotations from an installed copy, and the strict list of pyproject.toml
covers the whole package. ``make lint`` runs mypy on the source itself.
"""
import os
import re
import subprocess
import sys
import tomllib
import zipfile

import pytest

from tests.support import wheel
from tests.support.processes import own_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A user's script: two calls that the annotations refuse, and one that they accept.
USER_SCRIPT = '''\
from researchutils.arrays import unzip
from researchutils.chainer.links import ConvLSTM
from researchutils.math.angle import fit_angle_in_rad_range

fit_angle_in_rad_range([0.5], min_angle='zero')
ConvLSTM(3, 8, ksize=3, clip_min='low')
firsts, seconds = unzip([(1, 2), (3, 4)])
reveal_type(firsts)
'''


def _mypy_config():
    with open(os.path.join(REPO, 'pyproject.toml'), 'rb') as f:
        return tomllib.load(f)['tool']['mypy']


@pytest.fixture(scope='module')
def installed_wheel(researchutils_wheel, tmp_path_factory):
    """researchutils' wheel, and a venv with it installed (no dependencies)."""
    python = wheel.make_venv(tmp_path_factory.mktemp('typed') / 'venv')
    wheel.pip_into(python, 'install', '--no-deps', '--no-index', str(researchutils_wheel))
    return researchutils_wheel, python


@pytest.mark.slow(reason='builds the wheel (once a session) and installs it into a venv')
def test_wheel_ships_the_py_typed_marker(installed_wheel):
    wheel, _ = installed_wheel
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read('researchutils/py.typed') == b''


@pytest.mark.slow(reason="runs mypy on a user's script against the installed wheel")
def test_mypy_checks_a_user_script_against_the_installed_annotations(installed_wheel,
                                                                     tmp_path):
    pytest.importorskip('mypy', reason='mypy comes with the test extra')
    _, python = installed_wheel
    (tmp_path / 'user.py').write_text(USER_SCRIPT)
    # From a folder without our pyproject.toml or sources: only the installed copy is seen.
    result = subprocess.run(
        [sys.executable, '-m', 'mypy', '--python-executable', python, '--cache-dir',
         str(tmp_path / 'cache'), '--no-error-summary', 'user.py'],
        cwd=tmp_path, env=own_env(), capture_output=True, text=True, timeout=300)
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(lines) == 3, result.stdout
    assert re.match(r'user\.py:5: error: Argument "min_angle" to "fit_angle_in_rad_range" has '
                    r'incompatible type "str"; expected "float"', lines[0]), lines[0]
    assert re.match(r'user\.py:6: error: Argument "clip_min" to "ConvLSTM" has incompatible '
                    r'type "str"; expected "float \| None"', lines[1]), lines[1]
    assert re.match(r'user\.py:8: note: Revealed type is '
                    r'"(builtins\.)?tuple\[(builtins\.)?int, \.\.\.\]"', lines[2]), lines[2]


def test_every_module_of_the_package_is_strictly_checked():
    """One strict block covers the whole package, so a new module is typed from its start,
    and no block lets mypy ignore a module's errors."""
    overrides = _mypy_config()['overrides']
    strict = [override for override in overrides if override.get('disallow_untyped_defs')]
    assert len(strict) == 1
    assert strict[0]['module'] == ['researchutils', 'researchutils.*']
    for option in ('disallow_incomplete_defs', 'check_untyped_defs', 'disallow_any_generics',
                   'disallow_untyped_calls'):
        assert strict[0][option] is True, option
    assert not [override for override in overrides if override.get('ignore_errors')]
    assert 'untyped_calls_exclude' not in _mypy_config()
