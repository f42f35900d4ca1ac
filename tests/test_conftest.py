"""The suite's own conftest: which tests the gpu and mpi markers skip."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import MPI_TEST_FILES
from tests.support.processes import checkout_env

HERE = os.path.dirname(os.path.abspath(__file__))

TESTS = '''
import pytest


def test_plain():
    pass


@pytest.mark.gpu
def test_on_gpu():
    pass


@pytest.mark.mpi
def test_under_mpi():
    pass
'''


def _run_in_folder(folder):
    os.makedirs(folder)
    shutil.copy(os.path.join(HERE, 'conftest.py'), folder)
    with open(os.path.join(folder, 'test_sample.py'), 'w') as f:
        f.write(TESTS)
    # The copied conftest imports the suite's fixtures from tests.support: this checkout
    # comes first on the path, as it does for the suite.
    env = checkout_env({k: v for k, v in os.environ.items()
                        if k not in ('OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK')})
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-rA',
         '--strict-markers', '-o', 'markers=gpu\nmpi', 'test_sample.py'],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    return result.stdout + result.stderr


def test_a_checkout_in_a_folder_named_gpu_skips_only_marked_tests(tmp_path):
    # pytest counts folder names as keywords; the markers must be read as markers.
    out = _run_in_folder(str(tmp_path / 'gpu' / 'mpi'))
    assert 'PASSED test_sample.py::test_plain' in out, out
    assert 'needs mpiexec -n 2' in out, out


def test_make_test_mpi_runs_every_file_that_holds_an_mpi_test(request):
    # `make test-mpi` hands mpiexec the files of Makefile's MPI_TESTS, not the whole suite;
    # an mpi test outside them would never run. The files are those of this session's
    # collection (make test: the whole suite), read from tests/conftest.py's record.
    make = shutil.which('make')
    if make is None:
        pytest.skip('make is not installed')
    done = subprocess.run(
        [make, '-s', '--no-print-directory', '-C', os.path.dirname(HERE), '--eval',
         'print-mpi-tests: ; @echo $(MPI_TESTS)', 'print-mpi-tests'],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed = {os.path.join(os.path.dirname(HERE), path) for path in done.stdout.split()}
    collected = request.config.stash.get(MPI_TEST_FILES, set())
    assert collected - listed == set()


SHARED_FIXTURE_TESTS = '''
import os

import pytest


@pytest.fixture(scope='module')
def made_once():
    with open('setups.txt', 'a') as f:
        f.write(os.environ.get('PYTEST_XDIST_WORKER', 'main') + '\\n')


@pytest.mark.parametrize('n', range(6))
def test_uses_it(made_once, n):
    pass


@pytest.mark.parametrize('n', range(6))
def test_does_not(n):
    pass
'''


@pytest.mark.slow(reason='a pytest session of its own with two xdist workers, each '
                  'importing the suite\'s conftest and tests.support')
def test_tests_sharing_a_module_fixture_run_on_one_xdist_worker(tmp_path):
    pytest.importorskip('xdist', reason='pytest-xdist comes with the test extra')
    shutil.copy(os.path.join(HERE, 'conftest.py'), tmp_path)
    (tmp_path / 'test_shared.py').write_text(SHARED_FIXTURE_TESTS)
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-n', '2',
         '--dist', 'loadgroup', 'test_shared.py'],
        cwd=tmp_path, env=checkout_env(), capture_output=True, text=True, timeout=300)
    assert '12 passed' in result.stdout, result.stdout + result.stderr
    assert len((tmp_path / 'setups.txt').read_text().split()) == 1


def test_the_summary_of_slow_tests_survives_a_file_that_fails_to_import(tmp_path):
    # The end-of-run list of tests over SLOW_SECONDS reads test reports only; a collection
    # error's report (which has no keywords) once ended the run in an INTERNALERROR.
    shutil.copy(os.path.join(HERE, 'conftest.py'), tmp_path)
    (tmp_path / 'test_fine.py').write_text('def test_fine():\n    pass\n')
    (tmp_path / 'test_broken.py').write_text('import a_module_that_does_not_exist\n')
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', 'test_fine.py',
         'test_broken.py', '--continue-on-collection-errors'],
        cwd=tmp_path, env=checkout_env(), capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert 'INTERNALERROR' not in out, out
    assert re.search(r'1 passed(, [0-9]+ warnings?)?, 1 error', out), out
