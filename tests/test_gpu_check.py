"""``make wheelhouse`` then ``make gpu-check-dry``: the GPU check's install and selection.

Runs the real scripts (tools/build_wheelhouse.sh, tools/gpu_check.sh --dry-run) with this
interpreter standing in for the GPU machine's python3: the wheelhouse is built from the
registries, the check installs from it alone into a fresh venv and runs the gpu tests (which
skip without CUDA), the CuPy-name tests and the benchmarks' GPU rows (left out without CUDA).
On a machine with CUDA the gpu tests run instead.
"""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cuda_available():
    import chainer.backends.cuda
    return chainer.backends.cuda.available


@pytest.fixture(scope='module')
def dry_run(tmp_path_factory):
    root = tmp_path_factory.mktemp('gpu_check')
    wheelhouse = root / 'wheelhouse'
    built = subprocess.run(['bash', os.path.join(REPO, 'tools', 'build_wheelhouse.sh'),
                            str(wheelhouse)], cwd=REPO, capture_output=True, text=True,
                           env=dict(os.environ, PYTHON=sys.executable), timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    results = root / 'results'
    env = dict(os.environ, GPU_CHECK_PYTHON=sys.executable, WHEELHOUSE=str(wheelhouse),
               GPU_CHECK_VENV=str(root / 'venv'), OUT=str(results))
    # The check's own pytest runs must not inherit this run's pytest state.
    env.pop('PYTEST_ADDOPTS', None)
    env.pop('PYTEST_CURRENT_TEST', None)
    done = subprocess.run(['bash', os.path.join(REPO, 'tools', 'gpu_check.sh'), '--dry-run'],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    return wheelhouse, results, done


@pytest.mark.slow
def test_wheelhouse_holds_chainer_researchutils_and_slack_sdk_under_20_mib(dry_run):
    wheelhouse, _, _ = dry_run
    names = sorted(os.listdir(wheelhouse))
    for project in ('chainer-7.8.1-', 'researchutils-', 'slack_sdk-'):
        assert any(name.startswith(project) and name.endswith('.whl') for name in names), names
    assert all(name.endswith('.whl') for name in names), names
    assert sum(os.path.getsize(wheelhouse / name) for name in names) < 20 * 2 ** 20


@pytest.mark.slow
def test_dry_run_passes_and_writes_every_result_into_one_folder(dry_run):
    _, results, done = dry_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for name in ('gpu_check.log', 'machine.txt', 'versions.txt', 'pip-list.txt',
                 'pytest-gpu.xml', 'pytest-cupy-names.xml', 'benchmarks-gpu.txt',
                 'summary.txt'):
        assert (results / name).is_file(), name


@pytest.mark.slow
def test_chainer_and_researchutils_come_from_the_wheelhouse_venv(dry_run):
    _, results, _ = dry_run
    versions = (results / 'versions.txt').read_text()
    venv = str(results.parent / 'venv')
    for project in ('chainer 7.8.1 ', 'researchutils '):
        line = next(line for line in versions.splitlines() if line.startswith(project))
        assert venv in line, line


@pytest.mark.slow
def test_every_gpu_test_is_selected_and_runs_only_with_cuda(dry_run):
    _, results, _ = dry_run
    summary = (results / 'summary.txt').read_text()
    line = next(line for line in summary.splitlines() if line.startswith('pytest-gpu:'))
    counts = dict(field.split('=') for field in line.split()[1:])
    assert int(counts['tests']) > 0
    assert counts['failures'] == counts['errors'] == '0'
    expected_skipped = '0' if _cuda_available() else counts['tests']
    assert counts['skipped'] == expected_skipped, line
    benchmarks = (results / 'benchmarks-gpu.txt').read_text()
    assert '@numpy' not in benchmarks and 'CPU' not in benchmarks.replace('CPUs', '')
    if not _cuda_available():
        assert benchmarks.count('GPU rows skipped: CuPy sees no GPU') == 4
