"""Importing a module loads only the standard library, numpy and chainer."""
import subprocess
import sys

import pytest

OPTIONAL = ('slack_sdk', 'mpi4py', 'matplotlib', 'cupy', 'chainermn')

LIGHT_MODULES = [
    'researchutils',
    'researchutils.chainer',
    'researchutils.chainer.functions',
    'researchutils.chainer.links',
    'researchutils.chainer.initializers',
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


def test_python_312_is_refused_with_an_explanation(tmp_path):
    # Load the package's __init__ with a faked interpreter version.
    code = (
        'import sys\n'
        'sys.version_info = (3, 12, 0, "final", 0)\n'
        'try:\n'
        '    import researchutils\n'
        'except ImportError as e:\n'
        '    print("ImportError:", e)\n'
    )
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    assert 'ImportError:' in out
    assert '3.12' in out and 'numpy.distutils' in out
