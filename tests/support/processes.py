"""Python subprocesses that run this checkout's researchutils, and none left behind.

:func:`start_module` runs ``python -m MODULE ...`` from the repository root with the
checkout first on ``PYTHONPATH`` (so the child tests this code even where another copy
is installed); :func:`no_process_left` is a fixture that kills whatever a failed test
left running. Used by the preemption tests, which signal such processes.
"""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_started = []


def checkout_env(env=None):
    """``env`` (default: this process's) with this checkout first on ``PYTHONPATH``."""
    env = dict(os.environ if env is None else env)
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [REPO, env.get('PYTHONPATH')]))
    return env


def start_module(module, *arguments, env=None):
    """Starts ``python -m module arguments...``, its output in pipes (text)."""
    process = subprocess.Popen([sys.executable, '-m', module] + [str(a) for a in arguments],
                               cwd=REPO, env=checkout_env(env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _started.append(process)
    return process


@pytest.fixture
def no_process_left():
    """After the test, kills every process :func:`start_module` started that still runs."""
    yield
    while _started:
        process = _started.pop()
        if process.poll() is None:  # a test failed while it ran
            process.kill()
            process.communicate()
