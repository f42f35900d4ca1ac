"""researchutils: Chainer extensions for deep-learning research.

Importing this package loads nothing heavy; import the piece you need, for
example ``from researchutils.chainer.functions import grad_clip_lstm``.
"""
import sys

from researchutils._version import __version__

if sys.version_info >= (3, 13):
    raise ImportError(
        'researchutils needs Python 3.8 to 3.12, not {}.{}: it is built on '
        'Chainer 7.8.1 (the last Chainer release), which needs NumPy < 2, and '
        'NumPy < 2 has no wheels for Python 3.13 or newer. Create an environment '
        'with Python 3.12 or 3.11, e.g. `python3.12 -m venv .venv`.'.format(
            *sys.version_info[:2]))

__all__ = ['__version__']


def __getattr__(name):
    # The original researchutils imported arrays and files here; load them on first use
    # so that `import researchutils` stays light.
    if name in ('arrays', 'files'):
        import importlib
        return importlib.import_module('researchutils.' + name)
    raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, name))
