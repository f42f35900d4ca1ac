"""The .pth line and the finder of _researchutils_chainer_compat: installed once, silent
when the package is gone, scoped to Chainer (code that does not use Chainer, and another
thread while Chainer loads, see no difference), safe under reload and after a failing
finder, installed by `import researchutils` where no .pth runs, and off with the switch.
Each case runs a fresh interpreter of this environment, with this checkout first on its
path. The patches are tested in tests/test_chainer_compat_patches.py.
"""
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

from tests.support import wheel
from tests.support.processes import checkout_env, own_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTH_NAME = 'researchutils_chainer_compat.pth'
PTH_LINE = ("import importlib.util as u; u.find_spec('_researchutils_chainer_compat') and "
            "__import__('_researchutils_chainer_compat')\n")
OLD_PTH_NAME = 'researchutils_py312_compat.pth'
OLD_PTH_LINE = ("import sys; sys.version_info[:2] == (3, 12) and "
                "__import__('researchutils._py312_compat')\n")
PURELIB = sysconfig.get_path('purelib')


NUMPY_2 = int(importlib.metadata.version('numpy').split('.')[0]) >= 2


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    assert result.returncode == 0, result.stderr
    return result


def _python(code, *args, cwd='/', env=None):
    return _run([sys.executable, *args, '-c', textwrap.dedent(code)], cwd=cwd,
                env=checkout_env(env))


def _python_without_site(code, env=None):
    """``python -S`` (no .pth runs) with this checkout and the installed packages on its path,
    as an embedded interpreter or a PYTHONPATH into another environment leaves it."""
    return _python('import sys\nsys.path[:0] = [{!r}, {!r}]\n'.format(REPO, PURELIB) +
                   textwrap.dedent(code), '-S', env=env)


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


# A finder behind ours (ours asks it, the file system comes after) that hides pkg_resources,
# as setuptools >= 81 does, and runs a module's code only once another thread has looked.
PAUSING_FINDER = '''
import importlib.machinery, sys, threading
loading, observed = threading.Event(), threading.Event()


class Paused:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        loading.set()
        if not observed.wait(60):
            raise TimeoutError('the observing thread did not look within 60 s')
        self.loader.exec_module(module)


class PausingFinder:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'pkg_resources':
            raise ModuleNotFoundError('No module named ' + repr(name), name=name)
        if name != PAUSED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Paused(spec.loader)
        return spec


sys.meta_path.insert(1, PausingFinder())
seen = []


def observe(look):
    if loading.wait(60):
        seen.append(look())
    observed.set()
'''


def _observed_while_loading(module, look, then):
    """What ``look`` returns in a thread while ``module``'s own code is about to run, and
    what ``then`` returns once it has run (both printed by a fresh interpreter)."""
    code = PAUSING_FINDER + textwrap.dedent('''
        PAUSED = {!r}
        {}
        thread = threading.Thread(target=observe, args=(look,), daemon=True)
        thread.start()
        import {}
        thread.join()
        print(seen, then())
    ''').format(module, textwrap.dedent(look + then), module)
    return _python(code).stdout.strip()


def test_a_thread_importing_pkg_resources_while_chainer_testing_loads_never_gets_the_stand_in():
    look = '''
        def look():
            held = sys.modules.get('pkg_resources')
            try:
                import pkg_resources
            except ImportError as error:
                return held, type(error).__name__
            return held, pkg_resources.__doc__
    '''
    then = '''
        def then():                      # the stand-in went to Chainer's module all the same
            return sys.modules['chainer.testing.helper'].pkg_resources.__doc__[:8]
    '''
    assert _observed_while_loading('chainer.testing.helper', look, then) == \
        "[(None, 'ModuleNotFoundError')] Stand-in"


@pytest.mark.skipif(not NUMPY_2, reason='NumPy 1.26 has sctypes: nothing is supplied')
def test_a_thread_reading_numpy_while_as_strided_loads_never_sees_sctypes():
    look = '''
        def look():
            import numpy
            return 'sctypes' in vars(numpy)
    '''
    then = '''
        def then():
            from chainer.functions.array import as_strided
            import numpy
            return sorted(as_strided.index_dtype), 'sctypes' in vars(numpy)
    '''
    assert _observed_while_loading('chainer.functions.array.as_strided', look, then) == \
        '[False] ([1, 2, 4, 8], False)'


def test_a_finder_that_raises_leaves_ours_working_for_the_next_import():
    code = _finders('''
        import sys

        class RaisesOnce:
            raised = False

            def find_spec(self, name, path=None, target=None):
                if name == 'chainer.testing.helper' and not self.raised:
                    self.raised = True
                    raise RuntimeError('finder failed')
                return None

        sys.meta_path.insert(1, RaisesOnce())      # ours asks it before the file system
        import chainer
        try:
            import chainer.testing
        except RuntimeError as error:
            print(error)
        import chainer.testing
        loader = sys.modules['chainer.testing.helper'].__loader__
        print(type(loader).__name__)
    ''')
    assert _python(code).stdout.split('\n')[:3] == ['finder failed', '_PatchingLoader', '1']


def test_import_researchutils_installs_the_finder_where_no_pth_ran():
    code = _finders('''
        print(any(getattr(f, '_researchutils_chainer_compat', False) for f in sys.meta_path))
        import researchutils.chainer.functions
        import chainer.functions as F, numpy
        y = F.resize_images(numpy.ones((1, 1, 2, 2), numpy.float32), (3, 3))
        print(researchutils.__file__.startswith({!r}), y.shape)
    '''.format(REPO))
    result = _python_without_site(code)
    assert result.stdout.split('\n')[:3] == ['False', 'True (1, 1, 3, 3)', '1']
    assert 'researchutils' not in result.stderr


def test_chainer_imported_before_researchutils_without_the_finder_is_named_in_a_warning():
    # On NumPy 2 `import chainer` fails without the finder, leaving some of its modules
    # loaded; on NumPy 1.26 it succeeds. Either way they were loaded unpatched.
    code = '''
        import warnings
        try:
            import chainer
        except (ImportError, AttributeError):
            pass
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import researchutils
        for warning in caught:
            print(warning.category.__name__, warning.message)
    '''
    out = _python_without_site(code).stdout
    assert out.startswith('RuntimeWarning Chainer was imported before researchutils')
    assert 'chainer.variable' in out and 'chainer.dataset.convert' in out
    assert 'Import researchutils (or _researchutils_chainer_compat) before chainer' in out


@pytest.mark.parametrize('with_researchutils', [False, True])
def test_the_switch_leaves_the_finder_out(with_researchutils):
    code = _finders('''
        import sys
        {}
        try:
            import chainer.functions as F, numpy
            F.resize_images(numpy.ones((1, 1, 2, 2), numpy.float32), (3, 3))
            print('chainer runs')
        except (ImportError, AttributeError) as error:
            print('chainer as it is:', type(error).__name__)
    '''.format('import researchutils' if with_researchutils else ''))
    off = _python(code, env={**os.environ, 'RESEARCHUTILS_CHAINER_COMPAT': '0'}).stdout
    # Chainer as it is: np.sctypes is gone on NumPy 2, numpy.float on NumPy >= 1.24.
    assert off.split('\n')[:2] == ['chainer as it is: AttributeError', '0']
    on = _python(code, env={**os.environ, 'RESEARCHUTILS_CHAINER_COMPAT': '1'}).stdout
    assert on.split('\n')[:2] == ['chainer runs', '1']


def test_an_unknown_switch_value_warns_and_keeps_the_finder():
    result = _python(_finders('import sys'),
                     env={**os.environ, 'RESEARCHUTILS_CHAINER_COMPAT': 'no'})
    assert result.stdout.split() == ['1']
    assert "RESEARCHUTILS_CHAINER_COMPAT='no': expected 0 (finder off) or 1" in result.stderr


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


def _assert_pth_files_at_the_root(wheel_path, regular):
    with zipfile.ZipFile(wheel_path) as archive:
        assert archive.read(PTH_NAME).decode('utf-8') == PTH_LINE
        assert archive.read(OLD_PTH_NAME).decode('utf-8').startswith('#')
        packed = set(archive.namelist())
        record = archive.read(next(n for n in packed if n.endswith('.dist-info/RECORD')))
    assert PTH_NAME + ',' in record.decode('utf-8')
    if regular:                         # an editable wheel points at the source instead
        compat = os.path.join(REPO, '_researchutils_chainer_compat')
        assert {'_researchutils_chainer_compat/' + name for name in os.listdir(compat)
                if name.endswith('.py')} <= packed


@pytest.mark.slow(reason='builds a wheel (once a session, shared with the install tests)')
def test_wheel_has_the_pth_files_at_its_root(researchutils_wheel):
    _assert_pth_files_at_the_root(researchutils_wheel, regular=True)


@pytest.mark.slow(reason='builds an editable wheel with setuptools')
def test_editable_wheel_has_the_pth_files_at_its_root(tmp_path):
    pytest.importorskip('setuptools.build_meta', reason='builds need setuptools')
    name = wheel.build('build_editable', wheel.copy_source(tmp_path), tmp_path)
    _assert_pth_files_at_the_root(tmp_path / name, regular=False)


@pytest.mark.slow(reason='makes a venv and installs and uninstalls the wheel with pip')
def test_pip_install_replaces_a_leftover_old_pth_and_uninstall_removes_both(
        researchutils_wheel, tmp_path):
    python = wheel.make_venv(tmp_path / 'venv')
    purelib = _run([python, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
                   env=own_env())
    purelib = purelib.stdout.strip()
    with open(os.path.join(purelib, OLD_PTH_NAME), 'w') as f:     # left by a deleted checkout
        f.write(OLD_PTH_LINE)
    wheel.pip_into(python, 'install', '--no-deps', '--no-index', str(researchutils_wheel))
    assert os.path.isfile(os.path.join(purelib, PTH_NAME))
    with open(os.path.join(purelib, OLD_PTH_NAME)) as f:
        assert f.read().startswith('#')
    assert _run([python, '-c', 'pass'], env=own_env()).stderr == ''  # the .pth ran, silently
    finders = _finders('import sys')
    assert _run([python, '-c', finders], env=own_env()).stdout.split() == ['1']
    wheel.pip_into(python, 'uninstall', '-y', 'researchutils')
    assert not os.path.exists(os.path.join(purelib, PTH_NAME))
    assert not os.path.exists(os.path.join(purelib, OLD_PTH_NAME))
