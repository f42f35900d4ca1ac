"""researchutils: Chainer extensions for deep-learning research.

Importing this package loads nothing heavy; import the piece you need, for
example ``from researchutils.chainer.functions import grad_clip_lstm``.
"""
# Chainer 7.8.1 needs the finder of _researchutils_chainer_compat on today's NumPy and
# setuptools. The installed .pth file imports that package at interpreter start; where no
# .pth runs (python -S, an embedded interpreter, a PYTHONPATH into another environment),
# importing it here installs the finder before any researchutils module imports Chainer,
# and warns if Chainer came first (docs/installation.rst).
from types import ModuleType

import _researchutils_chainer_compat  # noqa: F401
from researchutils._version import __version__

__all__ = ['__version__']


def __getattr__(name: str) -> ModuleType:
    # The original researchutils imported arrays and files here; load them on first use
    # so that `import researchutils` stays light.
    if name in ('arrays', 'files'):
        import importlib
        return importlib.import_module('researchutils.' + name)
    raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, name))
