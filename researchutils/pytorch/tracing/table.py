"""The one table from Chainer's functions to torch: FunctionNode class name -> entry.

Example:
    >>> from researchutils.pytorch.tracing.table import FUNCTIONS
    >>> 'LinearFunction' in FUNCTIONS and 'GradClipLSTM' in FUNCTIONS
    True

Tests: ``tests/pytorch/tracing/test_functions.py`` (each entry against Chainer, and the
table against onnx_chainer 7.8.1's list of the functions it converts).
"""
from __future__ import annotations

from researchutils.pytorch.tracing._arrays import ARRAYS
from researchutils.pytorch.tracing._elementwise import ELEMENTWISE, Entry
from researchutils.pytorch.tracing._layers import LAYERS
from researchutils.pytorch.tracing._toolkit import TOOLKIT

#: Chainer FunctionNode class name -> ``entry(call)``, the torch expression of the call
#: (:class:`~researchutils.pytorch.tracing._call.Call`). Every function onnx_chainer 7.8.1
#: converts that a Chainer 7.8.1 graph can hold, and researchutils' own.
FUNCTIONS: dict[str, Entry] = {**ELEMENTWISE, **ARRAYS, **LAYERS, **TOOLKIT}


_TUPLES = {'SplitAxis', 'Separate', 'TransposeSequence', 'LSTM', 'GradClipLSTM'}


def returns_tuple(name: str, args: list[str]) -> bool:
    """Whether the entry of ``name`` returns a tuple (whatever its number of outputs)."""
    return name in _TUPLES or name == 'Identity' and len(args) > 1
