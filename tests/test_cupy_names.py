"""Every ``cupy`` / ``cupyx`` name that researchutils and its Chainer GPU paths use exists.

The names are read from the source by ``tests/support/cupy_names.py`` (researchutils, its
tests and benchmarks, and the Chainer files they reach: ``F.lstm``, ``F.clip``, the
convolutions, ``cuda.elementwise``, ``to_gpu`` / ``to_cpu``, memory pool, streams, devices).
``python -m tests.support.cupy_names`` prints the table of names and their users.

Runs where CuPy imports (``cupy-cuda12x`` 14 on a CPU-only machine is enough: no name check
needs a GPU); skipped elsewhere. A name whose CUDA library is missing on this machine
(``cupyx.scipy.linalg`` needs cuBLAS) counts as present: the module is there, the library
comes with the GPU machine's CUDA.
"""
import importlib
import importlib.util
import inspect
import re

import pytest

cupy = pytest.importorskip('cupy')

from tests.support import cupy_names  # noqa: E402

# What CuPy 14 no longer has, although Chainer 7.8.1 names it, and why Chainer runs without
# it. Each entry covers the name and everything under it.
ABSENT_IN_CUPY_14 = {
    'cupy.util': 'renamed cupy._util in CuPy 9; chainer/backends/cuda.py imports '
                 'PerformanceWarning from cupy._util first and from cupy.util only if that '
                 'fails',
    'cupy.cudnn': 'CuPy 14 dropped its cuDNN bindings; chainer/backends/cuda.py then sets '
                  'cudnn_enabled = False, every cuDNN use is behind it or behind '
                  'should_use_cudnn, which answers False, and each function takes its '
                  'non-cuDNN GPU path',
    'cupy.cuda.cudnn': 'the low-level half of the same cuDNN bindings (Chainer binds it as '
                       'chainer.backends.cuda.libcudnn); same guard',
}

_NAMES = cupy_names.collect()
_USES = _NAMES.uses


def _absent_entry(name):
    for prefix in ABSENT_IN_CUPY_14:
        if name == prefix or name.startswith(prefix + '.'):
            return prefix
    return None


def _lookup(name):
    """'present', 'absent', or 'present (library not loadable here: ...)'."""
    parts = name.split('.')
    obj = importlib.import_module(parts[0])
    for end in range(2, len(parts) + 1):
        attr, prefix = parts[end - 1], '.'.join(parts[:end])
        try:
            obj = getattr(obj, attr)
            continue
        except ImportError as error:    # a lazily loaded submodule whose library is missing
            return 'present (library not loadable here: {})'.format(error)
        except AttributeError:
            pass
        try:
            spec = importlib.util.find_spec(prefix)
        except ImportError:
            spec = None
        if spec is None:
            return 'absent'
        try:
            obj = importlib.import_module(prefix)
        except ImportError as error:
            return 'present (library not loadable here: {})'.format(error)
    return 'present'


@pytest.mark.parametrize('name', sorted(n for n in _USES if _absent_entry(n) is None))
def test_name_exists_in_this_cupy(name):
    found = _lookup(name)
    assert found.startswith('present'), '{} is absent from CuPy {}; used by {}'.format(
        name, cupy.__version__, '; '.join(_USES[name]))


@pytest.mark.parametrize('prefix', sorted(ABSENT_IN_CUPY_14))
def test_each_name_listed_as_absent_is_absent_and_still_used(prefix):
    # A stale entry (CuPy brought the name back, or Chainer no longer uses it) must go.
    assert any(name == prefix or name.startswith(prefix + '.') for name in _USES), prefix
    if int(cupy.__version__.split('.')[0]) >= 14:
        assert _lookup(prefix) == 'absent', prefix


def test_chainer_runs_without_the_cudnn_bindings_when_cupy_lacks_them():
    import chainer
    from chainer.backends import cuda
    if _lookup('cupy.cudnn') != 'absent':
        pytest.skip('this CuPy still has cupy.cudnn')
    assert cuda.cudnn_enabled is False
    for level in ('==always', '>=auto'):
        with chainer.using_config('use_cudnn', 'always'):
            assert chainer.should_use_cudnn(level) is False


def test_chainer_reads_performance_warning_from_cupy_util_module_of_today():
    from chainer.backends import cuda
    assert _lookup('cupy._util.PerformanceWarning') == 'present'
    if cuda.available:
        assert cuda._PerformanceWarning is cupy._util.PerformanceWarning


def _resolve(name):
    obj = importlib.import_module(name.split('.')[0])
    for attr in name.split('.')[1:]:
        obj = getattr(obj, attr)
    return obj


def _parameters(name):
    """The keyword names a CuPy callable accepts; 'any' for ``**kwargs``; None if unreadable."""
    obj = _resolve(name)
    if isinstance(obj, cupy.ufunc):
        # A ufunc has no inspectable signature; its docstring opens with the one it takes:
        # "exp(x, /, out=None, *, casting='same_kind', dtype=None)".
        return set(re.findall(r'(\w+)=', (obj.__doc__ or '').split('\n', 1)[0])) or None
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):     # a builtin or Cython callable without a signature
        return None
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return 'any'
    return {p.name for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


@pytest.mark.parametrize('name', sorted(n for n in _NAMES.keywords if _absent_entry(n) is None))
def test_keyword_arguments_chainer_passes_are_still_accepted(name):
    if not _lookup(name).startswith('present') or not callable(_resolve(name)):
        pytest.skip('{} is not a callable here'.format(name))
    accepted = _parameters(name)
    if accepted is None:
        pytest.skip('{} has no readable signature'.format(name))
    if accepted == 'any':
        pytest.skip('{} takes **kwargs: every keyword passes the call'.format(name))
    unknown = sorted({(keyword, where) for keyword, where in _NAMES.keywords[name]
                      if keyword not in accepted})
    assert not unknown, '{} (CuPy {}) no longer takes {}'.format(name, cupy.__version__, unknown)
