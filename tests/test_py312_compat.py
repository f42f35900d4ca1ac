"""Python 3.12: the installed .pth and its numpy.distutils finder (researchutils/_py312_compat.py).

The finder tests run a fresh interpreter with ``-I -S`` (no site-packages, no .pth files) and a
``sys.path`` of the repository plus, where a test needs one, a small ``numpy`` package written
to disk, so each case has exactly the NumPy it names.
"""
import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTH_NAME = 'researchutils_py312_compat.pth'
PTH_LINE = ("import sys; sys.version_info[:2] == (3, 12) and "
            "__import__('researchutils._py312_compat')\n")
ON_312 = sys.version_info[:2] == (3, 12)


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    assert result.returncode == 0, result.stderr
    return result


def _run_isolated(code, *path):
    """Run ``code`` with no site-packages and ``path`` (then the repository) on sys.path."""
    prelude = 'import sys\nsys.path[:0] = {!r}\n'.format([str(p) for p in path] + [REPO])
    return _run([sys.executable, '-I', '-S', '-c', prelude + textwrap.dedent(code)]).stdout


def _write_numpy(root, with_distutils):
    """A ``numpy`` package on disk, with or without a real ``numpy.distutils``."""
    package = root / 'numpy'
    package.mkdir()
    (package / '__init__.py').write_text('')
    if with_distutils:
        (package / 'distutils').mkdir()
        (package / 'distutils' / '__init__.py').write_text('')
        (package / 'distutils' / 'system_info.py').write_text(
            'def get_info(name, notfound_action=0):\n    return {"from": "disk"}\n')
    return root


def test_finder_supplies_system_info_when_numpy_has_no_distutils(tmp_path):
    out = _run_isolated('''
        import researchutils._py312_compat as compat
        compat.install()
        import numpy.distutils.system_info as system_info
        print(system_info.get_info('blas_opt'), system_info.__spec__.loader.__name__)
    ''', _write_numpy(tmp_path, with_distutils=False))
    assert out.split() == ['{}', '_StandInLoader']


def test_finder_defers_to_a_real_numpy_distutils_even_when_first(tmp_path):
    out = _run_isolated('''
        import researchutils._py312_compat as compat
        sys.meta_path.insert(0, compat._NumpyDistutilsFinder())
        import numpy.distutils.system_info as system_info
        print(system_info.get_info('blas_opt'), system_info.__file__)
    ''', _write_numpy(tmp_path, with_distutils=True))
    assert out.split() == ["{'from':", "'disk'}",
                           str(tmp_path / 'numpy' / 'distutils' / 'system_info.py')]


def test_finder_does_nothing_without_numpy():
    out = _run_isolated('''
        import researchutils._py312_compat as compat
        compat.install()
        print(compat._NumpyDistutilsFinder().find_spec('numpy.distutils', None))
        try:
            import numpy.distutils.system_info
        except ModuleNotFoundError as e:
            print(e.name)
    ''')
    assert out.split() == ['None', 'numpy']


def test_finder_answers_for_no_other_module(tmp_path):
    out = _run_isolated('''
        import researchutils._py312_compat as compat
        compat.install()
        import numpy
        try:
            import numpy.distutils.ccompiler
        except ModuleNotFoundError as e:
            print(e.name)
    ''', _write_numpy(tmp_path, with_distutils=False))
    assert out.split() == ['numpy.distutils.ccompiler']


@pytest.mark.skipif(ON_312, reason='NumPy for Python 3.12 ships no numpy.distutils')
def test_real_numpy_distutils_is_imported_with_the_finder_installed():
    code = textwrap.dedent('''
        import researchutils._py312_compat as compat
        compat.install()
        import numpy, numpy.distutils.system_info as system_info
        print(system_info.__file__.startswith(numpy.__path__[0]),
              hasattr(system_info, 'system_info'))
    ''')
    assert _run([sys.executable, '-c', code], cwd=REPO).stdout.split() == ['True', 'True']


def test_fresh_interpreter_imports_chainer_first():
    code = ('import chainer, sys\n'
            'print(sys.modules["numpy.distutils.system_info"].__spec__.loader.__module__)\n')
    result = _run([sys.executable, '-c', code], cwd='/')
    expected = 'researchutils._py312_compat' if ON_312 else '_frozen_importlib_external'
    assert result.stdout.split() == [expected]
    assert 'Traceback' not in result.stderr and 'Error processing' not in result.stderr


def test_interpreter_start_registers_the_finder_only_on_312_without_importing_numpy():
    code = ('import sys\n'
            'print("numpy" in sys.modules, '
            'any(type(f).__name__ == "_NumpyDistutilsFinder" for f in sys.meta_path))\n')
    out = _run([sys.executable, '-c', code], cwd='/').stdout
    assert out.split() == ['False', str(ON_312)]


def test_pth_file_is_installed_with_the_package():
    purelib = sysconfig.get_path('purelib')
    with open(os.path.join(purelib, PTH_NAME), encoding='utf-8') as f:
        assert f.read() == PTH_LINE
    installed, = importlib.metadata.distributions(name='researchutils', path=[purelib])
    assert PTH_NAME in [str(f) for f in installed.files]   # so that uninstalling removes it


def _copy_source(tmp_path):
    source = tmp_path / 'source'
    source.mkdir()
    for name in ('setup.py', 'README.md'):
        shutil.copy(os.path.join(REPO, name), source / name)
    shutil.copytree(os.path.join(REPO, 'researchutils'), source / 'researchutils',
                    ignore=shutil.ignore_patterns('__pycache__'))
    return source


@pytest.mark.slow
@pytest.mark.parametrize('hook', ['build_wheel', 'build_editable'])
def test_wheel_has_the_pth_file_at_its_root(hook, tmp_path):
    source = _copy_source(tmp_path)
    code = 'import sys, setuptools.build_meta as b; print(b.{}(sys.argv[1]))'.format(hook)
    name = _run([sys.executable, '-c', code, str(tmp_path)], cwd=source).stdout.split()[-1]
    with zipfile.ZipFile(tmp_path / name) as wheel:
        assert wheel.read(PTH_NAME).decode('utf-8') == PTH_LINE
        record = wheel.read(next(n for n in wheel.namelist() if n.endswith('.dist-info/RECORD')))
    assert PTH_NAME + ',' in record.decode('utf-8')     # so that uninstalling removes it


@pytest.mark.slow
def test_pip_install_puts_the_pth_in_site_packages_and_uninstall_removes_it(tmp_path):
    source = _copy_source(tmp_path)
    code = 'import sys, setuptools.build_meta as b; print(b.build_wheel(sys.argv[1]))'
    name = _run([sys.executable, '-c', code, str(tmp_path)], cwd=source).stdout.split()[-1]
    venv = tmp_path / 'venv'
    _run([sys.executable, '-m', 'venv', '--without-pip', str(venv)])
    python = str(venv / 'bin' / 'python')
    pip = [sys.executable, '-m', 'pip', '--python', python, '-q', '--disable-pip-version-check']
    _run(pip + ['install', '--no-deps', '--no-index', str(tmp_path / name)])
    purelib = _run([python, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'])
    installed = os.path.join(purelib.stdout.strip(), PTH_NAME)
    assert os.path.isfile(installed)
    _run(pip + ['uninstall', '-y', 'researchutils'])
    assert not os.path.exists(installed)
