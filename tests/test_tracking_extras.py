"""The tracking tutorial (docs/tutorials/tracking.rst) run with what each extra installs: a
venv holding researchutils' wheel with ``[tensorboard]`` alone runs the TensorBoard part and
its ``tensorboard --logdir``; one with ``[mlflow]`` alone runs the MLflow part against the
server that the tutorial's own command starts (that command runs in the environment that has
the full ``mlflow``, as the tutorial's ``pip install mlflow`` would make it). Each venv is
installed from PyPI (pip's cache makes a second run quicker): minutes, so ``slow``."""
import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support import wheel
from tests.support.mlflow_server import answers, find_server_python, free_port
from tests.support.processes import own_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIAL = os.path.join(REPO, 'docs', 'tutorials', 'tracking.rst')
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
WAIT = 120.0

# Runs the doctest examples of the tutorial's introduction and one of its sections, in the
# venv: the standard library alone reads them.
_DRIVER = '''
import doctest, re, sys
text = open(sys.argv[1], encoding='utf-8').read()
sections = re.split(r'\\n(?=[^\\n]+\\n-{3,}\\n)', text)
chosen = [s for s in sections if s.startswith(('A small run', sys.argv[2] + '\\n'))]
assert len(chosen) == 2, [s.splitlines()[0] for s in sections]
test = doctest.DocTestParser().get_doctest('\\n'.join(chosen), {}, sys.argv[2], None, 0)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test)
print('examples', runner.summarize(verbose=False))
sys.exit(1 if runner.failures or not runner.tries else 0)
'''


def _venv_with(extra, researchutils_wheel, folder):
    python = wheel.make_venv(folder / 'venv')
    constraint = os.path.join(REPO, 'build-constraints.txt')
    environment = own_env(PIP_BUILD_CONSTRAINT=constraint, PIP_CONSTRAINT='')
    done = subprocess.run([sys.executable, '-m', 'pip', '--python', python, '-q',
                           '--disable-pip-version-check', 'install',
                           '{}[{}]'.format(researchutils_wheel, extra)], env=environment,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return python


def _tutorial_command(pattern):
    """The first line of a ``::`` block of the tutorial that matches ``pattern``."""
    with open(TUTORIAL, encoding='utf-8') as stream:
        return next(line.strip() for line in stream if re.match(pattern, line.strip()))


def _run_section(python, section, folder, **environment):
    return subprocess.run([python, '-c', _DRIVER, TUTORIAL, section], cwd=str(folder),
                          env=own_env(**environment), capture_output=True, text=True,
                          timeout=600)


def _answers_http(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _wait_until(condition, process, what):
    deadline = time.monotonic() + WAIT
    while not condition():
        assert process.poll() is None, '{} exited: {}'.format(what, process.stderr.read())
        assert time.monotonic() < deadline, '{} did not answer within {} s'.format(what, WAIT)
        time.sleep(0.2)


def _stop(process):
    """Ends ``process`` (SIGTERM, then SIGKILL) and closes its pipes."""
    process.terminate()
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def test_the_tensorboard_part_runs_with_the_tensorboard_extra(researchutils_wheel, tmp_path):
    python = _venv_with('tensorboard', researchutils_wheel, tmp_path)
    done = _run_section(python, 'TensorBoard', tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open(TUTORIAL, encoding='utf-8') as stream:
        assert '``tensorboard --logdir result``' in stream.read()  # the command, in prose
    port = free_port()
    viewer = subprocess.Popen(
        [os.path.join(os.path.dirname(python), 'tensorboard'), '--logdir', 'result',
         '--host', '127.0.0.1', '--port', str(port)], cwd=str(tmp_path),
        env=own_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = 'http://127.0.0.1:{}'.format(port)
        _wait_until(lambda: _answers_http(url + '/data/runs'), viewer, 'tensorboard')
        with urllib.request.urlopen(url + '/data/runs', timeout=10) as response:
            assert 'tensorboard' in response.read().decode()
    finally:
        _stop(viewer)


def test_the_mlflow_part_runs_with_the_mlflow_extra_and_the_server_the_tutorial_starts(
        researchutils_wheel, tmp_path):
    server_python = find_server_python()
    if server_python is None:
        pytest.skip('no Python here has the full mlflow (the server)')
    python = _venv_with('mlflow', researchutils_wheel, tmp_path)
    assert _tutorial_command(r'pip install mlflow$') == 'pip install mlflow'
    start = _tutorial_command(r'mlflow server ')
    assert start == ('mlflow server --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 '
                     '--port 5000')
    port = free_port()
    arguments = start.split()[1:-1] + [str(port)]  # a free port for the tutorial's 5000
    server = subprocess.Popen(
        [server_python, '-m', 'mlflow'] + arguments, cwd=str(tmp_path), stdin=subprocess.DEVNULL,
        env=own_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION='false',
                    MLFLOW_DISABLE_TELEMETRY='true'),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = 'http://127.0.0.1:{}'.format(port)
        _wait_until(lambda: answers(url), server, 'mlflow server')
        done = _run_section(python, 'MLflow', tmp_path, MLFLOW_TRACKING_URI=url)
    finally:
        _stop(server)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert os.path.exists(tmp_path / 'mlflow.db')  # the tutorial's store
