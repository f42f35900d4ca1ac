"""Let Chainer 7.8.1 import on Python 3.12, where NumPy ships no ``numpy.distutils``.

Chainer's start-up check (``chainer/_environment_check.py``) runs
``import numpy.distutils.system_info`` and, on macOS only, calls
``numpy.distutils.system_info.get_info('blas_opt')`` to warn about Apple's Accelerate.
Nothing else in Chainer touches ``numpy.distutils``. NumPy 1.26 has wheels for Python 3.12
but leaves ``numpy.distutils`` out of them, so ``import chainer`` stops there.

Installing researchutils puts ``researchutils_py312_compat.pth`` into site-packages. Python
runs its one line at every interpreter start; on Python 3.12 that line imports this module,
which appends a finder to :data:`sys.meta_path`. The finder answers for exactly two names,
``numpy.distutils`` and ``numpy.distutils.system_info``, and only when no other finder
supplies them: it asks every other finder first, so a real ``numpy.distutils`` (NumPy on
Python 3.11, or a NumPy built with it) is always the one imported. Without NumPy it does
nothing (the import of ``numpy`` itself fails first), and importing this module imports
neither NumPy nor Chainer.

The stand-in ``numpy.distutils`` is an empty package; its ``system_info`` module has only
:func:`get_info`, which returns ``{}``, the answer ``numpy.distutils`` gives for a library it
cannot find. Chainer's macOS Accelerate warning therefore never fires on Python 3.12.
"""
import sys
from importlib.machinery import ModuleSpec

_PACKAGE = 'numpy.distutils'
_SYSTEM_INFO = 'numpy.distutils.system_info'


def get_info(name, notfound_action=0):
    """The stand-in for ``numpy.distutils.system_info.get_info``: knows no library.

    Args:
        name (str): the library section asked for, e.g. ``'blas_opt'``.
        notfound_action (int): accepted for the real signature; ignored.

    Returns:
        dict: always ``{}``, what ``numpy.distutils`` returns for a library it did not find.

    Example:
        >>> from researchutils._py312_compat import get_info
        >>> get_info('blas_opt')
        {}
    """
    return {}


class _StandInLoader:
    """Creates the two stand-in modules (a default module object, then filled in)."""

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        if module.__name__ == _SYSTEM_INFO:
            module.__doc__ = ('Stand-in installed by researchutils: NumPy for this Python has '
                              'no numpy.distutils, which Chainer 7.8.1 imports.')
            module.get_info = get_info
        else:
            module.__doc__ = ('Stand-in installed by researchutils: holds only system_info, '
                              'for Chainer 7.8.1.')


class _NumpyDistutilsFinder:
    """Meta-path finder that supplies ``numpy.distutils`` only where no real one exists."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == _PACKAGE:
            if 'numpy' not in sys.modules or self._another_finder_has(fullname, path, target):
                return None
            return ModuleSpec(fullname, _StandInLoader, is_package=True)
        if fullname == _SYSTEM_INFO:
            parent = sys.modules.get(_PACKAGE)
            # Inside a real numpy.distutils a missing system_info stays missing.
            if parent is None or getattr(parent.__spec__, 'loader', None) is not _StandInLoader:
                return None
            return ModuleSpec(fullname, _StandInLoader)
        return None

    def _another_finder_has(self, fullname, path, target):
        # Asking every other finder, not relying on being last in sys.meta_path, keeps a real
        # numpy.distutils first even when a finder is appended after this one.
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, 'find_spec', None)
            if finder is not self and find_spec is not None and \
                    find_spec(fullname, path, target) is not None:
                return True
        return False


def install():
    """Append the ``numpy.distutils`` finder to :data:`sys.meta_path` (once).

    The ``.pth`` file calls this by importing the module on Python 3.12; on other versions
    importing the module changes nothing, and calling ``install()`` there is harmless: a real
    ``numpy.distutils`` is still the one imported.
    """
    if not any(isinstance(finder, _NumpyDistutilsFinder) for finder in sys.meta_path):
        sys.meta_path.append(_NumpyDistutilsFinder())


if sys.version_info >= (3, 12):
    install()
