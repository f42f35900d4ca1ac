"""Finishing onnx_chainer's ModelProto so that onnx's full check passes in every opset offered.

onnx_chainer (Chainer 7.8.1) writes a graph that onnxruntime runs but that breaks two rules
of the ONNX IR, and one of a format older than the runtime:

- before opset 9, ``Constant`` holds floats only, yet onnx_chainer's Reshape and the LSTM
  converter write int64 Constants (shapes, Slice bounds): they become initializers, which
  hold any type in every opset;
- node names repeat (every node a function's converter writes takes the function's name):
  the later ones get a suffix, as the IR asks names to be unique within a graph;
- parameters are listed as graph inputs too (this keeps onnxruntime from folding
  constants): they stay initializers only, and the IR version is the lowest the opsets need.

Then ``onnx.checker.check_model(model, full_check=True)`` runs, with shape inference. Called
by :func:`researchutils.chainer.onnx.export`; tests: ``tests/chainer/onnx/test_proto.py``.
"""
from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

# The element types Constant holds before opset 9 (float16, float, double).
_FLOAT_TYPES = (10, 1, 11)
_CONSTANT_ANY_TYPE_FROM = 9


def _graphs(graph: Any) -> Iterator[Any]:
    """``graph`` and the subgraphs its nodes hold (Loop, If, Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField('g'):
                yield from _graphs(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graphs(subgraph)


def _constants_to_initializers(graph: Any) -> None:
    """Moves each Constant of a non-float type into the graph's initializers."""
    kept = []
    for node in graph.node:
        value = next((a.t for a in node.attribute if a.name == 'value'), None)
        if node.op_type == 'Constant' and value is not None and (
                value.data_type not in _FLOAT_TYPES):
            tensor = graph.initializer.add()
            tensor.CopyFrom(value)
            tensor.name = node.output[0]
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)


def _unique_node_names(graph: Any) -> None:
    """Gives the second and later nodes of a repeated name the suffix ``_1``, ``_2``..."""
    taken = {node.name for node in graph.node}
    seen: set[str] = set()
    for node in graph.node:
        if node.name not in seen:
            seen.add(node.name)
            continue
        number = 1
        while '{}_{}'.format(node.name, number) in taken:
            number += 1
        node.name = '{}_{}'.format(node.name, number)
        taken.add(node.name)
        seen.add(node.name)


def finish(onnx: ModuleType, proto: Any, opset_version: int) -> None:
    """Makes ``proto`` pass ``onnx.checker.check_model(proto, full_check=True)``, in place.

    Args:
        onnx (module): The onnx module.
        proto (onnx.ModelProto): What onnx_chainer returned.
        opset_version (int): The opset of the default domain it was written for.

    Raises:
        onnx.checker.ValidationError: The graph is still not valid (a converter wrote a node
            that the opset does not have); nothing is written then.
    """
    for graph in _graphs(proto.graph):
        if opset_version < _CONSTANT_ANY_TYPE_FROM:
            _constants_to_initializers(graph)
        _unique_node_names(graph)
    initializers = {tensor.name for tensor in proto.graph.initializer}
    inputs = [value for value in proto.graph.input if value.name not in initializers]
    del proto.graph.input[:]
    proto.graph.input.extend(inputs)
    proto.ir_version = max(4, onnx.helper.find_min_ir_version_for(
        list(proto.opset_import), ignore_unknown=True))
    onnx.checker.check_model(proto, full_check=True)
