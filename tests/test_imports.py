"""Importing a module loads only the standard library, numpy and chainer, and importing one
piece of researchutils loads that piece alone."""
import ast
import fnmatch
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.support.import_probe import modules_loaded_after

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONAL = ('slack_sdk', 'mpi4py', 'matplotlib', 'cupy', 'chainermn', 'optuna', 'onnx',
            'onnx_chainer', 'onnxruntime', 'tensorboardX', 'mlflow')

LIGHT_MODULES = [
    'researchutils',
    'researchutils.chainer',
    'researchutils.chainer.functions',
    'researchutils.chainer.links',
    'researchutils.chainer.initializers',
    'researchutils.chainer.iterators',
    'researchutils.chainer.serializers',
    'researchutils.chainer.models',
    'researchutils.chainer.models.multi_node',
    'researchutils.chainer.data_loading',
    'researchutils.chainer.training',
    'researchutils.chainer.training.extensions',
    'researchutils.chainer.training.search_space',
    'researchutils.chainer.training.triggers',
    'researchutils.chainer.training.updaters',
    'researchutils.chainer.onnx',
    'researchutils.chainer.onnx.exporter',
    'researchutils.chainer.onnx.converters',
    'researchutils.arrays',
    'researchutils.files',
    'researchutils.math',
    'researchutils.math.angle',
    'researchutils.math.normalization',
]


@pytest.fixture(scope='module')
def optional_modules_loaded():
    """Per light module: the optional dependencies that importing it loads beyond what
    Chainer itself does.

    ``import chainer`` imports CuPy wherever CuPy is installed (the 3.13 stack has it, with
    no GPU), so what Chainer loads on its own is the baseline. One interpreter imports
    Chainer once and imports each module in a fork of itself (tests/support/import_probe.py):
    each answer is a fresh interpreter's.
    """
    return modules_loaded_after('import chainer', LIGHT_MODULES, OPTIONAL)


@pytest.mark.parametrize('module', LIGHT_MODULES)
def test_import_loads_no_optional_dependency(optional_modules_loaded, module):
    assert optional_modules_loaded[module] == []


def test_version_is_exposed():
    import researchutils
    assert researchutils.__version__.count('.') == 2


def _import_researchutils_as_python(version):
    """Import the package's __init__ with a faked interpreter version; what it raises.

    ``-S``: the installed .pth file imports researchutils at start-up.
    """
    code = (
        'import sys\n'
        'sys.version_info = ({}, {}, 0, "final", 0)\n'
        'try:\n'
        '    import researchutils\n'
        'except ImportError as e:\n'
        '    print("ImportError:", e)\n'
    ).format(*version)
    return subprocess.run([sys.executable, '-S', '-c', code], check=True, cwd=REPO,
                          capture_output=True, text=True).stdout


@pytest.mark.parametrize('version', [(3, 11), (3, 12), (3, 13)])
def test_every_tested_python_is_accepted(version):
    assert _import_researchutils_as_python(version) == ''


def _loaded(module, candidates, prelude=''):
    code = (
        'import sys, importlib\n{}'
        'importlib.import_module({!r})\n'
        'print(",".join(sorted(m for m in {!r} if m in sys.modules)))\n'
    ).format(prelude, module, candidates)
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    return [name for name in out.strip().split(',') if name]


@pytest.mark.parametrize('module', ['researchutils.arrays', 'researchutils.math.angle',
                                    'researchutils.math.normalization'])
def test_numpy_only_modules_import_no_chainer(module):
    assert _loaded(module, ('chainer', 'numpy')) == ['numpy']


def test_files_imports_only_the_standard_library():
    assert _loaded('researchutils.files', ('chainer', 'numpy')) == []


@pytest.mark.parametrize('module', ['researchutils.image', 'researchutils.image.viewer',
                                    'researchutils.image.converter', 'researchutils.task',
                                    'researchutils.task.plotter'])
def test_plotting_packages_import_no_chainer_and_choose_no_backend(module):
    pytest.importorskip('matplotlib')
    assert _loaded(module, ('chainer', 'matplotlib', 'matplotlib.pyplot')) == ['matplotlib']


@pytest.mark.parametrize('module', ['researchutils.image', 'researchutils.image.converter',
                                    'researchutils.task', 'researchutils.task.plotter'])
def test_plotting_packages_without_matplotlib_name_the_extra(module):
    code = ('import sys\n'
            'sys.modules["matplotlib"] = None\n'
            'try:\n'
            '    import {}\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n').format(module)
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    assert out.startswith('ImportError:')
    assert 'needs matplotlib: pip install researchutils[plot]' in out


def test_original_top_level_modules_are_attributes_of_the_package():
    # The original researchutils imported arrays and files in its __init__.
    code = ('import sys, researchutils\n'
            'print("numpy" in sys.modules, researchutils.files.file_exists("."),\n'
            '      researchutils.arrays.one_hot([0], (1, 1)).tolist())\n')
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    assert out.split() == ['False', 'True', '[[1]]']


@pytest.mark.parametrize('code', [
    'from researchutils.chainer.training.extensions import ChainerPruningExtension\n'
    'ChainerPruningExtension(None, "val/MSE", (1, "epoch"))\n',
    'from tests.chainer.training import search_tasks\n'
    'search_tasks.search_experiment(sys.argv[1]).search(*search_tasks.search_managers(), '
    'n_trials=1)\n',
])
def test_search_without_optuna_names_the_extra(code, tmp_path):
    code = ('import sys\n'
            'sys.modules["optuna"] = None\n'
            'try:\n'
            '    exec({!r})\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n').format(code)
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    assert out.startswith('ImportError:')
    assert 'needs Optuna: pip install researchutils[search]' in out


# What importing each piece may load, and what it must not, in a fresh interpreter: a piece
# loads itself and the small private helpers, never the experiment, the search, the data
# managers, the models, the worker pool, Optuna or matplotlib (DESIGN.md, "Importing one
# piece loads that piece"). Names are fnmatch patterns over sys.modules.
HELPERS = ('researchutils', 'researchutils._*', 'researchutils.chainer',
           'researchutils.chainer._*')
EXPERIMENT = ('researchutils.chainer.training.experiment',
              'researchutils.chainer.training._experiment',
              'researchutils.chainer.training._experiment.*',
              'researchutils.chainer.training.parameters',
              'researchutils.chainer.training._ownership')
DATA = ('researchutils.chainer.data_loading', 'researchutils.chainer.data_loading.*')
MODELS = ('researchutils.chainer.models', 'researchutils.chainer.models.*')
POOL = ('researchutils._process_pool', 'researchutils._process_worker',
        'researchutils._process_pipe')
HEAVY = ('optuna', 'optuna.*', 'matplotlib', 'matplotlib.*', 'tensorboardX', 'tensorboardX.*',
         'mlflow', 'mlflow.*')
TRAINING = ('researchutils.chainer.training',)
EXTENSIONS = ('researchutils.chainer.training.extensions',
              'researchutils.chainer.training.extensions.*',
              'researchutils.chainer.training._scores',
              'researchutils.chainer.training._ranks',
              'researchutils.chainer.training._mlflow_runs',
              'researchutils.chainer.serializers', 'researchutils.chainer.serializers.*')
FUNCTIONS = ('researchutils.chainer.functions', 'researchutils.chainer.functions.*')
LINKS = FUNCTIONS + ('researchutils.chainer.links', 'researchutils.chainer.links.*')
SERIALIZERS = ('researchutils.chainer.serializers', 'researchutils.chainer.serializers.*')
ITERATORS = ('researchutils.chainer.iterators', 'researchutils.chainer.iterators.*')
ONNX = ('researchutils.chainer.onnx', 'researchutils.chainer.onnx.*')

#        piece: (what it may load besides HELPERS, what it must not load)
IMPORT_TABLE = {
    'researchutils.chainer.training': (TRAINING, EXPERIMENT + DATA + MODELS + POOL + HEAVY),
    'researchutils.chainer.training.extensions': (
        TRAINING + EXTENSIONS, EXPERIMENT + DATA + MODELS + POOL + HEAVY),
    'researchutils.chainer.functions': (FUNCTIONS, EXPERIMENT + DATA + MODELS + POOL + HEAVY),
    'researchutils.chainer.links': (LINKS, EXPERIMENT + DATA + MODELS + POOL + HEAVY),
    'researchutils.chainer.serializers': (SERIALIZERS,
                                          EXPERIMENT + DATA + MODELS + POOL + HEAVY),
    'researchutils.chainer.iterators': (ITERATORS + POOL, TRAINING + DATA + MODELS + HEAVY),
    'researchutils.chainer.models': (MODELS, EXPERIMENT + DATA + POOL + HEAVY),
    # export() imports onnx and onnx_chainer when called; importing it loads no link.
    'researchutils.chainer.onnx': (ONNX, EXPERIMENT + DATA + MODELS + POOL + HEAVY + LINKS
                                   + SERIALIZERS + TRAINING + ('onnx', 'onnx.*', 'onnx_chainer',
                                                              'onnxruntime')),
}
IMPORT_TABLE.update({
    'researchutils.chainer.onnx.' + name: IMPORT_TABLE['researchutils.chainer.onnx']
    for name in ('exporter', 'converters')})
IMPORT_TABLE.update({
    'researchutils.chainer.training.extensions.' + name:
        IMPORT_TABLE['researchutils.chainer.training.extensions']
    for name in ('slack_report', 'preemption_snapshot', 'chainer_pruning_extension',
                 'best_model_saver', 'predictor_evaluator', 'stop_on_non_number',
                 'tensorboard_report', 'mlflow_report')})
IMPORT_TABLE.update({
    module: IMPORT_TABLE['researchutils.chainer.iterators'] for module in (
        'researchutils.chainer.iterators.' + name for name in (
            'decorable_serial_iterator', 'decorable_multithread_iterator',
            'decorable_multiprocess_iterator', 'unmodifiable_decorable_list'))})


# The frameworks: a piece may load either, except what its row forbids. Every Chainer piece
# is held to never loading torch, and every torch piece to never loading Chainer (DESIGN.md).
CHAINER = ('chainer', 'chainer.*')
TORCH = ('torch', 'torch.*')
IMPORT_TABLE = {piece: (may_load, must_not + TORCH)
                for piece, (may_load, must_not) in IMPORT_TABLE.items()}
# The torch side: researchutils.pytorch and its pieces, each importable alone. They never load
# Chainer, the Chainer side, or the torch side's modules that read Chainer (weights, optim,
# tracing, which other rows hold).
PYTORCH_READERS = ('researchutils.pytorch.weights', 'researchutils.pytorch.weights.*',
                   'researchutils.pytorch.optim', 'researchutils.pytorch.tracing',
                   'researchutils.pytorch.tracing.*')
PYTORCH_FORBIDDEN = CHAINER + ('researchutils.chainer', 'researchutils.chainer.*') + (
    PYTORCH_READERS + HEAVY + POOL)
PYTORCH_BASE = TORCH + ('researchutils.pytorch', 'researchutils.pytorch._*')
PYTORCH_FUNCTIONS = ('researchutils.pytorch.functions',)
PYTORCH_NN = PYTORCH_FUNCTIONS + ('researchutils.pytorch.nn', 'researchutils.pytorch.nn._*')
PYTORCH_TABLE = {
    'researchutils.pytorch': (PYTORCH_BASE, PYTORCH_FORBIDDEN + PYTORCH_NN),
    'researchutils.pytorch.functions': (PYTORCH_BASE + PYTORCH_FUNCTIONS,
                                        PYTORCH_FORBIDDEN + ('researchutils.pytorch.nn',)),
    'researchutils.pytorch.nn': (PYTORCH_BASE + ('researchutils.pytorch.nn',),
                                 PYTORCH_FORBIDDEN + PYTORCH_FUNCTIONS),
    'researchutils.pytorch.nn.grad_clip_lstm': (
        PYTORCH_BASE + PYTORCH_NN + ('researchutils.pytorch.nn.grad_clip_lstm',),
        PYTORCH_FORBIDDEN),
    'researchutils.pytorch.nn.deconvolution_ps': (
        PYTORCH_BASE + PYTORCH_NN + ('researchutils.pytorch.nn.deconvolution_ps',),
        PYTORCH_FORBIDDEN + ('researchutils.pytorch.functions',)),
    'researchutils.pytorch.nn.conv_lstm': (
        PYTORCH_BASE + PYTORCH_NN + ('researchutils.pytorch.nn.conv_lstm',),
        PYTORCH_FORBIDDEN),
    'researchutils.pytorch.nn.action_conditioned_lstm': (
        PYTORCH_BASE + PYTORCH_NN + ('researchutils.pytorch.nn.action_conditioned_lstm',
                                     'researchutils.pytorch.nn.grad_clip_lstm'),
        PYTORCH_FORBIDDEN),
    'researchutils.pytorch.initializers': (PYTORCH_BASE + ('researchutils.pytorch.initializers',),
                                           PYTORCH_FORBIDDEN + PYTORCH_NN),
}
# The twins of Chainer's own links: each loads itself (the recurrent ones their Linear too).
PYTORCH_TABLE.update({
    'researchutils.pytorch.nn.' + name: (
        PYTORCH_BASE + ('researchutils.pytorch.nn', 'researchutils.pytorch.nn.' + name)
        + (('researchutils.pytorch.nn.connection',) if name == 'recurrent' else ()),
        PYTORCH_FORBIDDEN + PYTORCH_FUNCTIONS)
    for name in ('connection', 'normalization', 'recurrent', 'n_step_rnn', 'containers')})
# The weights read Chainer (links, the npz reader) and build the twins; never the
# experiment, the pools or the heavy extras, nor the other readers.
WEIGHTS = ('researchutils.pytorch.weights', 'researchutils.pytorch.weights.*')
WEIGHTS_MAY_LOAD = PYTORCH_BASE + WEIGHTS + PYTORCH_NN + (
    'researchutils.pytorch.nn.*', 'researchutils.chainer.*')
WEIGHTS_MUST_NOT = HEAVY + POOL + EXPERIMENT + (
    'researchutils.pytorch.optim', 'researchutils.pytorch.tracing',
    'researchutils.pytorch.tracing.*')
PYTORCH_TABLE.update({
    'researchutils.pytorch.weights': (PYTORCH_BASE + ('researchutils.pytorch.weights',),
                                      WEIGHTS_MUST_NOT + CHAINER + PYTORCH_NN),
    'researchutils.pytorch.weights.loading': (WEIGHTS_MAY_LOAD, WEIGHTS_MUST_NOT + (
        'researchutils.pytorch.weights.conversion', 'researchutils.chainer.links')),
    'researchutils.pytorch.weights.comparison': (WEIGHTS_MAY_LOAD, WEIGHTS_MUST_NOT + (
        'researchutils.pytorch.weights.conversion',)),
    'researchutils.pytorch.weights.conversion': (WEIGHTS_MAY_LOAD, WEIGHTS_MUST_NOT),
})

# Chainer's optimizers in torch: the rules, hooks and schedules are torch alone; only the
# conversion reads Chainer (and the weights' rules, for each parameter's layout).
OPTIM = ('researchutils.pytorch.optim',)
OPTIM_PIECES = ('optimizers', 'hooks', 'schedules')
OPTIM_MUST_NOT = CHAINER + ('researchutils.chainer', 'researchutils.chainer.*') + HEAVY + POOL + (
    WEIGHTS + PYTORCH_NN + ('researchutils.pytorch.optim.conversion',
                            'researchutils.pytorch.tracing', 'researchutils.pytorch.tracing.*'))
PYTORCH_TABLE.update({
    'researchutils.pytorch.optim.' + name: (
        PYTORCH_BASE + OPTIM + ('researchutils.pytorch.optim.' + name,),
        OPTIM_MUST_NOT + tuple('researchutils.pytorch.optim.' + other
                               for other in OPTIM_PIECES if other != name))
    for name in OPTIM_PIECES})
PYTORCH_TABLE['researchutils.pytorch.optim.conversion'] = (
    WEIGHTS_MAY_LOAD + OPTIM + ('researchutils.pytorch.optim.*',),
    HEAVY + POOL + EXPERIMENT + ('researchutils.pytorch.tracing',
                                 'researchutils.pytorch.tracing.*'))


def _loaded_by(piece):
    """The researchutils, Optuna and matplotlib modules importing ``piece`` loads, fresh."""
    code = ('import importlib, sys\n'
            'importlib.import_module({!r})\n'
            'print(" ".join(sorted(m for m in sys.modules\n'
            '                      if m.split(".")[0] in ("researchutils", "optuna",\n'
            '                                             "chainer", "torch",\n'
            '                                             "matplotlib", "onnx",\n'
            '                                             "onnx_chainer", "onnxruntime",\n'
            '                                             "tensorboardX", "mlflow"))))\n'
            ).format(piece)
    out = subprocess.run([sys.executable, '-c', code], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    return out.split()


def _matching(modules, patterns):
    return sorted(m for m in modules if any(fnmatch.fnmatchcase(m, p) for p in patterns))


def _assert_loads_that_piece_alone(piece, may_load, must_not):
    loaded = _loaded_by(piece)
    assert piece in loaded
    assert _matching(loaded, must_not) == []
    assert sorted(set(loaded) - set(_matching(loaded, HELPERS + CHAINER + TORCH + may_load))
                  ) == []


@pytest.mark.parametrize('piece', sorted(IMPORT_TABLE))
def test_importing_a_piece_loads_that_piece_alone(piece):
    _assert_loads_that_piece_alone(piece, *IMPORT_TABLE[piece])


@pytest.mark.parametrize('piece', sorted(PYTORCH_TABLE))
def test_importing_a_torch_piece_loads_that_piece_and_torch_never_chainer(piece):
    pytest.importorskip('torch')
    _assert_loads_that_piece_alone(piece, *PYTORCH_TABLE[piece])


def test_the_torch_side_forbids_what_the_chainer_side_loads():
    # A pattern that matched nothing would forbid nothing: importing a Chainer piece loads
    # Chainer and researchutils.chainer, which every torch piece must not.
    loaded = _loaded_by('researchutils.chainer.links.connection.grad_clip_lstm')
    assert _matching(loaded, CHAINER) and _matching(loaded, ('researchutils.chainer.*',))


def _import_pytorch(prelude=''):
    code = ('import sys\n{}'
            'try:\n'
            '    import researchutils.pytorch.nn.grad_clip_lstm\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n'
            '    print("chainer" in sys.modules)\n').format(prelude)
    return subprocess.run([sys.executable, '-c', code], check=True, cwd=REPO,
                          capture_output=True, text=True).stdout


def test_pytorch_without_torch_names_the_extra():
    out = _import_pytorch('sys.modules["torch"] = None\n')
    assert out == ('ImportError: researchutils.pytorch needs PyTorch: pip install '
                   'researchutils[torch]\nFalse\n')


@pytest.mark.skipif(importlib.util.find_spec('torch') is not None,
                    reason='torch is installed in this stack (the .venv stack has none)')
def test_pytorch_on_a_stack_without_torch_names_the_extra():
    assert _import_pytorch().startswith('ImportError: researchutils.pytorch needs PyTorch: '
                                        'pip install researchutils[torch]\n')


def test_the_forbidden_modules_are_what_the_experiment_loads():
    # A pattern that matched nothing (a module renamed or moved) would forbid nothing: each
    # group must match modules that importing the experiment and the search does load.
    loaded = _loaded_by('researchutils.chainer.training.experiment')
    for group in (('researchutils.chainer.training.experiment',),
                  ('researchutils.chainer.training.parameters',), DATA, MODELS, POOL):
        assert _matching(loaded, group), group


def _module_files():
    """Every researchutils module name and its source file."""
    package_root = os.path.join(REPO, 'researchutils')
    for folder, _, files in os.walk(package_root):
        for file_name in files:
            if file_name.endswith('.py'):
                path = os.path.join(folder, file_name)
                name = os.path.relpath(path, REPO)[:-len('.py')].replace(os.sep, '.')
                yield name[:-len('.__init__')] if name.endswith('.__init__') else name, path


def _is_type_checking_block(node):
    """Whether ``node`` is ``if TYPE_CHECKING:`` (or ``if typing.TYPE_CHECKING:``)."""
    return isinstance(node, ast.If) and (
        getattr(node.test, 'id', None) == 'TYPE_CHECKING'
        or getattr(node.test, 'attr', None) == 'TYPE_CHECKING')


def _nodes(tree, type_checking):
    """Every node of ``tree``; with ``type_checking`` False, not those of an
    ``if TYPE_CHECKING:`` block (its ``else`` stays)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        if not type_checking and _is_type_checking_block(node):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


def _imported_names(tree, module, is_package, type_checking=True):
    """What ``tree`` imports, anywhere in it (functions included), as ``(package, name)``
    pairs (``name`` None for ``import package``), and the modules of a lazy re-export table
    (``_EXPORTS``); with ``type_checking`` False, not the imports only a type checker runs
    (``if TYPE_CHECKING:``)."""
    for node in _nodes(tree, type_checking):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = module.split('.')
                parts = parts[:len(parts) - node.level + (1 if is_package else 0)]
                base = '.'.join(parts + ([base] if base else []))
            yield from ((base, alias.name) for alias in node.names)
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1
              and getattr(node.targets[0], 'id', None) == '_EXPORTS'):
            yield from ((module, name) for name in ast.literal_eval(node.value))


def import_graph(type_checking=True):
    """``{module: set of researchutils modules it imports}``, from the sources.

    ``from package import name`` depends on the module ``package.name`` when there is one,
    else on the package; the parents Python imports on the way are not counted. With
    ``type_checking`` False, imports in ``if TYPE_CHECKING:`` blocks are left out.
    """
    files = dict(_module_files())
    graph = {}
    for module, path in files.items():
        with open(path) as source:
            tree = ast.parse(source.read())
        imported = set()
        for base, name in _imported_names(tree, module, path.endswith('__init__.py'),
                                          type_checking):
            full = '{}.{}'.format(base, name) if name else base
            imported.add(full if full in files else base)
        graph[module] = {name for name in imported if name in files and name != module}
    return graph


def _circles(graph):
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph[module]):
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def test_no_import_circle_among_researchutils_modules():
    assert _circles(import_graph(type_checking=False)) == []


def test_no_import_circle_through_type_checking_imports_either():
    # An import that only a type checker runs (if TYPE_CHECKING:) loads nothing at run time,
    # but two modules that name each other's types are still one module cut in two: what
    # they share belongs in a module of its own (the experiment's protocol.py).
    assert _circles(import_graph()) == []


def test_type_checking_imports_are_left_out_when_asked():
    tree = ast.parse('import typing\n'
                     'from typing import TYPE_CHECKING\n'
                     'import first\n'
                     'if TYPE_CHECKING:\n'
                     '    import checked\n'
                     'else:\n'
                     '    import otherwise\n'
                     'if typing.TYPE_CHECKING:\n'
                     '    from package import also_checked\n'
                     'def load():\n'
                     '    import inside\n')
    every = set(_imported_names(tree, 'module', False))
    running = set(_imported_names(tree, 'module', False, type_checking=False))
    assert every - running == {('checked', None), ('package', 'also_checked')}
    assert running == {('typing', None), ('typing', 'TYPE_CHECKING'), ('first', None),
                       ('otherwise', None), ('inside', None)}


def test_the_circle_finder_finds_a_circle_through_a_function_level_import():
    graph = import_graph(type_checking=False)
    references = 'researchutils.chainer.training.references'
    train_utils = 'researchutils.chainer.training.train_utils'
    assert references in graph[train_utils]  # its lazy re-export of the moved names
    graph[references] = graph[references] | {train_utils}
    assert _circles(graph) == [[references, train_utils]]


def test_no_extension_imports_the_experiment_or_its_private_modules():
    # Not even inside a function: the experiment depends on its plug-ins, never the reverse.
    graph = import_graph()
    extensions = [module for module in graph
                  if module.startswith('researchutils.chainer.training.extensions.')]
    assert extensions
    for module in extensions:
        assert _matching(graph[module], EXPERIMENT) == [], module
