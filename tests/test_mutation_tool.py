"""tools/mutation.py (``make mutation``): which tests a module gets, and how a surviving
mutant is sorted: a change to a message only, or one a user meets."""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def tool():
    spec = importlib.util.spec_from_file_location(
        'mutation_tool', os.path.join(REPO, 'tools', 'mutation.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ORIGINAL = '''
def check(count):
    if count < 1:
        raise ValueError('count must be positive, got {!r}'.format(count))
    warnings.warn('counting ' + str(count))
    return {'count': count}
'''


@pytest.mark.parametrize('old, new, messages_only', [
    ("'count must be positive, got {!r}'", "'XXcount must be positive, got {!r}XX'", True),
    ("'counting '", "'XXcounting XX'", True),
    ("{'count': count}", "{'XXcountXX': count}", False),  # a key the caller reads
    ('count < 1', 'count <= 1', False),
    ("raise ValueError(", "raise TypeError(", False),
])
def test_a_change_inside_a_message_alone_is_told_apart(tool, old, new, messages_only):
    assert tool._only_messages(ORIGINAL, ORIGINAL.replace(old, new)) is messages_only


def test_every_listed_module_has_tests_that_exist(tool):
    for module in tool.MODULES:
        tests = tool.mirrored_tests(module)
        assert tests, module
        assert all(os.path.exists(os.path.join(REPO, path)) for path in tests), module


def test_a_module_gets_its_mirrored_test_file(tool):
    assert tool.mirrored_tests('chainer/training/json_values.py')[0] == \
        'tests/chainer/training/test_json_values.py'
    assert 'tests/chainer/training/_experiment/' in tool.mirrored_tests(
        'chainer/training/_experiment/')


def test_the_equivalent_mutants_each_say_why(tool):
    listed = tool.read_equivalent()
    assert all(why for why in listed.values()), [n for n, why in listed.items() if not why]
