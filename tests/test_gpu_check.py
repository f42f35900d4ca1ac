"""``make wheelhouse`` then ``make gpu-check-dry``: the GPU check's install and selection.

Runs the real scripts (tools/build_wheelhouse.sh, tools/gpu_check.sh --dry-run) with this
interpreter standing in for the GPU machine's python3: the wheelhouse is built from the
registries, the check installs from it alone into a fresh venv and runs the gpu tests (which
skip without CUDA), the CuPy-name tests and the benchmarks' GPU rows (left out without CUDA).
On a machine with CUDA the gpu tests run instead. The tests after the slow ones check that
neither script loses work: a failed wheelhouse build keeps the previous wheels, and the
check refuses a results folder it cannot use before it builds anything, and removes its
temporary venv.
"""
import os
import subprocess
import sys

import pytest

from tests.support.processes import own_env

# The scripts' behaviour, not the package's on this stack: make test runs this file on the
# stack of the GPU machine's Python (3.12), not on every stack (ONE_STACK in the Makefile).
pytestmark = pytest.mark.one_stack

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cuda_available():
    import chainer.backends.cuda
    return chainer.backends.cuda.available


@pytest.fixture(scope='module')
def dry_run(tmp_path_factory):
    root = tmp_path_factory.mktemp('gpu_check')
    wheelhouse = root / 'wheelhouse'
    # A previous wheelhouse, which a successful build replaces whole.
    wheelhouse.mkdir()
    (wheelhouse / 'stale-0.1-py3-none-any.whl').write_bytes(b'an earlier build')
    built = subprocess.run(['bash', os.path.join(REPO, 'tools', 'build_wheelhouse.sh'),
                            str(wheelhouse)], cwd=REPO, capture_output=True, text=True,
                           env=own_env(PYTHON=sys.executable), timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    results = root / 'results'
    # Neither this run's pytest state nor a PYTHONPATH of the caller's reaches the check's
    # venv: what it tests must come from the wheelhouse.
    env = own_env(GPU_CHECK_PYTHON=sys.executable, WHEELHOUSE=str(wheelhouse),
                  GPU_CHECK_VENV=str(root / 'venv'), OUT=str(results))
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


@pytest.mark.slow
def test_a_successful_build_replaces_the_previous_wheelhouse_whole(dry_run):
    wheelhouse, _, _ = dry_run
    assert 'stale-0.1-py3-none-any.whl' not in os.listdir(wheelhouse)
    # Nothing of the build is left beside it.
    assert sorted(p.name for p in wheelhouse.parent.iterdir() if 'wheelhouse' in p.name) == \
        ['wheelhouse']


def _script(name, args, env, timeout=120):
    return subprocess.run(['bash', os.path.join(REPO, 'tools', name)] + args, cwd=REPO,
                          capture_output=True, text=True, env=own_env(**env), timeout=timeout)


def test_a_failed_wheelhouse_build_keeps_the_previous_wheels(tmp_path):
    wheelhouse = tmp_path / 'wheelhouse'
    wheelhouse.mkdir()
    (wheelhouse / 'kept-1.0-py3-none-any.whl').write_bytes(b'the last good build')
    done = _script('build_wheelhouse.sh', [str(wheelhouse)], {'PYTHON': '/bin/false'})
    assert done.returncode != 0
    assert os.listdir(wheelhouse) == ['kept-1.0-py3-none-any.whl']
    assert (wheelhouse / 'kept-1.0-py3-none-any.whl').read_bytes() == b'the last good build'
    assert os.listdir(tmp_path) == ['wheelhouse'], 'a half-built folder was left behind'


def test_the_wheelhouse_build_refuses_a_path_that_is_a_regular_file(tmp_path):
    target = tmp_path / 'wheelhouse'
    target.write_text('not a folder')
    done = _script('build_wheelhouse.sh', [str(target)], {'PYTHON': '/bin/false'})
    assert done.returncode == 2, done.stderr
    assert 'is not a folder' in done.stderr
    assert target.read_text() == 'not a folder'


def _gpu_check(tmp_path, out):
    """tools/gpu_check.sh --dry-run with no wheelhouse, TMPDIR in tmp_path/tmp."""
    scratch = tmp_path / 'tmp'
    scratch.mkdir()
    done = _script('gpu_check.sh', ['--dry-run'], {
        'OUT': str(out), 'TMPDIR': str(scratch), 'WHEELHOUSE': str(tmp_path / 'no-wheelhouse'),
        'GPU_CHECK_PYTHON': sys.executable, 'GPU_CHECK_SECONDS': '60'}, timeout=300)
    return done, scratch


def test_the_gpu_check_refuses_a_results_folder_holding_another_run(tmp_path):
    results = tmp_path / 'results'
    results.mkdir()
    old = {'pytest-gpu.xml': '<testsuite tests="999" failures="0" errors="0" skipped="0"/>',
           'pip-list.txt': 'an earlier run', 'benchmarks-gpu.txt': 'an earlier run'}
    for name, text in old.items():
        (results / name).write_text(text)
    done, scratch = _gpu_check(tmp_path, results)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert 'is not empty' in done.stderr
    assert {p.name: p.read_text() for p in results.iterdir()} == old
    assert list(scratch.iterdir()) == [], 'a venv was built before the check refused'


def test_the_gpu_check_fails_before_building_a_venv_when_out_is_under_a_file(tmp_path):
    (tmp_path / 'a-file').write_text('')
    done, scratch = _gpu_check(tmp_path, tmp_path / 'a-file' / 'results')
    assert done.returncode == 2
    assert 'cannot write results' in done.stderr
    assert list(scratch.iterdir()) == []


def test_the_gpu_check_removes_its_venv_and_starts_no_tests_after_a_failed_install(tmp_path):
    results = tmp_path / 'results'
    done, scratch = _gpu_check(tmp_path, results)
    assert done.returncode == 1
    assert list(scratch.iterdir()) == [], 'the temporary venv was left behind'
    steps = dict(line.split('\t')[:2] for line in
                 (results / 'steps.tsv').read_text().splitlines())
    assert steps['venv'] == '0' and steps['install'] != '0'
    for name in ('versions', 'pytest-gpu', 'pytest-cupy-names', 'benchmarks-gpu'):
        assert steps[name] == 'not started', name
    summary = (results / 'summary.txt').read_text()
    assert 'pytest-gpu:' not in summary and 'FAILED: install' in summary
    assert not (results / 'pytest-gpu.xml').exists()
