"""ChainerExperiment.search with its study on a real PostgreSQL server, searched by worker
processes started as cluster nodes start them: where the tests run as root, on "hosts" of
their own (network namespaces) that reach the server only over their link."""
import json
import os
import subprocess
import sys
import time

import pytest

from researchutils.chainer.serializers import load_model
from researchutils.chainer.training import ChainerExperiment, Parameters, load_json
from tests.chainer.training import search_tasks, tasks
from tests.support import search_worker
from tests.support.processes import REPO

optuna = pytest.importorskip('optuna')
pytest.importorskip('psycopg', reason='needs the search-db extra (psycopg)')
optuna.logging.set_verbosity(optuna.logging.WARNING)

N_TRIALS = 6
WORKER_TIMEOUT = 600
STATES = optuna.trial.TrialState


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


def node_env(folder):
    """A cluster node's environment: nothing of this process's but where the code is."""
    return {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': str(folder), 'LANG': 'C.UTF-8',
            'PYTHONPATH': REPO}


def start_worker(folder, url, shared, go_file, host=None):
    os.makedirs(folder)
    command = [sys.executable, '-m', 'tests.support.search_worker', shared, url, N_TRIALS,
               '--go', go_file, '--no-plots']
    if host is not None:
        command = host.command(command)
    return subprocess.Popen([str(part) for part in command], cwd=folder,
                            env=node_env(folder), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_files(paths, processes, timeout):
    """Waits until every path exists; fails at once when a worker exits first."""
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(path) for path in paths):
        for process in processes:
            if process.poll() is not None:
                pytest.fail('a worker exited ({}) before it was ready: {}'.format(
                    process.returncode, process.communicate()[1][-3000:]))
        if time.monotonic() > deadline:
            pytest.fail('the workers were not all ready within {} s'.format(timeout))
        time.sleep(0.05)


def finish(process):
    out, err = process.communicate(timeout=WORKER_TIMEOUT)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def val_mse(model):
    """The model's MSE on the task's validation set, in plain NumPy."""
    val = tasks.LinearTask(32, seed=2)
    return tasks.numpy_mse(tasks.forward(model, val.data), val.labels)


@pytest.mark.slow  # three interpreters, six trials, a re-run: 35-55 s on two busy cores
@pytest.mark.timeout(900)
def test_three_workers_on_two_hosts_finish_one_search_on_a_postgresql_study(
        tmp_path, postgres_server, postgres_database, host_network, nodes):
    shared = tmp_path / 'shared'
    os.makedirs(shared)
    go_file = shared / 'go'
    # Two workers on one host, one on another; or three processes of this machine.
    hosts = [nodes[0], nodes[0], nodes[1]]
    url = postgres_server.url(postgres_database, host=(
        '127.0.0.1' if host_network is None else host_network.server_address))
    folders = [tmp_path / 'node{}'.format(k) for k in range(3)]
    processes = []
    try:
        for folder, host in zip(folders, hosts):
            processes.append(start_worker(folder, url, shared, go_file, host))
        wait_for_files([folder / 'ready' for folder in folders], processes, WORKER_TIMEOUT)
        go_file.write_text('go')
        reports = [finish(process) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()

    # The workers reached the server from their hosts' addresses, over their links.
    workers_from = postgres_server.clients(postgres_database)
    assert workers_from == ({'127.0.0.1'} if host_network is None else {
        host.address for host in nodes})
    study = optuna.load_study(study_name='exp', storage=postgres_server.url(postgres_database))
    complete = {t.number: t for t in study.trials if t.state == STATES.COMPLETE}
    assert len(complete) == N_TRIALS
    assert not [t for t in study.trials if t.state in (STATES.RUNNING, STATES.WAITING,
                                                       STATES.PRUNED)]
    # Each trial was trained once, by one worker, each worker in its own folder.
    ran = [report['trials'] for report in reports]
    assert sorted(sum(ran, [])) == sorted(complete)
    assert len([trials for trials in ran if trials]) >= 2, ran
    assert [report['cwd'] for report in reports] == [str(folder) for folder in folders]

    exp = shared / 'exp'
    for number, trial in complete.items():
        model = tasks.Regressor()
        load_model(str(exp / 'trial_{}'.format(number) / 'best_model.npz'), model)
        assert val_mse(model) == pytest.approx(trial.value, rel=1e-5), number

    saved = load_json(exp / 'search.json')
    assert saved['study_name'] == 'exp' and saved['direction'] == 'minimize'
    for entry in saved['trials']:
        if entry['state'] == 'COMPLETE':
            assert entry['score'] == complete[entry['number']].value
    assert saved['best_score'] == complete[saved['best_trial']].value

    # The best parameters, trained again from scratch, score the same.
    best = Parameters.from_json(saved['best_params'], allowed_modules=['tests'])
    assert best.training['optimizer_params']['lr'] in search_worker.LEARNING_RATES
    train, val = search_tasks.search_managers()
    again = ChainerExperiment(best, tasks.Regressor, name='again', save_path=str(tmp_path),
                              val_score_key='MSE', seed=0)
    model = again.run(train, val)
    assert val_mse(model) == pytest.approx(saved['best_score'], rel=1e-5)
