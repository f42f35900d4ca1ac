"""Type aliases for the annotations of the public API (private; imports NumPy only).

Chainer ships a ``py.typed`` marker but is typed too thinly to check against, and CuPy is
optional, so mypy is told to treat both as ``Any`` (pyproject.toml, ``[tool.mypy]``). The
aliases for Chainer's and CuPy's objects are therefore ``Any`` to a type checker, on
purpose: they carry no checking, but a signature that reads ``x: VariableOrArray`` says
what it takes, where a bare ``Any`` would not. NumPy is typed, so what is NumPy only gets
NumPy's own precise types (:data:`FloatArray`, ``numpy.typing.ArrayLike``).

Tests: ``tests/test_typing.py`` (the checker runs in ``make lint``).
"""
import os
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy
import numpy.typing

__all__ = ['Array', 'DeviceSpec', 'FloatArray', 'Indices', 'Initializer', 'SavePath',
           'Variable', 'VariableOrArray']

#: A NumPy or CuPy array (``numpy.ndarray`` or ``cupy.ndarray``): ``Any`` to a checker,
#: because CuPy is optional and untyped.
Array: TypeAlias = Any

#: A ``chainer.Variable`` (a ``chainer.Parameter`` is one): ``Any`` to a checker.
Variable: TypeAlias = Any

#: What a Chainer function or link takes as an input: a ``chainer.Variable`` or an
#: :data:`Array` of either backend (``Any`` to a checker).
VariableOrArray: TypeAlias = Any

#: A device as ``chainer.get_device`` takes it: a ``chainer.backend.Device`` or its
#: specifier (``'@numpy'``, ``'@cupy:0'``, a GPU number): ``Any`` to a checker.
DeviceSpec: TypeAlias = Any

#: What Chainer's links take as ``initialW`` / ``initial_bias``: a
#: ``chainer.Initializer``, an array, a scalar, or ``None`` for the default (``Any`` to a
#: checker).
Initializer: TypeAlias = Any

#: A NumPy array of float32 or float64 (or any NumPy float type): checked by mypy.
FloatArray: TypeAlias = numpy.typing.NDArray[numpy.floating[Any]]

#: Where the figure functions save: a file path, True for a new file under a default
#: name in the current folder, False or None for no file.
SavePath: TypeAlias = str | os.PathLike[str] | bool | None

#: Positions in a dataset (what the samplers and ``get_subset`` take): a sequence of ints,
#: a ``range`` among them, or a NumPy integer array.
Indices: TypeAlias = Sequence[int] | numpy.typing.NDArray[numpy.integer[Any]]
