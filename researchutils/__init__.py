"""researchutils: Chainer extensions for deep-learning research.

Importing this package loads nothing heavy; import the piece you need, for
example ``from researchutils.chainer.functions import grad_clip_lstm``.
"""
from researchutils._version import __version__

__all__ = ['__version__']


def __getattr__(name):
    # The original researchutils imported arrays and files here; load them on first use
    # so that `import researchutils` stays light.
    if name in ('arrays', 'files'):
        import importlib
        return importlib.import_module('researchutils.' + name)
    raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, name))
