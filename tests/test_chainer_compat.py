"""The .pth line and the finder of _researchutils_chainer_compat: installed once, silent
when the package is gone, scoped to Chainer (code that does not use Chainer sees no
difference), and safe under reload. Each case runs a fresh interpreter of this environment.
The patches themselves are tested in tests/test_chainer_compat_patches.py.
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
PTH_NAME = 'researchutils_chainer_compat.pth'
PTH_LINE = ("import importlib.util as u; u.find_spec('_researchutils_chainer_compat') and "
            "__import__('_researchutils_chainer_compat')\n")
OLD_PTH_NAME = 'researchutils_py312_compat.pth'
OLD_PTH_LINE = ("import sys; sys.version_info[:2] == (3, 12) and "
                "__import__('researchutils._py312_compat')\n")
PURELIB = sysconfig.get_path('purelib')


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    assert result.returncode == 0, result.stderr
    return result


def _python(code, *args, cwd='/'):
    return _run([sys.executable, *args, '-c', textwrap.dedent(code)], cwd=cwd)


def _finders(code=''):
    return textwrap.dedent(code) + (
        '\nprint(sum(getattr(f, "_researchutils_chainer_compat", False) '
        'for f in sys.meta_path))\n')


def test_interpreter_start_installs_one_finder_importing_neither_numpy_nor_researchutils():
    result = _python(_finders('import sys\n'
                              'print("numpy" in sys.modules, "researchutils" in sys.modules)'))
    assert result.stdout.split() == ['False', 'False', '1']
    assert result.stderr == ''


def test_a_checkout_of_researchutils_on_the_path_is_the_one_imported(tmp_path):
    checkout = tmp_path / 'researchutils'
    checkout.mkdir()
    (checkout / '__init__.py').write_text('__version__ = "checkout"\n')
    code = 'import researchutils, chainer\nprint(researchutils.__version__)'
    assert _python(code, cwd=str(tmp_path)).stdout.split() == ['checkout']


def test_import_chainer_adds_no_name_to_numpy_and_no_module_elsewhere():
    code = '''
        import importlib.util, inspect, sys
        import numpy
        before = set(vars(numpy))
        had = {name: importlib.util.find_spec(name) is not None
               for name in ('pkg_resources', 'numpy.distutils')}
        import chainer, chainer.functions, chainer.testing
        added = sorted(k for k in set(vars(numpy)) - before
                       if not inspect.ismodule(getattr(numpy, k)))
        print(added, [name for name, found in had.items() if not found and name in sys.modules])
    '''
    assert _python(code).stdout.split() == ['[]', '[]']


def test_code_that_never_uses_chainer_sees_the_stack_as_without_researchutils():
    probe = '''
        import importlib.util, sys
        import numpy
        print(hasattr(numpy, 'sctypes'), hasattr(numpy, 'float'),
              importlib.util.find_spec('pkg_resources') is not None,
              importlib.util.find_spec('numpy.distutils') is not None)
    '''
    with_pth = _python(probe).stdout
    # -S: no site module, so no .pth runs; the same site-packages put on sys.path by hand.
    without = _python('import sys; sys.path.append({!r})\n'.format(PURELIB) +
                      textwrap.dedent(probe), '-S').stdout
    assert with_pth == without


def test_reload_keeps_one_finder_and_chainer_still_imports():
    code = _finders('''
        import importlib, sys
        import _researchutils_chainer_compat as compat
        stale = compat.ChainerCompatFinder()       # a finder of the copy before the reload
        sys.meta_path.append(stale)
        importlib.reload(compat)
        importlib.reload(compat)
        import chainer.functions as F, numpy
        print(stale in sys.meta_path, F.fix(numpy.array([-1.5])).array[0])
    ''')
    assert _python(code).stdout.split() == ['False', '-1.0', '1']


def _site_dir_with(tmp_path, name, line):
    site = tmp_path / 'site'
    site.mkdir()
    (site / name).write_text(line)
    return site


def test_our_pth_line_left_without_the_package_is_silent(tmp_path):
    site = _site_dir_with(tmp_path, PTH_NAME, PTH_LINE)
    # -I -S: no site-packages, so no researchutils; then the leftover line, as site runs it.
    result = _python(_finders('import site, sys\nsite.addsitedir({!r})'.format(str(site))),
                     '-I', '-S')
    assert result.stdout.split() == ['0'] and result.stderr == ''


def test_the_old_pth_line_beside_a_new_install_changes_nothing(tmp_path):
    site = _site_dir_with(tmp_path, OLD_PTH_NAME, OLD_PTH_LINE)
    code = _finders('''
        import site, sys
        site.addsitedir({!r})
        import chainer
    '''.format(str(site)))
    result = _python(code)
    assert result.stdout.split() == ['1'] and 'Error processing' not in result.stderr


def test_pth_files_are_installed_with_the_package():
    with open(os.path.join(PURELIB, PTH_NAME), encoding='utf-8') as f:
        assert f.read() == PTH_LINE
    with open(os.path.join(PURELIB, OLD_PTH_NAME), encoding='utf-8') as f:
        assert not f.read().strip().startswith('import')     # a comment: runs nothing
    installed, = importlib.metadata.distributions(name='researchutils', path=[PURELIB])
    files = [str(f) for f in installed.files]
    assert PTH_NAME in files and OLD_PTH_NAME in files      # so that uninstalling removes them


def _copy_source(tmp_path):
    source = tmp_path / 'source'
    source.mkdir()
    for name in ('setup.py', 'README.md'):
        shutil.copy(os.path.join(REPO, name), source / name)
    shutil.copytree(os.path.join(REPO, 'researchutils'), source / 'researchutils',
                    ignore=shutil.ignore_patterns('__pycache__'))
    return source


def _build(hook, source, out):
    code = 'import sys, setuptools.build_meta as b; print(b.{}(sys.argv[1]))'.format(hook)
    return _run([sys.executable, '-c', code, str(out)], cwd=source).stdout.split()[-1]


@pytest.mark.slow
@pytest.mark.parametrize('hook', ['build_wheel', 'build_editable'])
def test_wheel_has_the_pth_files_at_its_root(hook, tmp_path):
    pytest.importorskip('setuptools.build_meta', reason='builds need setuptools')
    name = _build(hook, _copy_source(tmp_path), tmp_path)
    with zipfile.ZipFile(tmp_path / name) as wheel:
        assert wheel.read(PTH_NAME).decode('utf-8') == PTH_LINE
        assert wheel.read(OLD_PTH_NAME).decode('utf-8').startswith('#')
        record = wheel.read(next(n for n in wheel.namelist() if n.endswith('.dist-info/RECORD')))
    assert PTH_NAME + ',' in record.decode('utf-8')


@pytest.mark.slow
def test_pip_install_replaces_a_leftover_old_pth_and_uninstall_removes_both(tmp_path):
    pytest.importorskip('setuptools.build_meta', reason='builds need setuptools')
    name = _build('build_wheel', _copy_source(tmp_path), tmp_path)
    venv = tmp_path / 'venv'
    _run([sys.executable, '-m', 'venv', '--without-pip', str(venv)])
    python = str(venv / 'bin' / 'python')
    purelib = _run([python, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'])
    purelib = purelib.stdout.strip()
    with open(os.path.join(purelib, OLD_PTH_NAME), 'w') as f:     # left by a deleted checkout
        f.write(OLD_PTH_LINE)
    pip = [sys.executable, '-m', 'pip', '--python', python, '-q', '--disable-pip-version-check']
    _run(pip + ['install', '--no-deps', '--no-index', str(tmp_path / name)])
    assert os.path.isfile(os.path.join(purelib, PTH_NAME))
    with open(os.path.join(purelib, OLD_PTH_NAME)) as f:
        assert f.read().startswith('#')
    assert _run([python, '-c', 'pass']).stderr == ''
    _run(pip + ['uninstall', '-y', 'researchutils'])
    assert not os.path.exists(os.path.join(purelib, PTH_NAME))
    assert not os.path.exists(os.path.join(purelib, OLD_PTH_NAME))
