"""Initializers, usable wherever Chainer takes one (``initialW``, ``initial_bias``).

Example:
    >>> from researchutils.chainer.initializers import NormalWithLoc
"""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'normal_with_loc': ['NormalWithLoc'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
