"""Patches that supply names a release removed: ``pkg_resources``, ``numpy.distutils``,
``numpy.sctypes``, ``numpy.float``, ``onnx.mapping``.

Each patch is ``patch(loader, module)`` (listed in ``PATCHED_MODULES``): it runs the module's
code through :func:`._module_scope.run`, giving the module alone what the stack lacks, and
gives nothing where the stack has the name (a name NumPy or setuptools has always wins).
Tests: ``tests/test_chainer_compat_patches.py``.
"""
import importlib
import importlib.util
import sys
import warnings

from _researchutils_chainer_compat import _module_scope, _stand_ins


def _findable(name):
    """Whether the installed packages (not this package) provide module ``name``."""
    if sys.modules.get(name) is not None:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):         # a parent package is missing
        return False


def _numpy_lacks(name):
    import numpy
    with warnings.catch_warnings():
        # NumPy 1.2x warns on some names it is about to remove; a warned name is present.
        warnings.simplefilter('ignore')
        return not hasattr(numpy, name)


def _pkg_resources_import():
    """``{'pkg_resources': stand-in}`` where setuptools has no ``pkg_resources``, else ``{}``."""
    if _findable('pkg_resources'):
        return {}
    from _researchutils_chainer_compat import _pkg_resources
    return {'pkg_resources': _pkg_resources.pkg_resources()}


def environment_check(loader, module):
    """Chainer's start-up check: ``import numpy.distutils.system_info`` (``get_info`` is
    called on macOS only) and ``import pkg_resources`` (``require`` / ``get_distribution``
    of CuPy, iDeep)."""
    # numpy.distutils: removed in NumPy 2.0 (and absent on Python >= 3.12); pkg_resources:
    # removed in setuptools 81.
    names = {}
    if not _findable('numpy.distutils'):
        names['distutils'] = _stand_ins.numpy_distutils()
    _module_scope.run(loader, module, _pkg_resources_import(), names,
                      ['_check_osx_numpy_backend'])


def pkg_resources_user(loader, module):
    """``chainer.testing``'s ``with_requires`` / ``without_requires`` build a
    ``pkg_resources.WorkingSet``."""
    # pkg_resources: removed in setuptools 81.
    _module_scope.run(loader, module, _pkg_resources_import())


def as_strided(loader, module):
    """Reads ``np.sctypes['int']`` at import and ``np.sctypes['float']`` in backward."""
    # numpy.sctypes: removed in NumPy 2.0.
    names = {'sctypes': _stand_ins.sctypes()} if _numpy_lacks('sctypes') else {}
    _module_scope.run(loader, module, numpy_names=names, readers=['AsStridedGrad.forward'])


def resize_images(loader, module):
    """``compute_indices_and_weights`` passes ``dtype=numpy.float``, NumPy 1.x's alias of
    Python's float: the sampling grid is float64."""
    # numpy.float: removed in NumPy 1.24 (F.resize_images raised AttributeError since then).
    names = {'float': float} if _numpy_lacks('float') else {}
    _module_scope.run(loader, module, numpy_names=names,
                      readers=['compute_indices_and_weights'])


def onnx_mapping(loader, module):
    """onnx_chainer (Chainer's ONNX exporter) reads ``onnx.mapping``: ``export``,
    ``functions.array`` and ``functions.math`` import ``NP_TYPE_TO_TENSOR_TYPE`` at import,
    ``context`` reads ``STORAGE_TENSOR_TYPE_TO_FIELD`` when it writes a constant."""
    # onnx.mapping: deprecated in onnx 1.13, removed in onnx 1.19 (onnx_chainer's import then
    # failed, and its exporter said to install onnx<1.7.0). Where onnx is missing, nothing is
    # done: onnx_chainer says so itself.
    imports = {}
    if _findable('onnx') and not _findable('onnx.mapping'):
        onnx = importlib.import_module('onnx')
        imports['onnx'] = _module_scope.module_with(onnx, {'mapping': _stand_ins.onnx_mapping()})
    _module_scope.run(loader, module, imports)
