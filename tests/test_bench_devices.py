"""``BENCH_DEVICES`` selects the benchmark rows (benchmarks/_timing.py ``bench_devices``).

The GPU check (tools/gpu_check.sh) runs the GPU rows alone with ``BENCH_DEVICES=gpu``.
Each test runs a real benchmark script, with one round of one step, in a subprocess.
"""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, 'benchmarks', 'bench_data_parallel.py')


def _run(devices):
    env = dict(os.environ, BENCH_DEVICES=devices)
    return subprocess.run([sys.executable, SCRIPT, '--rounds', '1', '--steps', '1'],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def _cuda_available():
    import chainer.backends.cuda
    return chainer.backends.cuda.available


def test_gpu_alone_leaves_out_every_cpu_row():
    done = _run('gpu')
    assert done.returncode == 0, done.stderr
    assert '@numpy' not in done.stdout
    if _cuda_available():
        assert '@cupy:0' in done.stdout
    else:
        assert 'GPU rows skipped: CuPy sees no GPU' in done.stdout


def test_cpu_alone_times_the_cpu_rows_and_says_nothing_of_the_gpu():
    done = _run('cpu')
    assert done.returncode == 0, done.stderr
    assert 'tiny MLP' in done.stdout and '@numpy' in done.stdout
    assert 'GPU' not in done.stdout and '@cupy' not in done.stdout


@pytest.mark.parametrize('devices', ['tpu', 'cpu,gpus'])
def test_an_unknown_device_kind_is_refused_naming_the_variable_and_value(devices):
    done = _run(devices)
    assert done.returncode != 0
    assert 'BENCH_DEVICES' in done.stderr and repr(devices) in done.stderr
