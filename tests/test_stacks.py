"""tests/support/stacks.py: every test file runs on every stack or once (a system test), with
its reason; the system tests are marked ``system`` and listed in docs/testing.rst."""
import glob
import os
import subprocess
import sys

from tests.support import stacks
from tests.support.processes import checkout_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _test_files():
    return {os.path.relpath(path, REPO)
            for path in glob.glob(os.path.join(REPO, 'tests', '**', 'test_*.py'), recursive=True)}


def _listed(table):
    return [path for paths in table.values() for path in paths]


def test_every_test_file_is_on_exactly_one_side():
    listed = _listed(stacks.SYSTEM) + _listed(stacks.EVERY_STACK)
    assert sorted(path for path in set(listed) if listed.count(path) > 1) == []
    assert sorted(_test_files() - set(listed)) == [], 'add them to tests/support/stacks.py'
    assert sorted(set(listed) - _test_files()) == [], 'listed, but no such file'


def test_every_side_is_given_a_reason():
    for table in (stacks.SYSTEM, stacks.EVERY_STACK):
        assert all(reason.strip() and paths for reason, paths in table.items())


def test_docs_name_each_system_test_file_and_its_reason():
    with open(os.path.join(REPO, 'docs', 'testing.rst'), encoding='utf-8') as f:
        page = ' '.join(f.read().split()).lower()
    for reason, paths in stacks.SYSTEM.items():
        assert ' '.join(reason.split()).lower() in page, reason
        for path in paths:
            assert '``{}``'.format(path).lower() in page, path


def test_the_tests_of_a_system_file_carry_the_marker_and_no_others_do():
    system = stacks.SYSTEM["the demo's tiny runs, whole scripts in interpreters of their own"][0]
    every = 'tests/test_chunks.py'
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '--collect-only', '-q',
         '-m', 'system', system, every], cwd=REPO, env=checkout_env(), capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if '::' in line]
    assert collected and all(line.startswith(system + '::') for line in collected)
    assert stacks.is_system_file(os.path.join(REPO, system))
    assert not stacks.is_system_file(os.path.join(REPO, every))


def test_no_system_test_is_also_left_to_the_gpu_machines_stack():
    # make test runs `one_stack` tests on ONE_STACK (3.12) and system tests on the newest
    # (3.13) alone: a test marked both would run on neither.
    for path in stacks.SYSTEM_FILES:
        with open(os.path.join(REPO, path), encoding='utf-8') as f:
            assert 'pytest.mark.' + 'one_stack' not in f.read(), path
