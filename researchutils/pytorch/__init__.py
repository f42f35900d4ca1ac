"""The way into PyTorch: Chainer models converted to torch modules and source.

Example:
    >>> from researchutils.pytorch import convert, write_source
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'tracing.converter': ['convert', 'write_source'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.tracing.converter import convert as convert
    from researchutils.pytorch.tracing.converter import write_source as write_source
