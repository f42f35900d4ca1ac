"""lazy_exports: a package's re-exported names load their module on first use, and only then."""
import ast
import os
import subprocess
import sys
import textwrap

import pytest

from researchutils._lazy import lazy_exports

PACKAGE = {
    '__init__.py': '''
        from researchutils._lazy import lazy_exports
        __all__, __getattr__, __dir__ = lazy_exports(
            globals(), {'heavy': ['Heavy', 'make_heavy'], 'light': ['Light']},
            submodules=('tools',))
    ''',
    'heavy.py': '''
        class Heavy(object):
            """Stands for a module that is costly to import."""

        def make_heavy():
            return Heavy()
    ''',
    'light.py': '''
        class Light(object):
            pass
    ''',
    'tools.py': '''
        VALUE = 1
    ''',
}


@pytest.fixture
def demo(tmp_path):
    """A package ``demo`` on disk whose ``__init__`` re-exports lazily."""
    folder = tmp_path / 'demo'
    folder.mkdir()
    for name, text in PACKAGE.items():
        (folder / name).write_text(textwrap.dedent(text))
    return tmp_path


def _run(path, code):
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=str(path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_a_name_loads_its_own_module_and_no_other(demo):
    assert _run(demo, '''
        import sys
        import demo
        print('demo.heavy' in sys.modules)
        from demo import Light
        print('demo.heavy' in sys.modules, 'demo.light' in sys.modules)
        print(Light.__module__)
    ''') == ['False', 'False', 'True', 'demo.light']


def test_a_loaded_name_is_stored_in_the_package(demo):
    assert _run(demo, '''
        import demo
        value = demo.make_heavy
        print('make_heavy' in vars(demo), 'Heavy' in vars(demo), value is demo.make_heavy)
    ''') == ['True', 'False', 'True']


def test_all_and_dir_list_every_name_before_any_is_loaded(demo):
    assert _run(demo, '''
        import sys
        import demo
        print(','.join(demo.__all__))
        print(set(demo.__all__) <= set(dir(demo)), 'demo.heavy' in sys.modules)
    ''') == ['Heavy,make_heavy,Light,tools', 'True', 'False']


def test_star_import_gives_every_name(demo):
    assert _run(demo, '''
        from demo import *
        print(Heavy.__name__, make_heavy.__name__, Light.__name__, tools.VALUE)
    ''') == ['Heavy', 'make_heavy', 'Light', '1']


def test_a_submodule_that_is_no_name_still_imports_as_a_module(demo):
    # `from package import module` asks __getattr__ first; an AttributeError lets Python
    # import the submodule.
    assert _run(demo, '''
        from demo import heavy
        import types
        print(isinstance(heavy, types.ModuleType), heavy.__name__)
    ''') == ['True', 'demo.heavy']


def test_an_unknown_name_is_an_attribute_error_naming_it():
    _, getattr_, _ = lazy_exports({'__name__': 'demo'}, {'heavy': ['Heavy']})
    with pytest.raises(AttributeError, match="module 'demo' has no attribute 'Missing'"):
        getattr_('Missing')


def test_a_name_listed_under_two_modules_is_refused():
    with pytest.raises(ValueError, match="'Heavy' is exported by both 'heavy' and 'light'"):
        lazy_exports({'__name__': 'demo'}, {'heavy': ['Heavy'], 'light': ['Heavy']})


def _lazy_packages():
    """Every researchutils package __init__ with a lazy table (_EXPORTS), by package name."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder, _, files in os.walk(os.path.join(root, 'researchutils')):
        if '__init__.py' in files:
            path = os.path.join(folder, '__init__.py')
            with open(path) as source:
                tree = ast.parse(source.read())
            if any(getattr(getattr(node, 'targets', [None])[0], 'id', None) == '_EXPORTS'
                   for node in tree.body):
                yield os.path.relpath(folder, root).replace(os.sep, '.'), tree


@pytest.mark.parametrize('package, tree', sorted(_lazy_packages(), key=lambda item: item[0]),
                         ids=lambda value: value if isinstance(value, str) else '')
def test_type_checkers_see_exactly_the_lazy_table(package, tree):
    # Type checkers and IDEs read the imports under `if TYPE_CHECKING:`, Python the table.
    table = set()
    seen = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == '_EXPORTS':
            table = {('{}.{}'.format(package, module), name)
                     for module, names in ast.literal_eval(node.value).items()
                     for name in names}
        if isinstance(node, ast.If) and getattr(node.test, 'id', None) == 'TYPE_CHECKING':
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.dump(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, 'a re-export reads "X as X"'
                    seen.add((statement.module, alias.name))
    assert table and seen == table
