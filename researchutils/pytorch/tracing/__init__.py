"""Chainer's traced graph as torch operations: :func:`convert`, :func:`write_source`.

The table of Chainer functions and their torch expressions is
:data:`researchutils.pytorch.tracing.FUNCTIONS`. Tests: ``tests/pytorch/tracing/``.

Example:
    >>> from researchutils.pytorch.tracing import FUNCTIONS
    >>> 'LinearFunction' in FUNCTIONS
    True
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(globals(), {
    'converter': ['convert', 'write_source'],
    '_table': ['FUNCTIONS'],
})

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.tracing._table import FUNCTIONS as FUNCTIONS
    from researchutils.pytorch.tracing.converter import convert as convert
    from researchutils.pytorch.tracing.converter import write_source as write_source
