"""Initializers, usable wherever Chainer takes one (``initialW``, ``initial_bias``).

Example:
    >>> from researchutils.chainer.initializers import NormalWithLoc
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'normal_with_loc': ['NormalWithLoc'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.initializers.normal_with_loc import NormalWithLoc as NormalWithLoc
