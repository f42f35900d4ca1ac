"""tests/support/run_record.py and tests/support/cpu_report.py: what a run records of its tests
(their outcome per stack, their CPU seconds) and the tables made from it, on real pytest runs."""
import json
import os
import shutil
import subprocess
import sys

from tests.support import cpu_report, run_record
from tests.support.processes import checkout_env

CONFTEST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        'conftest.py')
SAMPLE = '''
import pytest


@pytest.fixture(scope='module')
def shared():
    return sum(range(10 ** 5))


def test_passes(shared):
    assert shared


def test_fails():
    assert False


@pytest.mark.skip(reason='not here')
def test_skipped():
    pass


@pytest.mark.system
def test_left_to_another_stack():
    pass
'''


def _run(folder, *arguments):
    folder.mkdir(exist_ok=True)
    shutil.copy(CONFTEST, str(folder))
    (folder / 'test_sample.py').write_text(SAMPLE)
    (folder / 'pytest.ini').write_text('[pytest]\nmarkers =\n    system: once\n')
    env = checkout_env(dict(os.environ, **{run_record.RECORD_VARIABLE: str(folder / 'record')}))
    done = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q']
                          + list(arguments) + ['test_sample.py'], cwd=str(folder), env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # test_fails
    return folder / 'record'


def test_each_outcome_is_recorded_once_per_stack_under_xdist_and_without(tmp_path):
    for folder, arguments in (('plain', ['-m', 'not system']),
                              ('xdist', ['-n', '2', '-m', 'not system'])):
        stacks = run_record.read(str(_run(tmp_path / folder, *arguments)))
        stack = '{}.{}'.format(*sys.version_info[:2])
        assert list(stacks) == [stack]
        outcomes = {test.split('::')[1]: outcome for test, (outcome, _) in stacks[stack].items()}
        assert outcomes == {'test_passes': 'passed', 'test_fails': 'failed',
                            'test_skipped': 'skipped',
                            'test_left_to_another_stack': 'deselected'}, folder
        assert stacks[stack]['test_sample.py::test_skipped'][1] == 'not here'


def test_a_run_that_a_test_starts_records_nothing_into_the_record(tmp_path):
    # The suite's own tests start pytest runs of sample tests, some failing on purpose:
    # those are no outcome of the stack that make test counts.
    for folder, arguments in (('plain', []), ('xdist', ['-n', '2'])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / 'test_nested.py').write_text(
            'import os\n\n\ndef test_gets_no_record():\n'
            '    assert {!r} not in os.environ\n'.format(run_record.RECORD_VARIABLE))
        shutil.copy(CONFTEST, str(tmp_path / folder))
        env = checkout_env(dict(os.environ, **{run_record.RECORD_VARIABLE: str(
            tmp_path / folder / 'record')}))
        done = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q']
                              + arguments + ['test_nested.py'], cwd=str(tmp_path / folder),
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, folder + done.stdout + done.stderr


def test_the_summary_counts_each_stack_and_names_what_ran_nowhere(tmp_path):
    record = tmp_path / 'record'
    rows = [('3.11', 'a', 'passed'), ('3.11', 'b', 'deselected'), ('3.11', 'c', 'skipped'),
            ('3.13', 'a', 'passed'), ('3.13', 'b', 'failed'), ('3.13', 'c', 'skipped'),
            ('3.13 MPI', 'd', 'passed'), ('3.13', 'd', 'skipped'),
            # Left to another stack by one, skipped by the other: it ran nowhere, and why.
            ('3.11', 'e', 'deselected'), ('3.13', 'e', 'skipped'),
            # Under xdist a grouped test's id ends in @group; the MPI run reports it bare.
            ('3.13', 'f@tests.chainer.test_f', 'deselected'), ('3.13 MPI', 'f', 'passed')]
    record.write_text(''.join(json.dumps({'stack': stack, 'id': test, 'outcome': outcome,
                                          'why': 'needs CUDA' if outcome == 'skipped' and
                                          test in 'ce' else ''}) + '\n'
                              for stack, test, outcome in rows))
    lines = run_record.summary(run_record.read(str(record)))
    assert lines[1].split() == ['3.11', '1', 'passed', '0', 'failed', '1', 'skipped', '2',
                                'left']
    assert lines[2].split()[:4] == ['3.13', '1', 'passed', '1']
    assert lines[3].split()[:3] == ['3.13', 'MPI', '2']
    assert lines[4].strip().startswith('6 distinct tests, 4 ran on at least one stack; 2 ran')
    assert lines[5].split() == ['2', 'needs', 'CUDA']


def test_the_cpu_report_adds_up_tests_by_file_and_fixtures_by_name(tmp_path):
    folder = tmp_path / 'cpu'
    folder.mkdir()
    shutil.copy(CONFTEST, str(folder))
    (folder / 'test_sample.py').write_text(SAMPLE)
    (folder / 'pytest.ini').write_text('[pytest]\nmarkers =\n    system: once\n')
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-p',
         'tests.support.cpu_report', '--cpu-report', str(folder / 'cpu'), '-n', '2',
         'test_sample.py'], cwd=str(folder), env=checkout_env(), capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    by_file, by_fixture = cpu_report.tables('{}.{}.{}'.format(folder / 'cpu',
                                                              *sys.version_info[:2]))
    assert [(row[0], row[3]) for row in by_file] == [('test_sample.py', 4)]
    assert by_file[0][1] > 0 and by_file[0][2] > 0
    assert ('shared (module)', 1) in [(row[0], row[3]) for row in by_fixture]
