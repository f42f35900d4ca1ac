"""Which ``cupy`` / ``cupyx`` names researchutils and the Chainer code it runs on the GPU use.

``tests/test_cupy_names.py`` checks every one of them against the installed CuPy; running
``python -m tests.support.cupy_names`` prints the table (name, then every user as
``file:line``). The list is read from the source, not written by hand, so it follows the code:

1. Every ``.py`` file of researchutils, its tests, benchmarks and examples is parsed.
   Attribute chains rooted at a name bound to CuPy (``import cupy``, ``from
   chainer.backends import cuda`` then ``cuda.cupy.empty_like``, ``cuda.elementwise`` ...)
   are resolved through the module's imports and module-level
   assignments.
2. The Chainer names it uses (``F.lstm``, ``L.Convolution2D``, ``chainer.optimizers.Adam``,
   ``from chainer.utils import conv`` ...) are resolved, by importing Chainer, to the files
   that define them. Files under ``chainer/functions``, ``links``, ``optimizers`` and
   ``initializers`` are followed the same way (a link's file leads to the functions it
   calls); the other Chainer files reached (``chainer/utils/conv.py``, ``chainer/backend.py``)
   are read but not followed, since following them would reach all of Chainer.
3. :data:`INFRASTRUCTURE` adds the device-handling files every GPU run goes through.
4. In those Chainer files ``xp.NAME`` (an array module that is CuPy on the GPU path) counts
   as ``cupy.NAME``, except in branches where ``xp`` is known not to be CuPy (``if xp is
   chainerx:``, the else of ``if xp is cuda.cupy:``); the keyword arguments of each call are
   kept too; and ``chainer.backends.cuda.cupy`` / ``.cuda`` / ``.cudnn`` / ``.libcudnn``
   / ``.cublas`` ... are the CuPy objects that ``chainer/backends/cuda.py`` binds them to (read
   from that file's own imports and assignments, not from a table here).

What no parse can see is listed by hand in :data:`DYNAMIC`, each with its user.
"""
import ast
import collections
import functools
import importlib
import inspect
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOTS = ('cupy', 'cupyx')

# Chainer files on every GPU path whatever function runs: device objects, transfers,
# get_array_module, the memory pool and streams, the kernel helpers.
INFRASTRUCTURE = (
    'chainer/backends/cuda.py',     # to_gpu / to_cpu, elementwise / reduce / raw, memory pool
    'chainer/backends/_cpu.py',     # CpuDevice.send: GPU arrays back to NumPy
    'chainer/_backend.py',          # Device base, get_device, using_device
    'chainer/backend.py',           # get_array_module, copyto
    'chainer/utils/__init__.py',    # force_array, size_of_shape (called by most functions)
    'chainer/link.py',              # Link.to_device / to_gpu, params on the device
    'chainer/variable.py',          # Variable.to_device, grad accumulation, array checks
    'chainer/optimizer.py',         # update_core_gpu dispatch, hooks on GPU params
    'chainer/initializer.py',       # generate_array on the device's xp
)

# Uses that no attribute chain shows: methods and attributes of CuPy objects that Chainer
# reaches through an array or a device it was handed, and the pool users reach through
# ``chainer.backends.cuda.memory_pool``.
DYNAMIC = {
    'cupy.ndarray.device': 'chainer/backends/cuda.py: GpuDevice.from_array, '
                           'get_device_from_array, _array_to_gpu',
    'cupy.ndarray.get': 'chainer/backends/cuda.py _array_to_cpu, chainer/backends/_cpu.py '
                        '(to_cpu, CpuDevice.send)',
    'cupy.ndarray.flags': 'chainer/functions/activation/*.py, connection/*.py: '
                          'x.flags.c_contiguous before a cuDNN call',
    'cupy.cuda.Device.id': 'chainer/backends/cuda.py: GpuDevice.name (\'@cupy:N\') and repr',
    'cupy.cuda.Device.use': 'chainer/backends/cuda.py: GpuDevice.use',
    'cupy.cuda.Device.synchronize': 'benchmarks/_timing.py synchronizer, '
                                    'benchmarks/bench_data_parallel.py',
    'cupy.cuda.Device.__enter__': 'chainer/backends/cuda.py: `with device:` in _array_to_gpu',
    'cupy.cuda.Stream.__enter__': 'chainer/backends/cuda.py: `with stream:` in _array_to_gpu',
    'cupy.cuda.Stream.synchronize': 'users of chainer.backends.cuda.Stream',
    'cupy.cuda.MemoryPool.malloc': 'chainer/backends/cuda.py memory_pool (users: '
                                   'chainer.backends.cuda.memory_pool)',
    'cupy.cuda.MemoryPool.free_all_blocks': 'users of chainer.backends.cuda.memory_pool',
    'cupy.cuda.MemoryPool.used_bytes': 'users of chainer.backends.cuda.memory_pool',
}

# The files that check the names: what they name is not a use.
_ABOUT_NAMES = (os.path.join('tests', 'test_cupy_names.py'),
                os.path.join('tests', 'support', 'cupy_names.py'),
                os.path.join('tests', 'support', 'test_cupy_names.py'))

# Chainer files whose ``xp`` is NumPy-only: their ``xp.NAME`` are not CuPy names.
_NOT_FOLLOWED = ('chainer/backends/intel64.py',)


def dotted_name(node):
    """``a.b.c`` for an ast.Attribute/ast.Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return '.'.join(reversed(parts))


def _not_cupy_branches(tree):
    """Ids of the nodes where ``xp`` is known not to be CuPy.

    That is the body of ``if xp is chainerx:`` / ``if xp is numpy:`` and the else branch of
    ``if xp is cuda.cupy:`` (and the same with ``is not``, branches swapped).
    """
    ids = set()
    for node in ast.walk(tree):
        test = getattr(node, 'test', None) if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
                isinstance(test.ops[0], (ast.Is, ast.IsNot)) and
                isinstance(test.left, ast.Name) and test.left.id == 'xp'):
            continue
        other = dotted_name(test.comparators[0]) or ''
        if other.split('.')[-1] == 'cupy':
            branch_is_cupy = True
        elif other in ('chainerx', 'numpy', 'np'):
            branch_is_cupy = False
        else:
            continue
        if isinstance(test.ops[0], ast.IsNot):
            branch_is_cupy = not branch_is_cupy
        for statement in (node.orelse if branch_is_cupy else node.body):
            ids.update(id(n) for n in ast.walk(statement))
    return ids


def module_aliases(tree, module_name):
    """Names bound at module level by imports and ``name = a.b`` assignments -> dotted target."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split('.')[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = '.'.join(module_name.split('.')[:-node.level] + ([base] if base else []))
            for alias in node.names:
                aliases[alias.asname or alias.name] = base + '.' + alias.name
    for node in tree.body:
        if isinstance(node, ast.If) or isinstance(node, ast.Try):
            body = [n for n in ast.walk(node) if isinstance(n, ast.Assign)]
        else:
            body = [node] if isinstance(node, ast.Assign) else []
        for assign in body:
            target = assign.targets[0]
            value = dotted_name(assign.value)
            if isinstance(target, ast.Name) and value and value.split('.')[0] in aliases:
                aliases.setdefault(target.id, expand_alias(value, aliases))
    return aliases


def expand_alias(dotted, aliases):
    head, _, rest = dotted.partition('.')
    if head not in aliases:
        return None
    target = aliases[head]
    return target + ('.' + rest if rest else '')


class _Collector:
    def __init__(self):
        self.uses = collections.defaultdict(set)    # cupy name -> {"file:line"}
        self.keywords = collections.defaultdict(set)   # cupy callable -> {(keyword, "file:line")}
        self.chainer_refs = collections.defaultdict(set)   # dotted chainer name -> users
        self._cuda_exports = None

    def cuda_exports(self):
        """What ``chainer.backends.cuda.NAME`` is, for the names it binds to CuPy objects."""
        if self._cuda_exports is None:
            path = _chainer_file('chainer/backends/cuda.py')
            with open(path, encoding='utf-8') as f:
                tree = ast.parse(f.read())
            aliases = module_aliases(tree, 'chainer.backends.cuda')
            self._cuda_exports = {name: target for name, target in aliases.items()
                                  if target and target.split('.')[0] in ROOTS}
        return self._cuda_exports

    def to_cupy(self, full):
        """The CuPy name a resolved dotted name stands for, or None."""
        if full is None:
            return None
        for prefix in ('chainer.backends.cuda.', 'chainer.cuda.'):
            if full.startswith(prefix):
                head, _, rest = full[len(prefix):].partition('.')
                target = self.cuda_exports().get(head)
                if target is None:
                    return None
                return target + ('.' + rest if rest else '')
        return full if full.split('.')[0] in ROOTS else None

    def _use(self, name, where, keywords):
        self.uses[name].add(where)
        for keyword in keywords or ():
            self.keywords[name].add((keyword, where))

    def walk(self, path, module_name, label, xp_is_cupy):
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        aliases = module_aliases(tree, module_name)
        # Chains nested in a longer chain (``cupy.cuda`` inside ``cupy.cuda.Device``) are
        # reported by the longest one only.
        inner = set()
        calls = {}
        not_cupy = _not_cupy_branches(tree) if xp_is_cupy else set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))
            elif isinstance(node, ast.Call):
                calls[id(node.func)] = [kw.arg for kw in node.keywords if kw.arg]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.split('.')[0] in ROOTS:
                for alias in node.names:
                    self.uses[node.module + '.' + alias.name].add(
                        '{}:{}'.format(label, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split('.')[0] in ROOTS:
                        self.uses[alias.name].add('{}:{}'.format(label, node.lineno))
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue
            dotted = dotted_name(node)
            if dotted is None:
                continue
            where = '{}:{}'.format(label, node.lineno)
            parts = dotted.split('.')
            if xp_is_cupy and 'xp' in parts[:-1]:
                if id(node) in not_cupy:
                    continue
                rest = parts[parts.index('xp') + 1:]
                self._use('.'.join(['cupy'] + rest), where + ' (xp)', calls.get(id(node)))
                continue
            full = expand_alias(dotted, aliases)
            name = self.to_cupy(full)
            if name is not None and name.split('.')[0] in ROOTS and '.' in name:
                self._use(name, where, calls.get(id(node)))
            elif full and full.startswith('chainer.'):
                self.chainer_refs[full].add(where)


def _chainer_root():
    import chainer
    return os.path.dirname(os.path.dirname(os.path.abspath(chainer.__file__)))


def _chainer_file(relative):
    return os.path.join(_chainer_root(), relative)


def _resolve_chainer(dotted):
    """The source file (relative to site-packages) that defines a dotted Chainer name."""
    parts = dotted.split('.')
    obj = None
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:end]))
        except ImportError:
            continue
        for attr in parts[end:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        break
    if obj is None:
        return None
    if not inspect.ismodule(obj):
        obj = inspect.getmodule(obj)
        if obj is None:
            return None
    path = getattr(obj, '__file__', None)
    if not path or not path.endswith('.py'):
        return None
    relative = os.path.relpath(os.path.abspath(path), _chainer_root())
    return relative if relative.startswith('chainer' + os.sep) else None


def _follows(relative):
    return relative.split(os.sep)[1] in ('functions', 'links', 'optimizers', 'initializers')


Names = collections.namedtuple('Names', 'uses keywords files')
Names.__doc__ = """What :func:`collect` found.

``uses``: CuPy name -> sorted users ("file:line"); ``keywords``: CuPy callable -> sorted
``(keyword, "file:line")`` pairs of the keyword arguments it is called with; ``files``: the
Chainer files read, in the order they were reached.
"""


@functools.lru_cache(maxsize=None)
def collect(repo=REPO):
    """Every CuPy name used, with its users and the keyword arguments it is called with.

    Computed once per process (it imports Chainer's modules): callers must not change it.
    """
    collector = _Collector()
    for folder in ('researchutils', 'benchmarks', 'examples', 'tests'):
        for dirpath, _, filenames in os.walk(os.path.join(repo, folder)):
            for filename in sorted(filenames):
                path = os.path.join(dirpath, filename)
                relative = os.path.relpath(path, repo)
                if not filename.endswith('.py') or relative in _ABOUT_NAMES:
                    continue
                module = relative[:-3].replace(os.sep, '.')
                collector.walk(path, module, relative, xp_is_cupy=False)
    ours = dict(collector.chainer_refs)
    collector.chainer_refs.clear()
    queue = [os.path.join(*p.split('/')) for p in INFRASTRUCTURE]
    queue += sorted({f for f in map(_resolve_chainer, ours) if f})
    seen = []
    while queue:
        relative = queue.pop(0)
        if relative in seen or relative.replace(os.sep, '/') in _NOT_FOLLOWED:
            continue
        seen.append(relative)
        module = relative[:-3].replace(os.sep, '.')
        if module.endswith('.__init__'):
            module = module[:-len('.__init__')]
        collector.chainer_refs.clear()
        collector.walk(os.path.join(_chainer_root(), relative), module,
                       relative.replace(os.sep, '/'), xp_is_cupy=True)
        if _follows(relative):
            found = {f for f in map(_resolve_chainer, collector.chainer_refs) if f}
            queue += sorted(f for f in found if f not in seen)
    for name, user in DYNAMIC.items():
        collector.uses[name].add(user)
    return Names({name: sorted(users) for name, users in sorted(collector.uses.items())},
                 {name: sorted(pairs) for name, pairs in sorted(collector.keywords.items())},
                 seen)


def main():
    names = collect()
    print('Chainer files read ({}): {}'.format(len(names.files), ', '.join(names.files)))
    for name, users in names.uses.items():
        print('{}\n    {}'.format(name, '\n    '.join(users)))
        keywords = sorted({keyword for keyword, _ in names.keywords.get(name, ())})
        if keywords:
            print('    keywords: ' + ', '.join(keywords))
    return 0


if __name__ == '__main__':
    sys.exit(main())
