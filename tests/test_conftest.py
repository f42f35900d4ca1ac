"""The suite's own conftest: which tests the gpu and mpi markers skip."""
import os
import shutil
import subprocess
import sys

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
    env = {k: v for k, v in os.environ.items()
           if k not in ('OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK')}
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
