"""Search workers started as cluster nodes start them, and what the tests read of them.

:func:`start_worker` starts ``python -m tests.support.search_worker`` in a working folder
of its own, with nothing of this process's environment but where the code is, on a
namespace host when given one (``tests/support/netns_hosts.py``) and under a host name of
its own when root can give one. :func:`wait_for_file` waits for what a worker reports
(``ready``, ``paused``), failing at once when a worker exits first; :func:`uninterrupted`
trains a learning rate's trial in a worker of its own, never stopped, once a session: the
reference a resumed trial is compared with, bit for bit. The ``nodes`` fixture gives two
hosts (or plain processes of this machine where namespaces cannot be made).
Used by tests/chainer/training/test_search_resume.py, test_search_postgres.py and
test_search_slurm.py.
"""
import json
import os
import subprocess
import sys
import time

import numpy
import pytest

from tests.support import leftovers, search_studies
from tests.support.processes import REPO

WORKER_TIMEOUT = 600
EVENT_TIMEOUT = 300
# The task's 128 examples in batches of 32: an epoch ends every 4 iterations.
ITERATIONS_PER_EPOCH = 4


@pytest.fixture
def nodes(host_network):
    """Two hosts in network namespaces where they can be made (root), else [None, None]:
    workers then run as plain processes of this machine."""
    if host_network is None:
        yield [None, None]
        return
    made = []
    try:
        for name in ('node-a', 'node-b'):
            made.append(host_network.add_host(name))
        yield made
    finally:
        for host in made:
            host_network.remove_host(host)


# What picks the BLAS kernels and their threads. The nodes of a cluster run alike, and the
# tests compare a worker's numbers bit for bit with this process's or another worker's: a
# worker without OPENBLAS_CORETYPE, on a machine whose environment sets it, would let
# OpenBLAS choose other kernels, and a loss's last bit would differ (seen on an AVX-512 CPU
# with OPENBLAS_CORETYPE=Haswell set for the machine).
_BLAS_PREFIXES = ('OPENBLAS_', 'GOTO_', 'OMP_', 'MKL_', 'NPY_')


def node_env(folder):
    """A cluster node's environment: nothing of this process's but where the code is and
    the settings that choose the BLAS kernels and threads (``_BLAS_PREFIXES``)."""
    env = {name: value for name, value in os.environ.items()
           if name.startswith(_BLAS_PREFIXES)}
    env.update({'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': str(folder),
                'LANG': 'C.UTF-8', 'PYTHONPATH': REPO})
    return leftovers.tagged(env)


def can_name_hosts():
    """Whether workers can take host names of their own (a UTS namespace needs root)."""
    return hasattr(os, 'geteuid') and os.geteuid() == 0


def start_worker(folder, storage, shared, n_trials, *options, host=None, hostname=None):
    """Starts a worker in ``folder`` (made here), its output in pipes (text)."""
    os.makedirs(folder)
    command = [sys.executable, '-m', 'tests.support.search_worker', shared, storage, n_trials,
               '--no-plots'] + list(options)
    if hostname is not None:
        command += ['--hostname', hostname]
    if host is not None:
        command = host.command(command)
    return subprocess.Popen([str(part) for part in command], cwd=str(folder),
                            env=node_env(folder), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_file(path, processes, timeout=EVENT_TIMEOUT):
    """Waits until ``path`` exists; fails at once when one of ``processes`` exits first."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for process in processes:
            if process.poll() is not None:
                pytest.fail('a worker exited ({}) before {} appeared: {}'.format(
                    process.returncode, path, process.communicate()[1][-3000:]))
        if time.monotonic() > deadline:
            pytest.fail('no {} within {} s'.format(path, timeout))
        time.sleep(0.05)


def paused(folder, processes):
    """What the worker of ``folder`` reports once paused (``--pause-at``): pid, trial
    folder, iteration."""
    wait_for_file(os.path.join(str(folder), 'paused'), processes)
    with open(os.path.join(str(folder), 'paused')) as stream:
        return json.load(stream)


def pause_after(folder, iterations):
    """Asks the worker of ``folder`` to pause ``iterations`` iterations from now."""
    path = os.path.join(str(folder), 'pause_after')
    with open(path + '.tmp', 'w') as stream:
        stream.write(str(iterations))
    os.replace(path + '.tmp', path)


def release(folder):
    """Lets the paused worker of ``folder`` go on."""
    with open(os.path.join(str(folder), 'go'), 'w') as stream:
        stream.write('go')


def finish(process, returncode=0):
    """Waits for a worker; checks its exit status; returns its report (None unless 0)."""
    out, err = process.communicate(timeout=WORKER_TIMEOUT)
    assert process.returncode == returncode, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]) if returncode == 0 else err


def end(processes):
    """Kills whatever of ``processes`` still runs (after a failed test)."""
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.communicate()


def arrays(path):
    """The arrays of an npz file, by name, as bytes (compared exactly)."""
    with numpy.load(str(path), allow_pickle=False) as stored:
        return {name: (stored[name].dtype.str, stored[name].shape, stored[name].tobytes())
                for name in stored.files}


def snapshot_iteration(path):
    """The iteration a Trainer snapshot holds."""
    with numpy.load(str(path), allow_pickle=False) as stored:
        return int(stored['updater/iteration'])


def newest_snapshot_iteration(folder):
    """The iteration of the newest ``snapshot_epoch_<n>`` in ``folder`` (None without)."""
    from researchutils.chainer.training._experiment import files as _model_files
    newest = _model_files.latest_snapshot(str(folder))
    return None if newest is None else snapshot_iteration(newest)


def log_rows(folder):
    """The LogReport rows of a trial folder, without the wall times."""
    with open(os.path.join(str(folder), 'log')) as stream:
        return [{key: value for key, value in row.items() if key != 'elapsed_time'}
                for row in json.load(stream)]


def enqueue(storage_url, learning_rates):
    """Makes the study ``exp`` at ``storage_url`` with trials of these rates first in line
    (its storage closed after)."""
    from tests.chainer.training import search_tasks
    with search_studies.closed_study(storage_url, create=True, load_if_exists=True) as study:
        for rate in learning_rates:
            study.enqueue_trial({search_tasks.LR_KEY: rate})


def default_url(shared):
    """The URL of the default study file of the experiment ``exp`` in ``shared``."""
    os.makedirs(os.path.join(str(shared), 'exp'), exist_ok=True)
    return 'sqlite:///' + os.path.join(str(shared), 'exp', 'search.db')


_uninterrupted = {}


def uninterrupted(tmp_path_factory, rate, num_epochs=3):
    """The trial of learning rate ``rate`` trained by a worker never stopped (once a
    session): its value, reported values, log rows and model files' arrays."""
    key = (rate, num_epochs)
    if key not in _uninterrupted:
        root = tmp_path_factory.mktemp('uninterrupted')
        shared = root / 'shared'
        enqueue(default_url(shared), [rate])
        process = start_worker(root / 'node', 'default', shared, 1, '--epochs', num_epochs)
        try:
            finish(process)
        finally:
            end([process])
        with search_studies.closed_study(default_url(shared)) as study:
            trial, = study.trials
        folder = shared / 'exp' / trial.user_attrs['folder']
        _uninterrupted[key] = {
            'value': trial.value, 'reported': dict(trial.intermediate_values),
            'log': log_rows(folder), 'best_model': arrays(folder / 'best_model.npz'),
            'final_model': arrays(folder / 'final_model.npz')}
    return _uninterrupted[key]
