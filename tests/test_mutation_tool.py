"""tools/mutation.py (``make mutation``): which tests a module gets, and how a surviving
mutant is sorted: a change to a message only, or one a user meets."""
import ast
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.support import run_record
from tests.support.processes import own_env

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
    assert tool.only_messages(ORIGINAL, ORIGINAL.replace(old, new)) is messages_only


def test_the_text_of_a_private_alias_of_a_message_call_is_a_message(tool):
    original = ("def describe(error, index):\n"
                "    _add_note(error, 'while building the batch {}'.format(index))\n")
    assert tool.only_messages(original, original.replace("'while", "'XXwhile"))
    assert not tool.only_messages(original, original.replace('index)', 'None)'))


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


def test_every_module_with_code_in_the_guarded_folders_is_listed(tool):
    # A module added to the experiment, the search, data loading or the serializers is
    # measured by make mutation from its first commit (or says why not).
    for folder in tool.GUARDED_FOLDERS:
        root = os.path.join(REPO, 'researchutils', folder)
        for name in sorted(os.listdir(root)):
            if not name.endswith('.py'):
                continue
            with open(os.path.join(root, name)) as stream:
                tree = ast.parse(stream.read())
            if not any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body):
                continue
            module = folder + name
            assert module in tool.MODULES or module in tool.NOT_MUTATED, module


def test_the_equivalent_mutants_each_say_why(tool):
    listed = tool.read_equivalent()
    assert all(why for why in listed.values()), [n for n, why in listed.items() if not why]


def test_a_run_of_chosen_mutants_reports_on_those_alone(tool):
    results = {'m.x_f__mutmut_1': ('m.py', None), 'm.x_f__mutmut_10': ('m.py', 1),
               'm.x_g__mutmut_20': ('m.py', 0), 'm.x_g__mutmut_101': ('m.py', None),
               'm.x_h__mutmut_7': ('m.py', 1)}
    assert set(tool.select(results, [tool.SAMPLE_PATTERN])) == {
        'm.x_f__mutmut_10', 'm.x_g__mutmut_20'}
    assert set(tool.select(results, ['m.x_h__mutmut_7'])) == {'m.x_h__mutmut_7'}
    assert tool.select(results, ['m.x_h__mutmut_70']) == {}


def test_the_sample_make_test_runs_is_of_listed_modules_with_tests(tool):
    assert tool.SAMPLE_MODULES
    for module in tool.SAMPLE_MODULES:
        assert module in tool.MODULES, module
        assert tool.mirrored_tests(module), module


def test_the_mutants_chosen_never_swallow_the_module_named_after_them(tool):
    arguments = tool.parse_arguments(['--mutants', 'a,b', '--mutants', 'c',
                                      'chainer/training/json_values.py'])
    assert arguments.mutants == ['a', 'b', 'c']
    assert arguments.modules == ['chainer/training/json_values.py']


def test_survivors_the_tests_under_mpiexec_catch_count_in_the_score(tool):
    def entry(number):
        return {'mutant': 'm.x_f__mutmut_{}'.format(number), 'file': 'm.py', 'line': 1,
                'change': 'a -> b'}

    unreached = [{'mutant': 'm.x_g__mutmut_{}'.format(n), 'file': 'm.py', 'exit_code': 33}
                 for n in (1, 2)]
    report = {'made': 12, 'killed': 4, 'timed_out': 1, 'messages_only': [entry(9)],
              'equivalent': [entry(8)], 'surviving': [entry(1), entry(2), entry(3)],
              'other': unreached, 'score': 50.0}
    # Exit code 1: a test failed; None: they hung; 0: they passed, the mutant survives.
    tool.count_mpi_verdicts(report, {'m.x_f__mutmut_1': 1, 'm.x_f__mutmut_2': None,
                                     'm.x_f__mutmut_3': 0, 'm.x_g__mutmut_1': 1,
                                     'm.x_g__mutmut_2': 0}, ['tests/test_x_mpi.py'])
    assert [e['mutant'] for e in report['surviving']] == ['m.x_f__mutmut_3']
    assert [e['mutant'] for e in report['other']] == ['m.x_g__mutmut_2']
    assert report['killed_under_mpi'] == 3 and report['score'] == 80.0
    assert 'killed under mpiexec -n 2 by tests/test_x_mpi.py: 3' in tool.format_report(
        dict(report, module='m.py', tests=['tests/test_m.py'], minutes=1.0))


def test_every_module_with_tests_under_mpiexec_has_them_and_they_are_mpi_tests(tool):
    for module, tests in tool.MPI_TESTS.items():
        assert module in tool.MODULES, module
        for path in tests:
            with open(os.path.join(REPO, path)) as stream:
                assert 'mark.mpi' in stream.read(), path


@pytest.mark.parametrize('code, killed', [
    (1, True),  # a test failed
    (-10, True),  # the tests' SIGUSR1 killed the process: the mutant dropped its handler
    (-15, True),
    (-24, False),  # mutmut's CPU limit: timed out, counted as such
    (0, False),  # the tests passed
    (33, False),  # no test reached the mutant
    (None, False),  # not run
])
def test_a_test_process_killed_by_a_signal_counts_as_caught(tool, code, killed):
    assert tool.was_killed(code) is killed


_FORKSERVER_TEST = '''
import multiprocessing


def _nothing():
    pass


def test_a_forkserver_worker_starts_and_ends():
    process = multiprocessing.get_context('forkserver').Process(target=_nothing)
    process.start()
    process.join(120)
    assert process.exitcode == 0
'''

# What mutmut does: the tests run once in its process, then again in a process forked from
# it by a bare os.fork(); the forked run's exit status is this script's.
_RUN_THEN_FORK = '''
import os
import sys

import pytest

if __name__ == '__main__':
    folder = sys.argv[1]
    arguments = ['-q', '-p', 'no:cacheprovider', '-c', os.path.join(folder, 'pytest.ini'),
                 folder]
    if pytest.main(arguments) != 0:
        sys.exit(100)
    pid = os.fork()
    if pid == 0:
        os._exit(int(pytest.main(arguments)))
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
'''


@pytest.mark.one_stack
@pytest.mark.parametrize('with_conftest', [True, False])
def test_the_copys_conftest_lets_a_forked_run_start_forkserver_workers(
        tool, tmp_path, with_conftest):
    # Without it, the fork server of the first run is the forked run's parent's: starting a
    # worker fails there whatever the mutant, a kill that the tests did not make.
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')
    (tmp_path / 'test_forkserver.py').write_text(_FORKSERVER_TEST)
    (tmp_path / 'run_then_fork.py').write_text(_RUN_THEN_FORK)
    if with_conftest:
        tool.write_conftest(str(tmp_path))
    done = subprocess.run([sys.executable, str(tmp_path / 'run_then_fork.py'), str(tmp_path)],
                          cwd=str(tmp_path), env=own_env(), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode != 100, done.stdout + done.stderr  # the first run passes
    if with_conftest:
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        assert done.returncode == 1 and 'ChildProcessError' in done.stdout, done.stdout


def test_the_mutants_runs_write_nothing_into_make_tests_record(tool, monkeypatch):
    # make test exports the file its stacks' outcomes go to (tests/support/run_record.py);
    # the mutation sample runs last, and the runs of its mutants, whose tests fail where a
    # mutant is caught, would count as failures of the newest stack's real tests.
    monkeypatch.setenv(run_record.RECORD_VARIABLE, '/nonexistent/record')
    assert run_record.RECORD_VARIABLE not in sys.modules['mutation_copy'].copy_environment()
