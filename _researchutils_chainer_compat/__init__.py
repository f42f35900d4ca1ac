"""Let Chainer 7.8.1, its last release, run on today's Python, NumPy and setuptools.

Chainer was written for NumPy 1.x, Python <= 3.11 and a setuptools with ``pkg_resources``.
On a current stack some names it reads are gone (``numpy.sctypes``, ``numpy.float``,
``numpy.distutils``, ``pkg_resources``) and a few NumPy functions changed their rules
(out-of-bound Python integers, ``ndarray.device``, ``numpy.fix``). This package lets
``import chainer`` and Chainer's functions behave as they did on the stack Chainer was
written for, with one mechanism and no change to NumPy or to any other library's namespace.

How: installing researchutils puts ``researchutils_chainer_compat.pth`` and this small
package beside it into site-packages. Python runs the .pth file's one line at every
interpreter start; when this package can be found, the line imports it, and it puts one
finder at the front of :data:`sys.meta_path`, importing nothing else (not researchutils, so
that another checkout of it stays importable; no NumPy, no Chainer). Where no .pth runs
(``python -S``, an embedded interpreter, a ``PYTHONPATH`` into another environment),
``import researchutils`` imports this package, which installs the finder then; if Chainer
modules it patches were loaded before that, :func:`install` warns, naming them.
``RESEARCHUTILS_CHAINER_COMPAT=0`` in the environment leaves the finder out (to see Chainer
as it is, for debugging).

The finder answers only for the Chainer modules in :data:`PATCHED_MODULES`, the one table of
what is patched: it takes the spec that the other finders give for such a module and wraps
its loader, so that the module runs as Chainer wrote it, through the patch named for it
(``_removed``: names a release removed; ``_changed``: rules a release changed;
``_devices``: CUDA's libraries without a GPU). Every supply
is decided when the module loads, by looking at the NumPy and setuptools present: a name
NumPy or setuptools has always wins, and on a stack that lacks nothing, nothing is done.
What is supplied goes only into the Chainer module that reads it, never into a namespace
that other code or another thread can see (:mod:`._module_scope`): NumPy never gains a name,
and ``import pkg_resources`` or ``import numpy.distutils`` elsewhere behaves as if
researchutils were not installed. ``docs/installation.rst`` lists each supply and its
reason, and says how to add a patch.

Tests: ``tests/test_chainer_compat.py`` (the finder, the .pth, the switch, threads, a fresh
interpreter per case), ``tests/test_chainer_compat_patches.py`` (each patch against the
NumPy 1.x semantics Chainer was written for) and ``tests/test_chainer_compat_pkg_resources.py``.
"""
import importlib
import os
import sys
import threading
import warnings

# Finders of this package, from any copy of it (a reload makes new classes), carry this.
_MARK = '_researchutils_chainer_compat'

#: The environment variable that turns the finder off when set to ``0``.
SWITCH = 'RESEARCHUTILS_CHAINER_COMPAT'

#: The Chainer modules the finder answers for, each with its patch: ``'module:function'``,
#: a function ``patch(loader, module)`` in that module of this package.
PATCHED_MODULES = {
    'chainer._environment_check': '_removed:environment_check',
    'chainer.testing.helper': '_removed:pkg_resources_user',
    'chainer.testing.doctest_helper': '_removed:pkg_resources_user',
    'chainer.functions.array.as_strided': '_removed:as_strided',
    'chainer.functions.array.resize_images': '_removed:resize_images',
    'chainer.functions.array.pad_sequence': '_changed:pad_sequence',
    'chainer.dataset.convert': '_changed:convert',
    'chainer.functions.math.fix': '_changed:fix',
    'chainer.variable': '_changed:variable',
    'chainer.distributions.categorical': '_changed:categorical',
    'chainer.links.activation.maxout': '_changed:maxout',
    'chainer.iterators.multiprocess_iterator': '_changed:multiprocess_iterator',
    'chainer.links.caffe.protobuf3.caffe_pb2': '_changed:caffe_pb2',
    'chainer.backends.cuda': '_devices:cuda',
    'onnx_chainer.export': '_removed:onnx_mapping',
    'onnx_chainer.context': '_removed:onnx_mapping',
    'onnx_chainer.functions.array': '_removed:onnx_mapping',
    'onnx_chainer.functions.math': '_removed:onnx_mapping',
}


def patch_for(name):
    """The patch function :data:`PATCHED_MODULES` names for Chainer module ``name``."""
    where, _, function = PATCHED_MODULES[name].partition(':')
    return getattr(importlib.import_module(__name__ + '.' + where), function)


class _PatchingLoader:
    """Runs a Chainer module's code through its patch, which calls the module's own loader.

    Everything else a loader offers (``get_source`` for tracebacks, ``get_code``,
    ``is_package``, resource readers) is the wrapped loader's.
    """

    _researchutils_chainer_compat = True

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._patch(self._loader, module)

    def __getattr__(self, name):
        if name in ('_loader', '_patch'):   # not set yet (copy, unpickling)
            raise AttributeError(name)
        return getattr(self._loader, name)


class ChainerCompatFinder:
    """Meta-path finder that wraps the loaders of the modules in :data:`PATCHED_MODULES`.

    It never supplies a module of its own: the spec always comes from the other finders
    (so a module that is not installed stays not installed), and only its loader changes.
    """

    _researchutils_chainer_compat = True

    def __init__(self):
        self._resolving = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in PATCHED_MODULES:
            return None
        resolving = self._resolving.__dict__.setdefault('names', set())
        if fullname in resolving:       # another finder asked the meta path again
            return None
        resolving.add(fullname)
        try:
            spec = _spec_from_other_finders(fullname, path, target)
        finally:
            resolving.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return None
        spec.loader = _PatchingLoader(spec.loader, patch_for(fullname))
        return spec

    def invalidate_caches(self):
        pass


def _spec_from_other_finders(fullname, path, target):
    for finder in list(sys.meta_path):
        if getattr(finder, _MARK, False):
            continue
        find_spec = getattr(finder, 'find_spec', None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def install():
    """Put the finder at the front of :data:`sys.meta_path`, replacing any earlier one.

    Idempotent, and safe under :func:`importlib.reload` of this package (IPython's
    autoreload does that): a finder left by an earlier copy is replaced, never joined, so
    there is always exactly one. Chainer modules of :data:`PATCHED_MODULES` already loaded
    without it stay as Chainer wrote them: a :class:`RuntimeWarning` names them.

    Returns:
        ChainerCompatFinder: the finder now installed.

    Example:
        >>> import sys
        >>> from _researchutils_chainer_compat import install
        >>> finder = install()
        >>> sum(getattr(f, '_researchutils_chainer_compat', False) for f in sys.meta_path)
        1
    """
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, _MARK, False)]
    finder = ChainerCompatFinder()
    sys.meta_path.insert(0, finder)
    unpatched = [name for name in PATCHED_MODULES if sys.modules.get(name) is not None
                 and not getattr(getattr(sys.modules[name], '__loader__', None), _MARK, False)]
    if unpatched:
        warnings.warn(
            'Chainer was imported before researchutils could install its compatibility '
            'finder (no .pth file ran: python -S, an embedded interpreter, or a PYTHONPATH '
            'into another environment), so these modules run as Chainer 7.8.1 wrote them and '
            'may fail on this NumPy or setuptools: {}. Import researchutils (or '
            '_researchutils_chainer_compat) before chainer; see the installation page of '
            "researchutils' documentation.".format(', '.join(unpatched)),
            RuntimeWarning, stacklevel=2)
    return finder


def _switched_on():
    value = os.environ.get(SWITCH, '').strip()
    if value not in ('', '0', '1'):
        warnings.warn('{}={!r}: expected 0 (finder off) or 1 (on); the finder is on'.format(
            SWITCH, value), RuntimeWarning, stacklevel=2)
    return value != '0'


if _switched_on():
    install()
