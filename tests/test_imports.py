"""Importing a module loads only the standard library, numpy and chainer."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONAL = ('slack_sdk', 'mpi4py', 'matplotlib', 'cupy', 'chainermn')

LIGHT_MODULES = [
    'researchutils',
    'researchutils.chainer',
    'researchutils.chainer.functions',
    'researchutils.chainer.links',
    'researchutils.chainer.iterators',
    'researchutils.chainer.serializers',
    'researchutils.chainer.models',
    'researchutils.chainer.models.multi_node',
    'researchutils.chainer.data_loading',
    'researchutils.chainer.training',
    'researchutils.chainer.training.extensions',
]


def _loaded_optional_modules(module):
    code = (
        'import sys, importlib\n'
        'importlib.import_module({!r})\n'
        'print(",".join(sorted(m for m in {!r} if m in sys.modules)))\n'
    ).format(module, OPTIONAL)
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    return [name for name in out.strip().split(',') if name]


@pytest.mark.parametrize('module', LIGHT_MODULES)
def test_import_loads_no_optional_dependency(module):
    assert _loaded_optional_modules(module) == []


def test_version_is_exposed():
    import researchutils
    assert researchutils.__version__.count('.') == 2


def _import_researchutils_as_python(version):
    """Import the package's __init__ with a faked interpreter version; what it raises.

    ``-S``: on Python 3.12 the installed .pth file imports researchutils at start-up.
    """
    code = (
        'import sys\n'
        'sys.version_info = ({}, {}, 0, "final", 0)\n'
        'try:\n'
        '    import researchutils\n'
        'except ImportError as e:\n'
        '    print("ImportError:", e)\n'
    ).format(*version)
    return subprocess.run([sys.executable, '-S', '-c', code], check=True, cwd=REPO,
                          capture_output=True, text=True).stdout


def test_python_313_is_refused_with_an_explanation():
    out = _import_researchutils_as_python((3, 13))
    assert 'ImportError:' in out
    assert '3.13' in out and 'NumPy' in out


def test_python_312_is_accepted():
    assert _import_researchutils_as_python((3, 12)) == ''
