"""Export a Chainer model to an ONNX file: Chainer's own exporter, LSTMs included.

:func:`export` runs Chainer 7.8.1's exporter (``onnx_chainer``, which the compatibility
finder completes for today's onnx: docs/installation.rst) with researchutils' converters
(:mod:`.converters`) for the functions it lacks: the LSTM step of ``F.lstm`` /
``L.LSTM`` and of researchutils' LSTM links, ConvLSTM's gradient clip and ``F.flip``.

What it adds around onnx_chainer, and the failures it guards against:

- the recurrent state of the links named in ``states`` becomes graph inputs and outputs, so
  a stateful step runs step by step in onnxruntime; the model's state is left as it was;
- a function without a converter is named with the link that called it, before anything is
  converted or written (onnx_chainer says only "X is not supported");
- names that would wire a wrong graph (one name for two inputs, an input named as a
  state, one Variable given twice), arguments the model's forward does not take, and a
  path that cannot be written are refused, naming them, before the model runs
  (:mod:`._arguments`);
- the file is written atomically (a failed export never leaves a half-written file, nor
  touches an existing one), after ``onnx.checker.check_model(..., full_check=True)``
  passed, in every opset of :data:`OPSETS` (:mod:`._proto` makes onnx_chainer's graph
  valid: int64 constants before opset 9, node names unique, parameters initializers only,
  the lowest IR version the opsets need).

onnx (the ``onnx`` extra) is imported when :func:`export` is called. Tutorial:
``docs/tutorials/onnx.rst``; tests: ``tests/chainer/onnx/test_export.py`` and
``test_export_refusals.py`` beside it.
"""
from __future__ import annotations

import errno
import importlib
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import chainer
import chainer.functions as F

from researchutils._checks import check_int, check_mapping, check_path, check_str_list
from researchutils._files import open_temporary, write_atomically
from researchutils.chainer.onnx._arguments import (
    args_list,
    check_distinct,
    check_forward_takes,
    check_inner_call,
)
from researchutils.chainer.onnx._proto import finish
from researchutils.chainer.onnx.converters import CONVERTERS

EXTRA = 'pip install researchutils[onnx]'
#: The opsets offered, each tested: above 12, onnx_chainer's converters of Squeeze,
#: Unsqueeze, Split and the reductions write attributes that opset 13 made inputs.
OPSETS = range(7, 13)


def _import_onnx() -> tuple[ModuleType, ModuleType]:
    """onnx and onnx_chainer's export module, or an ImportError naming the extra."""
    try:
        onnx = importlib.import_module('onnx')
    except ImportError as error:
        raise ImportError('researchutils.chainer.onnx.export needs onnx: {}'.format(
            EXTRA)) from error
    exporter = importlib.import_module('onnx_chainer.export')
    if not exporter._available:     # its own imports failed (a finder turned off)
        raise ImportError('onnx_chainer cannot import on onnx {} (is '
                          'RESEARCHUTILS_CHAINER_COMPAT=0 set?); see researchutils\' '
                          'installation page'.format(onnx.__version__))
    return onnx, exporter


def _check_writable(path: str) -> None:
    """Refuses, naming ``path``, a file that cannot be written, before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, 'cannot write the ONNX file: it is a folder',
                                path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, 'cannot write the ONNX file: its folder {!r} '
                                'does not exist'.format(folder), path)
    # A file made and removed at once: permissions alone do not say it (root, read-only
    # or virtual file systems such as /sys), and the write happens after the forward pass.
    try:
        probe, probe_path = open_temporary(folder, os.path.basename(path))
    except OSError as error:
        # OSError() with an errno gives its subclass: PermissionError for EACCES...
        raise OSError(error.errno, 'cannot write the ONNX file: its folder {!r} refuses a '
                      'new file ({})'.format(folder, error.strerror), path) from error
    probe.close()
    os.remove(probe_path)


def _function_name(node: Any) -> str:
    """The name onnx_chainer looks a FunctionNode's converter up by."""
    if isinstance(node, chainer.function.FunctionAdapter):
        node = node.function
    return str(getattr(node, 'custom_function_node_name', type(node).__name__))


class _LinkPlaces(chainer.LinkHook):
    """Keeps the path (``/encoder``) of the innermost link running, during the forward, and
    refuses a call of a link with arguments its forward does not take, before it runs."""

    name = 'researchutils_onnx_link_places'

    def __init__(self, model: chainer.Link, n_args: int) -> None:
        self.model, self.n_args = model, n_args
        self.paths = {id(link): path for path, link in model.namedlinks()}
        self.running: list[Any] = []
        # (path, number of arguments) of the model's links running, outermost first.
        self.callers: list[tuple[str, int]] = []

    def forward_preprocess(self, args: Any) -> None:
        path = self.paths.get(id(args.link))
        if path is not None:
            check_inner_call(self.model, self.n_args, path, args.link, args.args,
                             args.kwargs, self.callers)
            self.callers.append((path, len(args.args) + len(args.kwargs)))
        self.running.append(args.link)

    def forward_postprocess(self, args: Any) -> None:
        if id(args.link) in self.paths:
            self.callers.pop()
        self.running.pop()

    def place(self) -> str:
        for link in reversed(self.running):
            if id(link) in self.paths:
                return '{} ({})'.format(self.paths[id(link)], type(link).__name__)
        return 'the export itself'


class _FunctionPlaces(chainer.FunctionHook):
    """Records, for each function applied, where in the model it was called."""

    name = 'researchutils_onnx_function_places'

    def __init__(self, links: _LinkPlaces) -> None:
        self.links = links
        self.places: dict[int, tuple[Any, str]] = {}

    def forward_preprocess(self, function: Any, in_data: Any) -> None:
        # The node is kept with its place, so that its id is not reused meanwhile.
        self.places[id(function)] = (function, self.links.place())


def _reachable(outputs: Sequence[chainer.Variable]) -> dict[int, Any]:
    """The function nodes ``outputs`` were computed by, by id (the graph walked back)."""
    found: dict[int, Any] = {}
    pending = [variable.node for variable in outputs]
    while pending:
        creator = pending.pop().creator_node
        if creator is None or id(creator) in found:
            continue
        found[id(creator)] = creator
        pending.extend(creator.inputs)
    return found


def _unconvertible(outputs: Sequence[chainer.Variable], known: Mapping[str, Any],
                   places: _FunctionPlaces) -> list[str]:
    """'Name (in /link (Class))' for each function of the graph no converter knows."""
    found = _reachable(outputs)
    missing = []
    for creator in sorted(found.values(), key=lambda node: node.rank):
        name = _function_name(creator)
        if name not in known:
            where = places.places[id(creator)][1]     # each applied is recorded
            entry = '{} (called in {})'.format(name, where)
            if entry not in missing:
                missing.append(entry)
    return missing


def _named_outputs(outputs: Any, output_names: Sequence[str] | None) -> list[
        tuple[str, chainer.Variable]]:
    """The model's outputs as (name, Variable): a dict's keys, else ``output`` or
    ``output_0``, ``output_1``..., unless ``output_names`` gives them."""
    if isinstance(outputs, chainer.Variable):
        named = [('output', outputs)]
    elif isinstance(outputs, dict):
        named = [(str(key), value) for key, value in outputs.items()]
    elif isinstance(outputs, (list, tuple)):
        named = [('output_{}'.format(i), value) for i, value in enumerate(outputs)]
    else:
        raise TypeError('the model must return a Variable, or a tuple, list or dict of them, '
                        'to be exported; it returned {}'.format(type(outputs).__name__))
    for name, value in named:
        if not isinstance(value, chainer.Variable):
            raise TypeError('the model\'s output {!r} is a {}, not a chainer.Variable: only '
                            'what the model computes can be exported'.format(
                                name, type(value).__name__))
    if output_names is not None:
        if len(output_names) != len(named):
            raise ValueError('output_names has {} names, but the model returns {} outputs: '
                             '{!r}'.format(len(output_names), len(named), output_names))
        named = [(new, value) for new, (_, value) in zip(output_names, named)]
    return named


class _Graph(chainer.Chain):
    """What onnx_chainer exports: the model, its states set from the graph's inputs and
    returned as outputs, and its outputs checked for converters before conversion.

    The model is not a child link (its parameters keep their own names): onnx_chainer asks
    this wrapper for ``namedparams`` and ``namedlinks``, which are the model's.
    """

    def __init__(self, model: chainer.Link, inputs: Sequence[tuple[str, str]],
                 states: Sequence[tuple[str, chainer.Link]], known: Mapping[str, Any],
                 places: _FunctionPlaces, output_names: Sequence[str] | None) -> None:
        super().__init__()
        self._model, self._inputs, self._states = model, inputs, states
        self._n_args = len(inputs) - 2 * len(states)
        self._known, self._places, self._output_names = known, places, output_names
        # Filled by forward; onnx_chainer reads output_names after the forward pass.
        self.names: list[str] = []

    def namedparams(self, include_uninit: bool = True) -> Any:
        return self._model.namedparams(include_uninit)

    def namedlinks(self, skipself: bool = False) -> Any:
        return self._model.namedlinks(skipself)

    def forward(self, *inputs: chainer.Variable) -> list[chainer.Variable]:
        args, state = inputs[:self._n_args], inputs[self._n_args:]
        for (_, link), c, h in zip(self._states, state[::2], state[1::2]):
            link.set_state(c, h)
        named = _named_outputs(self._model(*args), self._output_names)
        # Names given in output_names were checked before the run; a dict's keys and the
        # default names are known only now.
        check_distinct(list(self._inputs) + [
            (name, 'output {}'.format(i)) for i, (name, _) in enumerate(named)]
            + _state_outputs(self._states))
        for path, link in self._states:
            named += [(_state_name(path, 'c_out'), link.c), (_state_name(path, 'h_out'), link.h)]
        outputs, seen = [], {id(value) for value in inputs}
        for _, value in named:
            # One ONNX value per output: a Variable returned twice (L.LSTM's y is its h), or
            # an input returned unchanged, gets an Identity of its own.
            outputs.append(F.identity(value) if id(value) in seen else value)
            seen.add(id(value))
        missing = _unconvertible(outputs, self._known, self._places)
        if missing:
            raise ValueError(
                'cannot export {} to ONNX: no converter for {}. Pass converters={{name: '
                'converter}} to export (see the ONNX tutorial of researchutils), or compute '
                'this part another way'.format(type(self._model).__name__, '; '.join(missing)))
        self.names[:] = [name for name, _ in named]
        return outputs


def _state_name(path: str, which: str) -> str:
    """``lstm/c`` for the state ``c`` of the link ``/lstm``; ``c`` for the model's own."""
    prefix = path.strip('/')
    return '{}/{}'.format(prefix, which) if prefix else which


def _state_outputs(states: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    """``(name, what it names)`` of the state outputs of the links ``states``."""
    return [(_state_name(path, which), 'the state output {} of {!r} (states)'.format(
        which, path)) for path, _ in states for which in ('c_out', 'h_out')]


def _stateful_links(model: chainer.Link, states: Sequence[str]) -> list[tuple[str, Any]]:
    links = dict(model.namedlinks())
    found = []
    for path in states:
        link = links.get(path)
        if link is None:
            raise ValueError('states: {!r} is not a link of the model; its links are {}'.format(
                path, sorted(links)))
        if not (hasattr(link, 'set_state') and hasattr(link, 'c') and hasattr(link, 'h')):
            raise ValueError('states: {!r} is a {}, which has no LSTM state (c, h, '
                             'set_state)'.format(path, type(link).__name__))
        if link.c is None or link.h is None:
            raise ValueError('states: {!r} holds no state yet: run a step or call its '
                             'set_state(c, h) before exporting, to give the state its shape'
                             .format(path))
        found.append((path, link))
    return found


def export(model: chainer.Link, args: Any, path: str | os.PathLike[str], *,
           states: Sequence[str] = (), input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None,
           converters: Mapping[str, Callable[[Any], Any]] | None = None,
           opset_version: int | None = None) -> Any:
    """Exports ``model(*args)`` (in evaluation mode) as an ONNX file.

    Args:
        model (~chainer.Link): The model; its forward pass on ``args`` is traced.
        args (ndarray, ~chainer.Variable, or tuple or list of them): Example inputs, the
            model's positional arguments; the graph takes inputs of their shapes and dtypes.
        path (str or os.PathLike): The ``.onnx`` file, written atomically.
        states (list or tuple of str): Paths of LSTM links (as in ``model.namedlinks()``:
            ``'/'`` the model itself, ``'/lstm'`` a child) whose state ``c`` and ``h``
            become inputs (``lstm/c``, ``lstm/h``) after ``args`` and outputs (``lstm/c_out``,
            ``lstm/h_out``) after the model's; each must hold a state (its shape).
        input_names (sequence of str or None): Names of the inputs ``args``; by default
            ``input`` for one, ``input_0``, ``input_1``... for several.
        output_names (sequence of str or None): Names of the outputs; by default a dict's
            keys, ``output`` for one Variable, ``output_0``... for a tuple.
        converters (dict or None): More converters, FunctionNode class name -> converter
            (onnx_chainer's ``external_converters``), over onnx_chainer's and
            :data:`~researchutils.chainer.onnx.converters.CONVERTERS`.
        opset_version (int or None): ONNX opset, 7 to 12 (:data:`OPSETS`, each tested);
            ``None`` is onnx_chainer's newest, 11.

    Returns:
        onnx.ModelProto: the model written, already checked by ``onnx.checker``.

    Raises:
        ImportError: onnx is not installed (``pip install researchutils[onnx]``).
        TypeError: ``path`` is not a str or os.PathLike; ``args`` holds something else than
            arrays and Variables; the model's forward does not take ``args``, or passes a
            link of the model arguments that link's forward does not take (a ``Classifier``
            given only the inputs: the error names ``model.predictor`` to export instead).
        ValueError: a function of the graph has no converter (named, with the link that
            called it); a path in ``states`` that is not an LSTM link holding a state;
            ``opset_version`` outside :data:`OPSETS`; an empty name, or one name given to
            two inputs or outputs (states included); one Variable given twice in ``args``,
            or a Variable with a history (computed by a function).
        OSError: ``path`` cannot be written (named; its folder refuses a new file);
            nothing is written then, and the model does not run.

    The model's state (the ``c`` and ``h`` of its LSTM links) is as it was before the call.
    See the tutorial ``docs/tutorials/onnx.rst`` for examples with onnxruntime.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import chainer.links as L
        >>> from researchutils.chainer.onnx import export
        >>> path = os.path.join(tempfile.mkdtemp(), 'linear.onnx')
        >>> graph = export(L.Linear(3, 2), np.zeros((1, 3), np.float32), path)
        >>> [value.name for value in graph.graph.input], [v.name for v in graph.graph.output]
        (['input'], ['output'])
    """
    if not isinstance(model, chainer.Link):
        raise TypeError('model must be a chainer.Link, got {!r}'.format(model))
    path = check_path(path, 'path')
    listed = args_list(args)
    if input_names is not None:
        input_names = check_str_list(input_names, 'input_names')
    if output_names is not None:
        output_names = check_str_list(output_names, 'output_names')
    more_converters = check_mapping(converters, 'converters', allow_none=True) or {}
    for function_name, converter in more_converters.items():
        if not isinstance(function_name, str) or not callable(converter):
            raise TypeError('converters must map FunctionNode class names (str) to converter '
                            'functions, got {!r}: {!r}'.format(function_name, converter))
    opset_version = check_int(opset_version, 'opset_version', minimum=OPSETS[0],
                              maximum=OPSETS[-1], allow_none=True)
    if isinstance(states, str) or not isinstance(states, (list, tuple)):
        raise TypeError('states must be a list or tuple of link paths, got {!r}{}'.format(
            states, ' (write [{!r}])'.format(states) if isinstance(states, str) else ''))
    if input_names is not None and len(input_names) != len(listed):
        raise ValueError('input_names has {} names for {} inputs: {!r}'.format(
            len(input_names), len(listed), input_names))
    state_links = _stateful_links(model, states)
    given = 'input {} (input_names)' if input_names is not None else 'input {}'
    if input_names is None:
        input_names = ['input'] if len(listed) == 1 else [
            'input_{}'.format(i) for i in range(len(listed))]
    inputs = [(name, given.format(i)) for i, name in enumerate(input_names)]
    for state_path, link in state_links:
        listed += [link.c.array, link.h.array]
        inputs += [(_state_name(state_path, which), 'the state {} of {!r} (states)'.format(
            which, state_path)) for which in ('c', 'h')]
    check_distinct(inputs + [(name, 'output {} (output_names)'.format(i))
                             for i, name in enumerate(output_names or ())]
                   + _state_outputs(state_links))
    check_forward_takes(model, listed[:len(input_names)])
    _check_writable(path)
    onnx, onnx_chainer_export = _import_onnx()

    extra = {**CONVERTERS, **more_converters}
    known = {**onnx_chainer_export.mapping.converters, **extra}
    links = _LinkPlaces(model, len(input_names))
    functions = _FunctionPlaces(links)
    graph = _Graph(model, inputs, state_links, known, functions, output_names)
    saved = {link: (link.c, link.h) for _, link in model.namedlinks()
             if hasattr(link, 'c') and hasattr(link, 'h')}
    try:
        with warnings.catch_warnings(), links, functions:
            # onnx_chainer calls its converter hook experimental, and warns each time.
            warnings.filterwarnings('ignore', r'.*external_converters.* is experimental',
                                    FutureWarning)
            # It says it was tested with opsets 7 to 11; OPSETS are tested here.
            warnings.filterwarnings('ignore', r'ONNX-Chainer has been tested only with',
                                    UserWarning)
            proto = onnx_chainer_export.export(
                graph, listed, filename=None, opset_version=opset_version,
                input_names=[name for name, _ in inputs], output_names=graph.names,
                external_converters=extra)
    finally:
        for link, (c, h) in saved.items():
            link.c, link.h = c, h
    finish(onnx, proto, proto.opset_import[0].version)
    data = proto.SerializeToString()
    try:
        write_atomically(path, lambda file: file.write(data))
    except OSError as error:
        error.add_note('while writing the ONNX file {!r}'.format(path))
        raise
    return proto
