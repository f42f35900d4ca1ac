"""Importing a module loads only the standard library, numpy and chainer."""
import os
import subprocess
import sys

import pytest

from tests.support.import_probe import modules_loaded_after

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONAL = ('slack_sdk', 'mpi4py', 'matplotlib', 'cupy', 'chainermn', 'optuna')

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
    'researchutils.chainer.training.search_space',
    'researchutils.chainer.training.triggers',
    'researchutils.chainer.training.updaters',
    'researchutils.arrays',
    'researchutils.files',
    'researchutils.math',
    'researchutils.math.angle',
    'researchutils.math.normalization',
]


@pytest.fixture(scope='module')
def optional_modules_loaded():
    """Per light module: the optional dependencies that importing it loads beyond what
    Chainer itself does.

    ``import chainer`` imports CuPy wherever CuPy is installed (the 3.13 stack has it, with
    no GPU), so what Chainer loads on its own is the baseline. One interpreter imports
    Chainer once and imports each module in a fork of itself (tests/support/import_probe.py):
    each answer is a fresh interpreter's.
    """
    return modules_loaded_after('import chainer', LIGHT_MODULES, OPTIONAL)


@pytest.mark.parametrize('module', LIGHT_MODULES)
def test_import_loads_no_optional_dependency(optional_modules_loaded, module):
    assert optional_modules_loaded[module] == []


def test_version_is_exposed():
    import researchutils
    assert researchutils.__version__.count('.') == 2


def _import_researchutils_as_python(version):
    """Import the package's __init__ with a faked interpreter version; what it raises.

    ``-S``: the installed .pth file imports researchutils at start-up.
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


@pytest.mark.parametrize('version', [(3, 11), (3, 12), (3, 13)])
def test_every_tested_python_is_accepted(version):
    assert _import_researchutils_as_python(version) == ''


def _loaded(module, candidates, prelude=''):
    code = (
        'import sys, importlib\n{}'
        'importlib.import_module({!r})\n'
        'print(",".join(sorted(m for m in {!r} if m in sys.modules)))\n'
    ).format(prelude, module, candidates)
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    return [name for name in out.strip().split(',') if name]


@pytest.mark.parametrize('module', ['researchutils.arrays', 'researchutils.math.angle',
                                    'researchutils.math.normalization'])
def test_numpy_only_modules_import_no_chainer(module):
    assert _loaded(module, ('chainer', 'numpy')) == ['numpy']


def test_files_imports_only_the_standard_library():
    assert _loaded('researchutils.files', ('chainer', 'numpy')) == []


@pytest.mark.parametrize('module', ['researchutils.image', 'researchutils.image.viewer',
                                    'researchutils.image.converter', 'researchutils.task',
                                    'researchutils.task.plotter'])
def test_plotting_packages_import_no_chainer_and_choose_no_backend(module):
    pytest.importorskip('matplotlib')
    assert _loaded(module, ('chainer', 'matplotlib', 'matplotlib.pyplot')) == ['matplotlib']


@pytest.mark.parametrize('module', ['researchutils.image', 'researchutils.image.converter',
                                    'researchutils.task', 'researchutils.task.plotter'])
def test_plotting_packages_without_matplotlib_name_the_extra(module):
    code = ('import sys\n'
            'sys.modules["matplotlib"] = None\n'
            'try:\n'
            '    import {}\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n').format(module)
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    assert out.startswith('ImportError:')
    assert 'needs matplotlib: pip install researchutils[plot]' in out


def test_original_top_level_modules_are_attributes_of_the_package():
    # The original researchutils imported arrays and files in its __init__.
    code = ('import sys, researchutils\n'
            'print("numpy" in sys.modules, researchutils.files.file_exists("."),\n'
            '      researchutils.arrays.one_hot([0], (1, 1)).tolist())\n')
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    assert out.split() == ['False', 'True', '[[1]]']


@pytest.mark.parametrize('code', [
    'from researchutils.chainer.training.extensions import ChainerPruningExtension\n'
    'ChainerPruningExtension(None, "val/MSE", (1, "epoch"))\n',
    'from tests.chainer.training import search_tasks\n'
    'search_tasks.search_experiment(sys.argv[1]).search(*search_tasks.search_managers(), '
    'n_trials=1)\n',
])
def test_search_without_optuna_names_the_extra(code, tmp_path):
    code = ('import sys\n'
            'sys.modules["optuna"] = None\n'
            'try:\n'
            '    exec({!r})\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n').format(code)
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    assert out.startswith('ImportError:')
    assert 'needs Optuna: pip install researchutils[search]' in out
