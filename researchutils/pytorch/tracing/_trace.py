"""Runs a Chainer model's forward once and records its graph as the ONNX export sees it.

The trace reuses :func:`researchutils.chainer.onnx.export`'s machinery: its link hook names
the link that called each function (``/encoder/lstm (LSTM)``), its ``states`` handling turns
the recurrent state of the named links into inputs and outputs, and its output naming and
argument checks are the export's own. What it records instead of ONNX nodes is a
:class:`Graph`: the functions in the order they ran, each with where its inputs come from
(a model input, a parameter or persistent value of a link by path, a constant, or an
earlier function's output). Tests: ``tests/pytorch/tracing/test_convert.py``.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import chainer
import chainer.functions as F
import numpy

from researchutils.chainer.onnx._arguments import args_list
from researchutils.chainer.onnx.exporter import (  # the export's own tracing machinery
    _function_name,
    _FunctionPlaces,
    _LinkPlaces,
    _named_outputs,
    _reachable,
    _state_name,
    _stateful_links,
)


@dataclasses.dataclass
class Source:
    """Where a function's input comes from: ``kind`` is ``input`` (``key`` its index),
    ``param`` or ``persistent`` (``key`` the path ``/fc1/W``), ``constant`` (``value``) or
    ``output`` (``key`` the (step, output) pair)."""

    kind: str
    key: Any = None
    value: Any = None


@dataclasses.dataclass
class Step:
    """One function applied: its name, node (attributes), inputs, shapes and place."""

    name: str
    node: Any
    inputs: list[Source]
    in_shapes: list[tuple[int, ...]]
    out_shapes: list[tuple[int, ...] | None]
    place: str
    link_path: str | None


@dataclasses.dataclass
class Graph:
    """The traced forward: inputs by name, the steps in call order, outputs by name."""

    model: Any
    input_names: list[str]
    steps: list[Step]
    outputs: list[tuple[str, Source]]
    output_kind: str
    params: dict[str, Any]
    persistents: dict[str, Any]
    links: dict[str, Any]
    train: bool


class _Sign(chainer.FunctionNode):
    """F.sign as a node of the graph (Chainer's returns a new Variable, which the trace
    would take for a constant); named as onnx_chainer's stand-in for it is. No gradient
    flows through it, as none flows through Chainer's."""

    custom_function_node_name = 'sign'

    def forward(self, inputs: Any) -> tuple[Any]:
        x, = inputs
        return chainer.backend.get_array_module(x).sign(x),

    def backward(self, indexes: Any, grad_outputs: Any) -> tuple[None]:
        return None,


def _sign(x: Any) -> Any:
    y, = _Sign().apply((x,))
    return y


@contextlib.contextmanager
def _functions_as_nodes() -> Iterator[None]:
    """F.sign made a node while the forward runs (onnx_chainer's patch_functions does the
    same for its export)."""
    original = F.sign
    F.sign = _sign
    try:
        yield
    finally:
        F.sign = original


class _Recorder(_FunctionPlaces):
    """The export's place recorder that also keeps each function's input arrays and the
    innermost link running (its path)."""

    def __init__(self, links: _LinkPlaces, paths: Mapping[int, str]) -> None:
        super().__init__(links)
        self.in_data: dict[int, tuple[Any, ...]] = {}
        self.link_paths: dict[int, str | None] = {}
        self._paths = paths

    def forward_preprocess(self, function: Any, in_data: Any) -> None:
        super().forward_preprocess(function, in_data)
        self.in_data[id(function)] = tuple(in_data)
        path = None
        for link in reversed(self.links.running):
            if id(link) in self._paths:
                path = self._paths[id(link)]
                break
        self.link_paths[id(function)] = path


def _input_names(listed: Sequence[Any], input_names: Sequence[str] | None) -> list[str]:
    if input_names is not None:
        return list(input_names)
    return ['input'] if len(listed) == 1 else ['input_{}'.format(i) for i in range(len(listed))]


def _output_kind(outputs: Any) -> str:
    if isinstance(outputs, dict):
        return 'dict'
    return 'tuple' if isinstance(outputs, (list, tuple)) else 'single'


def trace(model: chainer.Link, args: Any, *, train: bool, states: Sequence[str],
          input_names: Sequence[str] | None, output_names: Sequence[str] | None,
          known: Mapping[str, Any]) -> Graph:
    """Runs ``model(*args)`` once with hooks and returns its :class:`Graph`.

    Raises:
        ValueError: a function of the graph is not in ``known``, naming it and the link
            that called it (the export's wording of places); bad ``states`` or names.
    """
    listed = args_list(args)
    state_links = _stateful_links(model, states)
    names = _input_names(listed, input_names)
    if len(names) != len(listed):
        raise ValueError('input_names has {} names for {} inputs: {!r}'.format(
            len(names), len(listed), names))
    n_args = len(listed)
    for state_path, link in state_links:
        listed += [link.c.array, link.h.array]
        names += [_state_name(state_path, 'c'), _state_name(state_path, 'h')]
    if len(set(names)) != len(names):
        raise ValueError('the inputs must have distinct names, got {}'.format(names))
    variables = [value if isinstance(value, chainer.Variable) else chainer.Variable(value)
                 for value in listed]
    link_paths = {id(link): path for path, link in model.namedlinks()}
    places = _LinkPlaces(model, n_args)
    recorder = _Recorder(places, link_paths)
    saved = {link: (link.c, link.h) for _, link in model.namedlinks()
             if hasattr(link, 'c') and hasattr(link, 'h')}
    kept = _keep_persistents(model)
    try:
        # Not in_recomputing, as the export traces: a training trace must see BatchNorm's
        # running statistics (as arrays of the function); they are put back after.
        with chainer.using_config('train', train), \
                chainer.using_config('enable_backprop', True), _functions_as_nodes(), \
                places, recorder:
            for (_, link), c, h in zip(state_links, variables[n_args::2], variables[n_args + 1::2]):
                link.set_state(c, h)
            returned = model(*variables[:n_args])
            named = _named_outputs(returned, output_names)
            for path, link in state_links:
                named += [(_state_name(path, 'c_out'), link.c),
                          (_state_name(path, 'h_out'), link.h)]
    finally:
        for link, (c, h) in saved.items():
            link.c, link.h = c, h
        _restore_persistents(kept)
    out_names = [name for name, _ in named]
    if len(set(out_names)) != len(out_names):
        raise ValueError('the outputs must have distinct names, got {}'.format(out_names))
    return _graph(model, names, variables, named, recorder, known, train,
                  _output_kind(returned) if not state_links else 'tuple')


def _graph(model: chainer.Link, names: list[str], variables: list[chainer.Variable],
           named: list[tuple[str, chainer.Variable]], recorder: _Recorder,
           known: Mapping[str, Any], train: bool, output_kind: str) -> Graph:
    reachable = _reachable([value for _, value in named])
    order = [function for key, (function, _) in recorder.places.items() if key in reachable]
    missing = []
    for function in order:
        name = _function_name(function)
        if name not in known:
            entry = '{} (called in {})'.format(name, recorder.places[id(function)][1])
            if entry not in missing:
                missing.append(entry)
    if missing:
        raise ValueError(
            'cannot convert {} to PyTorch: no torch operation for {}. Compute this part '
            'with functions researchutils.pytorch.tracing.table.FUNCTIONS lists'.format(
                type(model).__name__, '; '.join(missing)))
    params = {path: param for path, param in model.namedparams()}
    param_nodes = {id(param.node): path for path, param in params.items()}
    persistents = _persistents(model)
    persistent_ids = {id(array): path for path, array in persistents.items()}
    input_nodes = {id(variable.node): i for i, variable in enumerate(variables)}
    produced: dict[int, tuple[int, int]] = {}
    steps = []
    for index, function in enumerate(order):
        in_data = recorder.in_data[id(function)]
        sources = [_source(node, array, produced, input_nodes, param_nodes, persistent_ids)
                   for node, array in zip(function.inputs, in_data)]
        for j, ref in enumerate(function.outputs):
            node = ref()
            if node is not None:
                produced[id(node)] = (index, j)
        steps.append(Step(
            _function_name(function), function, sources,
            [tuple(array.shape) for array in in_data],
            _output_shapes(function),
            recorder.places[id(function)][1], recorder.link_paths[id(function)]))
    outputs = [(name, _source(value.node, value.array, produced, input_nodes, param_nodes,
                              persistent_ids)) for name, value in named]
    return Graph(model, names, steps, outputs,
                 output_kind, params, persistents, dict(model.namedlinks()), train)


def _output_shapes(function: Any) -> list[tuple[int, ...] | None]:
    shapes: list[tuple[int, ...] | None] = []
    for ref in function.outputs:
        node = ref()
        shapes.append(None if node is None else tuple(node.shape))
    return shapes


def _source(node: Any, array: Any, produced: Mapping[int, tuple[int, int]],
            input_nodes: Mapping[int, int], param_nodes: Mapping[int, str],
            persistent_ids: Mapping[int, str]) -> Source:
    if id(node) in produced:
        return Source('output', produced[id(node)])
    if id(node) in input_nodes:
        return Source('input', input_nodes[id(node)])
    if id(node) in param_nodes:
        return Source('param', param_nodes[id(node)])
    if id(array) in persistent_ids:
        return Source('persistent', persistent_ids[id(array)])
    return Source('constant', value=numpy.array(chainer.backends.cuda.to_cpu(array)))


def _persistents(model: chainer.Link) -> dict[str, Any]:
    """Every array persistent value of the model's links, by path (``/bn/avg_mean``)."""
    found = {}
    for path, link in model.namedlinks():
        for name in sorted(link._persistent):
            value = getattr(link, name)
            if isinstance(value, chainer.get_array_types()):
                found['{}/{}'.format(path.rstrip('/'), name)] = value
    return found


def _keep_persistents(model: chainer.Link) -> list[tuple[Any, str, Any]]:
    """Copies of every link's persistent values, which a training forward updates."""
    kept = []
    for _, link in model.namedlinks():
        for name in link._persistent:
            value = getattr(link, name)
            kept.append((link, name, value.copy() if hasattr(value, 'copy') else value))
    return kept


def _restore_persistents(kept: Sequence[tuple[Any, str, Any]]) -> None:
    """Puts the values back in place: arrays keep their identity (the optimizer's, the
    function nodes' references stay valid)."""
    for link, name, value in kept:
        current = getattr(link, name)
        if isinstance(current, chainer.get_array_types()) and current.shape == value.shape:
            current[...] = value
        else:
            setattr(link, name, value)
