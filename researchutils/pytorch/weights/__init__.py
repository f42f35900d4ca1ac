"""researchutils.pytorch.weights: Chainer weights into torch modules (loaded on first use).

:func:`from_chainer` converts a link or a model's tree of links, :func:`load_chainer_weights`
fills a module written by hand from a link, a model file or a Trainer snapshot, and
:func:`compare` checks one batch through both. Tests: ``tests/pytorch/weights/``.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'conversion': ['from_chainer', 'ConversionError'],
    'loading': ['load_chainer_weights'],
    'comparison': ['compare', 'Comparison'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.weights.comparison import Comparison as Comparison
    from researchutils.pytorch.weights.comparison import compare as compare
    from researchutils.pytorch.weights.conversion import ConversionError as ConversionError
    from researchutils.pytorch.weights.conversion import from_chainer as from_chainer
    from researchutils.pytorch.weights.loading import load_chainer_weights as load_chainer_weights
