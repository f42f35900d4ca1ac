"""Writes a traced :class:`~researchutils.pytorch.tracing._trace.Graph` as the source of a
torch module: ``__init__`` builds the links as named submodules, ``forward`` calls them and
torch functions in the traced order.

The converted module is this source, compiled: what :func:`researchutils.pytorch.convert`
returns and what :func:`researchutils.pytorch.write_source` writes are one text. Tests:
``tests/pytorch/tracing/test_write_source.py``.
"""
from __future__ import annotations

import dataclasses
import keyword
import re
from collections.abc import Mapping
from typing import Any

import numpy

from researchutils.pytorch.tracing._call import Call, literal
from researchutils.pytorch.tracing._trace import Graph, Source
from researchutils.pytorch.tracing._twins import renamed, twin
from researchutils.pytorch.tracing.table import FUNCTIONS, returns_tuple

_TAKEN = {'self', 'torch', 'functional', 'ops', 'toolkit'} | set(keyword.kwlist)


@dataclasses.dataclass
class Written:
    """The source, its class name, and where each Chainer value goes: the state-dict key of
    each parameter and persistent array path (``/fc1/W`` -> ``fc1.weight``). Constants are
    written into the source (buffers outside the state dict)."""

    text: str
    class_name: str
    keys: dict[str, str]


def _member(owner: str, name: str) -> str:
    if name.isidentifier() and not keyword.iskeyword(name):
        return '{}.{}'.format(owner, name)
    return '{}.get_submodule({!r})'.format(owner, name) if owner else name


def _link_expression(path: str) -> str:
    expression = 'self'
    for part in path.strip('/').split('/'):
        if part:
            expression = _member(expression, part)
    return expression


def _class_name(model: Any) -> str:
    name = re.sub(r'\W', '_', type(model).__name__)
    return name if name.isidentifier() else 'Converted'


def _snake(name: str) -> str:
    name = re.sub(r'Function$|ND$|2D$', '', name).strip('_') or 'value'
    return re.sub(r'(?<=[a-z0-9])(?=[A-Z][a-z])', '_', name).lower()


class _Writer:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.constructors: dict[str, str] = {}
        self.calls: dict[int, str] = {}
        self.names: set[str] = set(_TAKEN)
        self.constant_lines: list[str] = []
        self.persistent_arrays = {id(array): path for path, array in graph.persistents.items()}

    def unique(self, base: str) -> str:
        base = re.sub(r'\W', '_', base).strip('_') or 'value'
        base = base if base[0].isalpha() else 'v_' + base
        name, count = base, 1
        while name in self.names:
            name, count = '{}_{}'.format(base, count), count + 1
        self.names.add(name)
        return name

    def value_expression(self, path: str) -> str:
        link_path, name = renamed(self.constructors, path)
        return _member(_link_expression(link_path), name)

    def constant(self, array: Any) -> str:
        if id(array) in self.persistent_arrays:
            return self.value_expression(self.persistent_arrays[id(array)])
        array = numpy.asarray(array)
        name = self.unique('constant')
        dtype = 'torch.{}'.format(array.dtype.name if array.dtype != bool else 'bool')
        if array.size and (array == array.flat[0]).all():
            self.constant_lines.append(
                'self.register_buffer({!r}, torch.full({}, {}, dtype={}), persistent=False)'
                .format(name, literal(tuple(array.shape)), literal(array.flat[0].item()),
                        dtype))
        else:
            self.constant_lines.append(
                'self.register_buffer({!r}, torch.tensor({}, dtype={}), persistent=False)'
                .format(name, literal(array.tolist()), dtype))
        return 'self.{}'.format(name)

    def choose_twins(self) -> None:
        """The links that become torch modules: those the graph calls as the link does."""
        for index, step in enumerate(self.graph.steps):
            path = step.link_path
            if path is None or path == '/':    # the model itself is the class written
                continue
            link = self.graph.links[path]
            found = twin(Call(step, [], self.constant), path, link)
            if found is None:
                continue
            constructor, template = found
            if self.constructors.setdefault(path, constructor) == constructor:
                self.calls[index] = template.format(module=_link_expression(path), x='{x}')


def _init_lines(writer: _Writer) -> list[str]:
    graph = writer.graph
    used: dict[str, list[tuple[str, Any, str]]] = {}
    for path, param in graph.params.items():
        link_path, name = path.rpartition('/')[0] or '/', path.rpartition('/')[2]
        used.setdefault(link_path, []).append((name, param.array, 'param'))
    for path, array in graph.persistents.items():
        link_path, name = path.rpartition('/')[0] or '/', path.rpartition('/')[2]
        used.setdefault(link_path, []).append((name, array, 'persistent'))
    lines = []
    built = {'/'}
    for path in sorted(used, key=lambda p: (p.count('/'), p)):
        parts = path.strip('/').split('/')
        for depth in range(1, len(parts) + 1):
            ancestor = '/' + '/'.join(parts[:depth])
            if ancestor in built:
                continue
            built.add(ancestor)
            parent = _link_expression('/' + '/'.join(parts[:depth - 1]))
            constructor = writer.constructors.get(ancestor, 'torch.nn.Module()')
            lines.append(_assign(parent, parts[depth - 1], constructor))
        if path in writer.constructors:
            continue
        owner = _link_expression(path)
        for name, array, kind in used[path]:
            if array is None:
                continue
            dtype = '' if array.dtype == numpy.float32 else ', dtype=torch.{}'.format(
                array.dtype.name)
            empty = 'torch.empty({}{})'.format(literal(tuple(array.shape)), dtype)
            if kind == 'param':
                lines.append('{}.register_parameter({!r}, torch.nn.Parameter({}))'.format(
                    owner, name, empty))
            else:
                lines.append('{}.register_buffer({!r}, {})'.format(owner, name, empty))
    return lines


def _assign(parent: str, name: str, constructor: str) -> str:
    if name.isidentifier() and not keyword.iskeyword(name):
        return '{}.{} = {}'.format(parent, name, constructor)
    return '{}.add_module({!r}, {})'.format(parent, name, constructor)


def _forward_lines(writer: _Writer, inputs: list[str]) -> list[str]:
    graph = writer.graph
    produced: dict[tuple[int, int], str] = {}

    def expression(source: Source) -> str:
        if source.kind == 'output':
            return produced[source.key]
        if source.kind == 'input':
            return inputs[source.key]
        if source.kind in ('param', 'persistent'):
            return writer.value_expression(source.key)
        return writer.constant(source.value)

    lines = []
    for index, step in enumerate(graph.steps):
        args = [expression(source) for source in step.inputs]
        if index in writer.calls:
            code = writer.calls[index].format(x=args[0])
            base = step.link_path.strip('/').split('/')[-1] if step.link_path else 'value'
        else:
            code = FUNCTIONS[step.name](Call(step, args, writer.constant))
            base = _snake(step.name)
        targets = []
        for j, shape in enumerate(step.out_shapes):
            targets.append('_' if shape is None else writer.unique(base))
            if shape is not None:
                produced[(index, j)] = targets[-1]
        if all(target == '_' for target in targets):
            continue
        if len(targets) == 1 and index not in writer.calls and returns_tuple(step.name, args):
            targets[0] += ','
        line = '{} = {}'.format(', '.join(targets), code)
        if len(line) > 80 and len(targets) > 1:    # the targets wrap in parentheses
            line = '({}) = {}'.format(', '.join(targets), code)
        lines.append(line)
    outputs = [(name, expression(source)) for name, source in graph.outputs]
    if graph.output_kind == 'dict':
        lines.append('return {{{}}}'.format(', '.join(
            '{!r}: {}'.format(name, value) for name, value in outputs)))
    elif graph.output_kind == 'single':
        lines.append('return {}'.format(outputs[0][1]))
    else:
        lines.append('return {}{}'.format(', '.join(value for _, value in outputs),
                                          ',' if len(outputs) == 1 else ''))
    return lines


def _groups(line: str) -> list[tuple[int, int, list[int]]]:
    """(open, close, commas) of each closed bracket group of ``line`` holding commas of its
    own, outermost first."""
    found: list[tuple[int, int, int, list[int]]] = []
    stack: list[tuple[int, list[int]]] = []
    quote = ''
    for i, char in enumerate(line):
        if quote:
            quote = '' if char == quote else quote
        elif char in '\'"':
            quote = char
        elif char in '([{':
            stack.append((i, []))
        elif char in ')]}' and stack:
            start, commas = stack.pop()
            if commas:
                found.append((len(stack), start, i, commas))
        elif char == ',' and stack:
            stack[-1][1].append(i)
    return [(start, end, commas) for _, start, end, commas in sorted(found)]


def _wrap(line: str, limit: int = 100) -> list[str]:
    """``line`` broken at the commas of its first call's arguments, each continuation
    aligned with the parenthesis, so that the lines fit ``limit`` (ruff's line length)."""
    if len(line) <= limit:
        return [line]
    groups = _groups(line)
    if not groups:
        return [line]
    start, end, commas = groups[0]
    starts = [start + 1] + [comma + 1 for comma in commas]
    pieces = [line[a:b].strip() for a, b in zip(starts, commas + [end])]
    pieces = [piece for piece in pieces if piece]
    pieces[-1] += line[end:]
    head = line[:start + 1]
    if start + 1 <= limit // 2:
        indent = ' ' * (start + 1)
        lines, current = [], head
    else:    # far right: a hanging indent under the line's own
        indent = ' ' * (len(line) - len(line.lstrip()) + 4)
        lines, current = [head], indent
    for i, piece in enumerate(pieces):
        text = piece + (',' if i < len(pieces) - 1 else '')
        fresh = current in (head, indent)
        joined = current + ('' if fresh else ' ') + text
        if len(joined) <= limit or fresh:
            current = joined
        else:
            lines.append(current)
            current = indent + text
    lines.append(current)
    return [wrapped for part in lines for wrapped in _wrap(part, limit)]


def write(graph: Graph) -> Written:
    """The module's source for ``graph``."""
    writer = _Writer(graph)
    writer.choose_twins()
    inputs = [writer.unique(name.replace('/', '_')) for name in graph.input_names]
    init = _init_lines(writer)
    forward = _forward_lines(writer, inputs)
    init += writer.constant_lines
    class_name = _class_name(graph.model)
    needs_ops = any('ops.' in line for line in forward)
    needs_functional = any('functional.' in line for line in forward)
    header = ['"""{} converted from Chainer by researchutils.pytorch.write_source."""'.format(
        class_name), 'import torch']
    if needs_functional:
        header.append('from torch.nn import functional')
    ours = ['from researchutils.pytorch import functions as toolkit'] * any(
        'toolkit.' in line for line in forward)
    ours += ['from researchutils.pytorch.tracing import ops'] * needs_ops
    if ours:
        header += [''] + ours
    body = header + ['', '', 'class {}(torch.nn.Module):'.format(class_name),
                     '    """The traced forward of Chainer\'s {}; shapes fixed at trace '
                     'time."""'.format(type(graph.model).__name__), '',
                     '    def __init__(self) -> None:', '        super().__init__()']
    body += [part for line in init for part in _wrap('        ' + line)]
    body += [''] + _wrap('    def forward(self, {}):'.format(', '.join(inputs)))
    body += [part for line in forward for part in _wrap('        ' + line)]
    keys = {}
    for path in list(graph.params) + list(graph.persistents):
        link_path, name = renamed(writer.constructors, path)
        prefix = link_path.strip('/').replace('/', '.')
        keys[path] = '{}.{}'.format(prefix, name) if prefix else name
    return Written('\n'.join(body) + '\n', class_name, keys)


def state_dict(written: Written, graph: Graph, module: Any) -> dict[str, Any]:
    """The module's state dict filled from the Chainer model's arrays."""
    import torch

    state = module.state_dict()
    arrays: Mapping[str, Any] = {**{path: param.array for path, param in graph.params.items()},
                                 **graph.persistents}
    for path, key in written.keys.items():
        if arrays[path] is not None and key in state:
            state[key] = torch.from_numpy(numpy.array(arrays[path]))
    return dict(state)
