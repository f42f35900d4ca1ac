"""What a table entry sees of one traced function call, and the literals it writes.

An entry of :data:`researchutils.pytorch.tracing.table.FUNCTIONS` is ``entry(call) -> str``: the
torch expression that computes the function's outputs (a tensor, or a tuple for several),
from ``call.args`` (the expressions of its inputs), the node's attributes and the shapes
traced. Tests: ``tests/pytorch/tracing/test_functions.py``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from researchutils.pytorch.tracing._trace import Step


def literal(value: Any) -> str:
    """Python source for an attribute value: NumPy scalars as Python numbers, tuples,
    lists and slices written out (``slice(1, 3, None)`` as ``slice(1, 3, None)``)."""
    if isinstance(value, numpy.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if numpy.isfinite(value) else 'float({!r})'.format(repr(value))
    if isinstance(value, tuple):
        items = ', '.join(literal(item) for item in value)
        return '({},)'.format(items) if len(value) == 1 else '({})'.format(items)
    if isinstance(value, list):
        return '[{}]'.format(', '.join(literal(item) for item in value))
    if isinstance(value, slice):
        return 'slice({}, {}, {})'.format(literal(value.start), literal(value.stop),
                                          literal(value.step))
    raise TypeError('cannot write {!r} ({}) as a literal'.format(value, type(value).__name__))


class Call:
    """One traced function call, as its table entry reads it."""

    def __init__(self, step: Step, args: list[str],
                 constant: Callable[[Any], str]) -> None:
        self.step = step
        self.node = step.node
        self.args = args
        self._constant = constant

    @property
    def name(self) -> str:
        """The function's name (its FunctionNode class name)."""
        return self.step.name

    def attr(self, name: str, default: Any = None) -> Any:
        """The node's attribute ``name`` (``default`` where it has none)."""
        return getattr(self.node, name, default)

    def lit(self, name: str, default: Any = None) -> str:
        """The node's attribute ``name`` as a Python literal."""
        return literal(self.attr(name, default))

    def constant(self, array: Any) -> str:
        """An expression for a constant array the call holds (a buffer of the module)."""
        return self._constant(array)

    def in_shape(self, index: int) -> tuple[int, ...]:
        """The traced shape of input ``index``."""
        return self.step.in_shapes[index]

    def fail(self, why: str) -> ValueError:
        """The error for a call with attributes no torch operation reproduces."""
        return ValueError('cannot convert {} (called in {}) to PyTorch: {}'.format(
            self.name, self.step.place, why))
