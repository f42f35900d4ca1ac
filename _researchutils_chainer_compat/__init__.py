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
that another checkout of it stays importable; no NumPy, no Chainer). The finder answers
only for the few Chainer modules listed in :data:`PATCHED_MODULES`: it takes the spec that
the other finders give for such a module and wraps its loader, so that the module runs as
Chainer wrote it and then gets the supply or the fix of :mod:`._patches` for it. Every supply
is decided when the module loads, by looking at the NumPy and setuptools present: a name
NumPy or setuptools has always wins, and on a stack that lacks nothing, nothing is done.
What is supplied goes only into the Chainer module that reads it (NumPy itself never gains a
name, and ``import pkg_resources`` or ``import numpy.distutils`` elsewhere behaves as if
researchutils were not installed). ``docs/installation.rst`` lists each supply and its reason.

Tests: ``tests/test_chainer_compat.py`` (the finder, the .pth, a fresh interpreter per
case) and ``tests/test_chainer_compat_patches.py`` (each patch against the NumPy 1.x
semantics Chainer was written for).
"""
import sys
import threading

# Finders of this package, from any copy of it (a reload makes new classes), carry this.
_MARK = '_researchutils_chainer_compat'

#: The Chainer modules the finder answers for, and the patch each gets (see ``_patches``).
PATCHED_MODULES = {
    'chainer._environment_check': 'environment_check',
    'chainer.testing.helper': 'pkg_resources_user',
    'chainer.testing.doctest_helper': 'pkg_resources_user',
    'chainer.functions.array.as_strided': 'as_strided',
    'chainer.functions.array.resize_images': 'resize_images',
    'chainer.functions.array.pad_sequence': 'pad_sequence',
    'chainer.functions.math.fix': 'fix',
    'chainer.variable': 'variable',
    'chainer.distributions.categorical': 'categorical',
    'chainer.links.caffe.protobuf3.caffe_pb2': 'caffe_pb2',
    'chainer.dataset.convert': 'convert',
    'chainer.iterators.multiprocess_iterator': 'multiprocess_iterator',
    'chainer.links.activation.maxout': 'maxout',
}


class _PatchingLoader:
    """Runs a Chainer module with its own loader, then applies the patch named for it.

    Everything else a loader offers (``get_source`` for tracebacks, ``get_code``,
    ``is_package``, resource readers) is the wrapped loader's.
    """

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        from _researchutils_chainer_compat import _patches
        _patches.run(self._patch, self._loader, module)

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
        patch = PATCHED_MODULES.get(fullname)
        if patch is None:
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
        spec.loader = _PatchingLoader(spec.loader, patch)
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
    there is always exactly one.

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
    return finder


install()
