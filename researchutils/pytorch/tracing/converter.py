"""Any Chainer model into PyTorch: :func:`convert` (a trainable module) and
:func:`write_source` (the same module as a Python file a person keeps).

The model's forward runs once on example inputs, traced as
:func:`researchutils.chainer.onnx.export` traces it (its link hooks, its ``states``, its
checks); each function of the graph becomes the torch expression of one table
(:data:`researchutils.pytorch.tracing.table.FUNCTIONS`), the links Chainer's examples build models
from become torch's own modules (Linear, Conv2d, ConvTranspose2d, Embedding, BatchNorm), and
every other link a module holding its parameters under Chainer's names. The module returned
is that source, compiled, with the model's weights copied in.

What it guards against: a function without a torch entry stops the conversion naming it and
the link that called it, before anything is built or written; a path that cannot be written
is refused, naming it, before the model runs; the file is written atomically.

Tests: ``tests/pytorch/tracing/test_convert.py``, ``test_write_source.py``, ``test_models.py``.
"""
from __future__ import annotations

import linecache
import os
from collections.abc import Sequence
from typing import Any

import chainer
import torch

from researchutils._checks import check_bool, check_path, check_str_list
from researchutils._files import write_text
from researchutils.chainer.onnx.exporter import _check_writable
from researchutils.pytorch.tracing._source import Written, state_dict, write
from researchutils.pytorch.tracing._trace import Graph, trace
from researchutils.pytorch.tracing.table import FUNCTIONS

__all__ = ['convert', 'write_source']

_SOURCE = '_researchutils_source'


def _check_states(states: object) -> Sequence[str]:
    if isinstance(states, str) or not isinstance(states, (list, tuple)):
        raise TypeError('states must be a list or tuple of link paths, got {!r}{}'.format(
            states, ' (write [{!r}])'.format(states) if isinstance(states, str) else ''))
    return check_str_list(list(states), 'states')


def _traced(model: Any, args: Any, train: object, states: object, input_names: object,
            output_names: object) -> Graph:
    if not isinstance(model, chainer.Link):
        raise TypeError('model must be a chainer.Link, got {!r}'.format(model))
    train = check_bool(train, 'train')
    names = None if input_names is None else check_str_list(input_names, 'input_names')
    outputs = None if output_names is None else check_str_list(output_names, 'output_names')
    return trace(model, args, train=train, states=_check_states(states), input_names=names,
                 output_names=outputs, known=FUNCTIONS)


def _build(written: Written, graph: Graph) -> torch.nn.Module:
    filename = '<researchutils.pytorch.convert {}>'.format(written.class_name)
    # Registered so that tracebacks and inspect show the converted forward's lines.
    linecache.cache[filename] = (len(written.text), None, written.text.splitlines(True),
                                 filename)
    namespace: dict[str, Any] = {'__name__': 'researchutils_converted'}
    exec(compile(written.text, filename, 'exec'), namespace)
    module: torch.nn.Module = namespace[written.class_name]()
    module.load_state_dict(state_dict(written, graph, module))
    module.train(graph.train)
    setattr(module, _SOURCE, written.text)
    return module


def convert(model: chainer.Link, args: Any, *, train: bool = False,
            states: Sequence[str] = (), input_names: Sequence[str] | None = None,
            output_names: Sequence[str] | None = None) -> torch.nn.Module:
    """Converts ``model`` into a trainable ``torch.nn.Module`` that computes its forward.

    ``model(*args)`` runs once (the model's state and BatchNorm statistics are left as they
    were); the functions it applied become torch operations in the same order. Control flow
    that depends on values (an ``if`` on an array, a loop over a length) is fixed at trace
    time, as in the ONNX export: the module computes the path the example inputs took, for
    inputs of the same shapes. Dropout appears only in a training trace (``train=True``),
    where it becomes torch's dropout, active in ``module.train()`` mode.

    Args:
        model (~chainer.Link): The model.
        args (ndarray, ~chainer.Variable, or tuple or list of them): Example inputs, the
            model's positional arguments.
        train (bool): Trace with ``chainer.config.train`` set (BatchNormalization on batch
            statistics, Dropout); the module is returned in that mode.
        states (list or tuple of str): Paths of LSTM links whose state ``c``, ``h`` becomes
            inputs after ``args`` and outputs after the model's, as in
            :func:`researchutils.chainer.onnx.export`.
        input_names (sequence of str or None): Names of the forward's arguments; by default
            ``input`` or ``input_0``, ``input_1``...
        output_names (sequence of str or None): Names of the outputs (a dict's keys are used
            for a model returning a dict).

    Returns:
        torch.nn.Module: parameters (``nn.Parameter``) and persistent values (buffers) named
        after the links' paths (``fc1.weight`` for an ``L.Linear`` at ``/fc1``, Chainer's own
        names for other links); its forward takes torch tensors.

    Raises:
        TypeError: ``model`` is not a Link; ``args``, names or ``states`` of another type.
        ValueError: a function has no torch operation (named, with the link that called
            it); ``states`` that are no LSTM links holding a state; names that clash.

    Example:
        >>> import numpy as np, torch
        >>> import chainer, chainer.functions as F, chainer.links as L
        >>> from researchutils.pytorch import convert
        >>> class MLP(chainer.Chain):
        ...     def __init__(self):
        ...         super().__init__()
        ...         with self.init_scope():
        ...             self.l1, self.l2 = L.Linear(3, 4), L.Linear(4, 2)
        ...     def forward(self, x):
        ...         return self.l2(F.relu(self.l1(x)))
        >>> module = convert(MLP(), np.ones((1, 3), np.float32))
        >>> [name for name, _ in module.named_parameters()]
        ['l1.weight', 'l1.bias', 'l2.weight', 'l2.bias']
        >>> tuple(module(torch.ones(1, 3)).shape)
        (1, 2)
        >>> sorted(name for name, _ in convert(L.Linear(3, 2), np.ones((1, 3), np.float32))
        ...        .named_parameters())    # the model itself keeps Chainer's names
        ['W', 'b']
    """
    graph = _traced(model, args, train, states, input_names, output_names)
    return _build(write(graph), graph)


def write_source(module_or_model: torch.nn.Module | chainer.Link, path: str | os.PathLike[str],
                 args: Any = None, *, train: bool = False, states: Sequence[str] = (),
                 input_names: Sequence[str] | None = None,
                 output_names: Sequence[str] | None = None) -> str:
    """Writes a converted model as a Python file: one class, its ``__init__`` building the
    links as named submodules, its ``forward`` the traced operations in order.

    The file imports only torch and ``researchutils.pytorch``; the class built from it and
    given the Chainer model's weights (:func:`researchutils.pytorch.load_chainer_weights`) is
    the converted module. Constants the trace found (arrays the forward made, not a link's)
    are written into the file.

    Args:
        module_or_model: A module :func:`convert` returned, or a Chainer model, which is
            converted first (then ``args`` and the keywords are :func:`convert`'s).
        path (str or os.PathLike): The ``.py`` file, written atomically.
        args: The example inputs, for a Chainer model only.
        train, states, input_names, output_names: As for :func:`convert`.

    Returns:
        str: the source written.

    Raises:
        TypeError: ``module_or_model`` is neither a converted module nor a Chainer Link;
            ``path`` is not a str or os.PathLike.
        ValueError: ``args`` missing for a model, or given with a module.
        OSError: ``path`` cannot be written (named), raised before the model runs.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import chainer.links as L
        >>> from researchutils.pytorch import write_source
        >>> path = os.path.join(tempfile.mkdtemp(), 'linear.py')
        >>> text = write_source(L.Linear(3, 2), path, np.ones((1, 3), np.float32))
        >>> print(text[text.index('    def forward'):].strip())
        def forward(self, input):
                linear = functional.linear(input, self.W, self.b)
                return linear
    """
    path = check_path(path, 'path')
    if isinstance(module_or_model, chainer.Link):
        if args is None:
            raise ValueError('args: the example inputs are needed to convert a Chainer model, '
                             'got None')
        _check_writable(path)
        graph = _traced(module_or_model, args, train, states, input_names, output_names)
        text = write(graph).text
    elif isinstance(module_or_model, torch.nn.Module):
        kept = getattr(module_or_model, _SOURCE, None)
        if not isinstance(kept, str):
            raise TypeError('module_or_model must be a module researchutils.pytorch.convert '
                            'returned, or a chainer.Link; got a {} of another '
                            'origin'.format(type(module_or_model).__name__))
        text = kept
        if args is not None:
            raise ValueError('args: a converted module is written as it is; got args {!r}'
                             .format(type(args).__name__))
        _check_writable(path)
    else:
        raise TypeError('module_or_model must be a converted torch.nn.Module or a '
                        'chainer.Link, got {!r}'.format(type(module_or_model).__name__))
    try:
        write_text(path, text)
    except OSError as error:
        error.add_note('while writing the PyTorch source {!r}'.format(path))
        raise
    return text
