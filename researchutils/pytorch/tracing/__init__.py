"""Chainer's traced graph as torch operations: :func:`convert`, :func:`write_source`.

The table of Chainer functions and their torch expressions is
:data:`researchutils.pytorch.tracing.table.FUNCTIONS`; the helpers the written source calls
where Chainer's semantics need more than one torch call are in
:mod:`researchutils.pytorch.tracing.ops`. Tests: ``tests/pytorch/tracing/``.

Example:
    >>> from researchutils.pytorch.tracing import convert, write_source
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(globals(), {
    'converter': ['convert', 'write_source'],
})

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.tracing.converter import convert as convert
    from researchutils.pytorch.tracing.converter import write_source as write_source
