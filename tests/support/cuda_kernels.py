"""The CUDA kernels of researchutils and of the Chainer code it runs on the GPU, from the source.

``tests/support/gpu_compile.py`` builds CuPy's source for each and compiles it with NVRTC;
``python -m tests.support.cuda_kernels`` prints the list. Like ``tests/support/cupy_names``
(whose file walk this reuses) the list is read from the code, so it follows the code:

1. The files: every ``.py`` file of researchutils, its examples and benchmarks, and the
   Chainer files that ``cupy_names.collect`` reaches from researchutils, its tests, benchmarks
   and examples (``F.lstm``, ``F.clip``, the convolutions and ``chainer/utils/conv.py``, the
   activations and losses, the optimizers ...), plus :data:`DYNAMIC_FILES`, the Chainer files
   that no name leads to (Variable's arithmetic operators).
2. In each file, every call that makes a kernel: ``chainer.backends.cuda.elementwise`` /
   ``reduce`` / ``raw`` / ``fuse`` and ``cupy.ElementwiseKernel`` / ``ReductionKernel`` /
   ``RawKernel`` / ``RawModule`` / ``fuse``, however the module imported them (aliases are
   resolved as in ``cupy_names``). A wrapper that only passes its own parameters on
   (``chainer.backends.cuda.elementwise`` itself) defines no kernel: its callers do.
3. Each argument is evaluated from the source: string literals, the module's own constants
   (``preamble=_preamble``), concatenation, ``%`` and ``str.format`` of those. An argument
   that depends on a run-time value cannot be evaluated: the kernel is then listed with the
   reason and never compiled (``Kernel.problem``).

Needs Chainer (to find its files and import its modules for their constants), not CuPy.
Tests: ``tests/support/test_cuda_kernels.py``.
"""
import ast
import collections
import importlib
import inspect
import os
import sys

from tests.support import cupy_names

REPO = cupy_names.REPO

# Our folders whose files may define kernels (tests only check them).
OUR_FOLDERS = ('researchutils', 'examples', 'benchmarks')

# Chainer files on our GPU paths that no name in the source leads to, and why they are.
DYNAMIC_FILES = {
    'chainer/functions/math/basic_math.py':
        "Variable's arithmetic operators (x * y, 1 - t, -x, x ** 2), installed on "
        'chainer.Variable by this module: grad_clip_lstm double backward, '
        'average_k_step_squared_error backward, ConvLSTM and ActionConditionedLSTM steps',
}

# CuPy's own kernels that our code launches through an array operator, which no name shows:
# CuPy name -> (file, the source text, what it is). The line is found in the file, so a
# stale entry fails (tests/support/test_cuda_kernels.py).
OPERATOR_KERNELS = {
    'cupy.add': ('researchutils/chainer/models/data_parallel.py', 'master_param.grad += grad',
                 'the data-parallel gradient sum (DataParallelChainerNetwork.'
                 'cumulate_gradients)'),
}

# What each kernel-making callable is, by the dotted name the source resolves to.
MAKERS = {
    'cupy.ElementwiseKernel': 'elementwise',
    'cupy.ReductionKernel': 'reduction',
    'cupy.RawKernel': 'raw',
    'cupy.RawModule': 'raw module',
    'cupy.fuse': 'fuse',
    'chainer.backends.cuda.elementwise': 'elementwise',
    'chainer.backends.cuda.reduce': 'reduction',
    'chainer.backends.cuda.raw': 'raw',
    'chainer.backends.cuda.fuse': 'fuse',
}
for _name, _kind in list(MAKERS.items()):
    if _name.startswith('chainer.backends.cuda.'):
        MAKERS['chainer.cuda.' + _name[len('chainer.backends.cuda.'):]] = _kind


# The argument lists of the makers (CuPy 14's, the same names Chainer's wrappers pass on),
# so that an argument is found by name whether the source passes it by position or keyword.
def _elementwise(in_params, out_params, operation, name='kernel', reduce_dims=True,
                 preamble='', no_return=False, return_tuple=False, loop_prep='',
                 after_loop='', options=()):
    """cupy.ElementwiseKernel / chainer.backends.cuda.elementwise."""


def _reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
               name='reduce_kernel', reduce_type=None, reduce_dims=True, preamble='',
               options=()):
    """cupy.ReductionKernel / chainer.backends.cuda.reduce."""


def _raw(code, name, options=(), backend='nvrtc', translate_cucomplex=False,
         enable_cooperative_groups=False, jitify=False):
    """cupy.RawKernel / chainer.backends.cuda.raw."""


_UNBUILDABLE = {
    'fuse': 'a cupy.fuse kernel: CuPy builds its source by tracing the Python function '
            'with device arrays',
    'raw module': 'a cupy.RawModule: its kernels are named only when the code runs',
}

_SIGNATURES = {'elementwise': inspect.signature(_elementwise),
               'reduction': inspect.signature(_reduction),
               'raw': inspect.signature(_raw)}


class Kernel(collections.namedtuple('Kernel', 'kind where function arguments problem')):
    """One kernel definition found in the source.

    ``kind``: 'elementwise', 'reduction', 'raw', 'raw module' or 'fuse'; ``where``: "file:line"
    of the call that makes it; ``function``: the enclosing function or class ("<module>" at
    module level); ``arguments``: the maker's arguments by name, evaluated (None when
    ``problem`` is set); ``problem``: why the kernel's source cannot be built without running
    the code, or None.
    """

    __slots__ = ()

    @property
    def name(self):
        """The kernel's name argument, or its location when that is not known."""
        if self.arguments and isinstance(self.arguments.get('name'), str):
            return self.arguments['name']
        return '<{}>'.format(self.where)


class _Unresolved(Exception):
    """An expression whose value is only known when the code runs."""


class _Evaluator:
    """Evaluates the constant expressions kernel definitions are written with."""

    def __init__(self, namespace, import_error=None):
        self._namespace = namespace
        self._import_error = import_error

    def __call__(self, node):
        method = getattr(self, '_' + type(node).__name__, None)
        if method is None:
            raise _Unresolved(ast.unparse(node))
        return method(node)

    def _Constant(self, node):
        return node.value

    def _Name(self, node):
        value = self._namespace.get(node.id, _Unresolved)
        if value is _Unresolved or not isinstance(value, (str, int, float, bool, tuple)):
            if self._import_error is not None:
                raise _Unresolved('{} (the module did not import: {})'.format(
                    node.id, self._import_error))
            raise _Unresolved(node.id)
        return value

    def _Tuple(self, node):
        return tuple(self(element) for element in node.elts)

    _List = _Tuple

    def _BinOp(self, node):
        left, right = self(node.left), self(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Mod):
            return left % right
        if isinstance(node.op, ast.Mult):
            return left * right
        raise _Unresolved(ast.unparse(node))

    def _JoinedStr(self, node):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.format_spec is not None or value.conversion != -1:
                    raise _Unresolved(ast.unparse(node))
                parts.append(str(self(value.value)))
            else:
                parts.append(self(value))
        return ''.join(parts)

    def _Call(self, node):
        # 'text'.format(...) with constant arguments, the one call kernel sources use.
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == 'format':
            template = self(func.value)
            if isinstance(template, str):
                args = [self(arg) for arg in node.args]
                kwargs = {kw.arg: self(kw.value) for kw in node.keywords if kw.arg}
                if len(kwargs) == len(node.keywords):
                    return template.format(*args, **kwargs)
        raise _Unresolved(ast.unparse(node))


def _enclosing_names(tree):
    """id(node) -> qualified name of the function or class it is in."""
    owners = {}

    def visit(node, qualname):
        for child in ast.iter_child_nodes(node):
            name = qualname
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = child.name if qualname == '<module>' else qualname + '.' + child.name
            owners[id(child)] = name
            visit(child, name)

    visit(tree, '<module>')
    return owners


def _function_parameters(tree):
    """id(node) -> the parameter names of the innermost function around it."""
    params = {}

    def visit(node, names):
        for child in ast.iter_child_nodes(node):
            inner = names
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = child.args
                inner = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
                inner |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            params[id(child)] = inner
            visit(child, inner)

    visit(tree, frozenset())
    return params


def _is_pass_through(call, parameters):
    """Whether every argument of ``call`` is a parameter of the function it is in."""
    values = list(call.args) + [kw.value for kw in call.keywords]
    values = [v.value if isinstance(v, ast.Starred) else v for v in values]
    return bool(values) and all(isinstance(v, ast.Name) and v.id in parameters
                                for v in values)


def _bind(kind, call, evaluate):
    """The maker's arguments by name, evaluated; raises _Unresolved naming the first that is not."""
    if any(isinstance(arg, ast.Starred) for arg in call.args) or \
            any(kw.arg is None for kw in call.keywords):
        raise _Unresolved('*args or **kwargs: ' + ast.unparse(call))
    bound = _SIGNATURES[kind].bind(*call.args, **{kw.arg: kw.value for kw in call.keywords})
    arguments = {}
    for name, node in bound.arguments.items():
        try:
            arguments[name] = evaluate(node)
        except _Unresolved as error:
            raise _Unresolved('argument {} = {} depends on run-time value {}'.format(
                name, ast.unparse(node), error)) from None
    for name, parameter in _SIGNATURES[kind].parameters.items():
        arguments.setdefault(name, parameter.default)
    return arguments


def _module_namespace(module_name):
    """(the module's globals, None), or ({}, the error) when it does not import here."""
    try:
        return vars(importlib.import_module(module_name)), None
    except Exception as error:   # an optional dependency missing: its constants are unknown
        return {}, '{}: {}'.format(type(error).__name__, error)


def kernels_in_file(path, module_name, label):
    """Every kernel definition in one file, in source order."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    aliases = cupy_names.module_aliases(tree, module_name)
    owners = _enclosing_names(tree)
    parameters = _function_parameters(tree)
    evaluate = None
    found = []
    decorators = {id(d) for node in ast.walk(tree)
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  for d in node.decorator_list}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if MAKERS.get(cupy_names.expand_alias(cupy_names.dotted_name(target) or '',
                                                      aliases)) == 'fuse':
                    found.append(Kernel('fuse', '{}:{}'.format(label, decorator.lineno),
                                        node.name, None, _UNBUILDABLE['fuse']))
            continue
        if not isinstance(node, ast.Call) or id(node) in decorators:
            continue
        dotted = cupy_names.dotted_name(node.func)
        kind = MAKERS.get(cupy_names.expand_alias(dotted, aliases) if dotted else None)
        if kind is None or _is_pass_through(node, parameters.get(id(node), ())):
            continue
        where = '{}:{}'.format(label, node.lineno)
        function = owners.get(id(node), '<module>')
        if kind not in _SIGNATURES:
            found.append(Kernel(kind, where, function, None, _UNBUILDABLE[kind]))
            continue
        if evaluate is None:
            evaluate = _Evaluator(*_module_namespace(module_name))
        try:
            found.append(Kernel(kind, where, function, _bind(kind, node, evaluate), None))
        except _Unresolved as error:
            found.append(Kernel(kind, where, function, None, str(error)))
        except TypeError as error:     # the call does not fit the maker's arguments
            found.append(Kernel(kind, where, function, None,
                                'arguments do not fit {}: {}'.format(kind, error)))
    return sorted(found, key=lambda k: int(k.where.rsplit(':', 1)[1]))


def operator_kernel_users(repo=REPO):
    """CuPy name -> ["file:line (what)"] for :data:`OPERATOR_KERNELS`; raises if one is stale."""
    users = {}
    for name, (relative, text, what) in OPERATOR_KERNELS.items():
        with open(os.path.join(repo, relative), encoding='utf-8') as f:
            lines = [number for number, line in enumerate(f, 1) if text in line]
        if not lines:
            raise LookupError('OPERATOR_KERNELS is stale: {!r} is no longer in {}'.format(
                text, relative))
        users[name] = ['{}:{} ({})'.format(relative, number, what) for number in lines]
    return users


def chainer_files():
    """The Chainer files on our GPU paths (relative, '/'-separated), in the order reached."""
    files = [f.replace(os.sep, '/') for f in cupy_names.collect().files]
    return files + [f for f in DYNAMIC_FILES if f not in files]


def collect(repo=REPO):
    """Every kernel definition, ours first (by file), then Chainer's in the order reached."""
    kernels = []
    for folder in OUR_FOLDERS:
        for dirpath, dirnames, filenames in sorted(os.walk(os.path.join(repo, folder))):
            dirnames.sort()
            for filename in sorted(filenames):
                if not filename.endswith('.py'):
                    continue
                path = os.path.join(dirpath, filename)
                relative = os.path.relpath(path, repo)
                module = relative[:-3].replace(os.sep, '.')
                if module.endswith('.__init__'):
                    module = module[:-len('.__init__')]
                kernels += kernels_in_file(path, module, relative.replace(os.sep, '/'))
    root = cupy_names._chainer_root()
    for relative in chainer_files():
        module = relative[:-3].replace('/', '.')
        if module.endswith('.__init__'):
            module = module[:-len('.__init__')]
        kernels += kernels_in_file(os.path.join(root, relative), module, relative)
    return kernels


def main():
    for kernel in collect():
        state = kernel.problem or ('in {} out {}'.format(
            kernel.arguments.get('in_params'), kernel.arguments.get('out_params'))
            if kernel.kind != 'raw' else 'raw source')
        print('{:12} {:40} {} ({}): {}'.format(kernel.kind, kernel.name, kernel.where,
                                              kernel.function, state))
    return 0


if __name__ == '__main__':
    sys.exit(main())
