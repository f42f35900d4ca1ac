"""ChainerExperiment.search with its study on a real PostgreSQL server, searched by worker
processes started as cluster nodes start them (tests/support/search_nodes.py): where the
tests run as root, on "hosts" of their own (network namespaces) that reach the server only
over their link."""
import json
import os
import random
import signal
import time

import pytest

from researchutils.chainer.serializers import load_model
from researchutils.chainer.training import ChainerExperiment, Parameters, load_json
from researchutils.chainer.training._experiment.search import folders
from tests.chainer.training import search_tasks, tasks
from tests.support import search_nodes, search_studies, search_worker

optuna = pytest.importorskip('optuna')
pytest.importorskip('psycopg', reason='needs the search-db extra (psycopg)')
optuna.logging.set_verbosity(optuna.logging.WARNING)

N_TRIALS = 6
STATES = optuna.trial.TrialState


def val_mse(model):
    """The model's MSE on the task's validation set, in plain NumPy."""
    val = tasks.LinearTask(32, seed=2)
    return tasks.numpy_mse(tasks.forward(model, val.data), val.labels)


def server_url(postgres_server, database, host_network):
    """The study's URL as the workers' hosts reach the server."""
    return postgres_server.url(database, host=(
        '127.0.0.1' if host_network is None else host_network.server_address))


def start_together(tmp_path, url, shared, n_trials, hosts, *options):
    """Starts a worker on each of ``hosts`` and lets them begin the search at once."""
    go_file = shared / 'go'
    folders_ = [tmp_path / 'node{}'.format(k) for k in range(len(hosts))]
    processes = []
    for folder, host in zip(folders_, hosts):
        processes.append(search_nodes.start_worker(folder, url, shared, n_trials, '--go',
                                                   go_file, *options, host=host))
    for folder in folders_:
        search_nodes.wait_for_file(folder / 'ready', processes)
    go_file.write_text('go')
    return folders_, processes


@pytest.mark.slow(reason='three interpreters, six trials, a re-run: 35-55 s on two busy cores')
@pytest.mark.timeout(900)
def test_three_workers_on_two_hosts_finish_one_search_on_a_postgresql_study(
        tmp_path, postgres_server, postgres_database, host_network, nodes):
    shared = tmp_path / 'shared'
    os.makedirs(shared)
    url = server_url(postgres_server, postgres_database, host_network)
    # Two workers on one host, one on another; or three processes of this machine.
    folders_, processes = start_together(tmp_path, url, shared, N_TRIALS,
                                         [nodes[0], nodes[0], nodes[1]])
    try:
        reports = [search_nodes.finish(process) for process in processes]
    finally:
        search_nodes.end(processes)

    # The workers reached the server from their hosts' addresses, over their links.
    workers_from = postgres_server.clients(postgres_database)
    assert workers_from == ({'127.0.0.1'} if host_network is None else {
        host.address for host in nodes})
    study = search_studies.load(postgres_server.url(postgres_database))
    complete = {t.number: t for t in study.trials if t.state == STATES.COMPLETE}
    assert len(complete) == N_TRIALS
    assert not [t for t in study.trials if t.state in (STATES.RUNNING, STATES.WAITING,
                                                       STATES.PRUNED)]
    # Each trial was trained once, by one worker, each worker in its own folder.
    ran = [[run['trial'] for run in report['trained']] for report in reports]
    assert sorted(sum(ran, [])) == sorted(complete)
    assert len([trials for trials in ran if trials]) >= 2, ran
    assert [report['cwd'] for report in reports] == [str(folder) for folder in folders_]

    exp = shared / 'exp'
    for number, trial in complete.items():
        model = tasks.Regressor()
        load_model(os.path.join(folders.folder_of(str(exp), 'exp', trial), 'best_model.npz'),
                   model)
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


KILLS = 3
KILL_SEED = 27
MANY_TRIALS = 12
# Heartbeats as a cluster's, but short; the grace is long, so that a busy machine never
# fails a live trial: the kills here are found by their pid (the hosts share this
# machine's pids and host name), by the worker started again on that host.
BEATS = ['--heartbeat', '2', '--grace', '60']


class Kill(object):
    """What a worker killed while paused leaves: its trial and that trial's newest
    snapshot."""

    def __init__(self, point):
        self.folder = point['folder']
        with open(os.path.join(self.folder, folders.OWNER_FILE)) as stream:
            self.trial = json.load(stream)['holder']
        self.snapshot = None

    def __repr__(self):
        return 'Kill(trial {}, snapshot at {})'.format(self.trial, self.snapshot)


def paused_or_done(folder, process):
    """Waits until the worker of ``folder`` pauses (its report of the moment) or ends
    (None)."""
    deadline = time.monotonic() + search_nodes.EVENT_TIMEOUT
    while not os.path.exists(folder / 'paused'):
        if process.poll() is not None:
            return None
        assert time.monotonic() < deadline, 'the worker of {} neither paused nor ended'.format(
            folder)
        time.sleep(0.05)
    return json.loads((folder / 'paused').read_text())


def kill_at_random_moments(tmp_path, url, shared, hosts, slots, rng):
    """Kills ``KILLS`` times a worker paused at a moment drawn from ``rng`` (a worker, and
    a number of iterations from the moment it is asked), starting a worker on the same
    host again each time; returns the kills and every report of a worker not killed."""
    kills, reports, started = [], [], len(slots)
    while len(kills) < KILLS:
        live = [slot for slot in range(len(slots))
                if slots[slot][1] is not None and slots[slot][1].poll() is None]
        assert live, 'every worker ended before {} kills: {}'.format(KILLS, kills)
        slot = rng.choice(live)
        folder, process = slots[slot]
        search_nodes.pause_after(folder, rng.randint(1, 10))
        point = paused_or_done(folder, process)
        if point is None:  # it finished its trials first: draw again
            reports.append(search_nodes.finish(process))
            slots[slot] = (folder, None)
            continue
        kill = Kill(point)
        process.send_signal(signal.SIGKILL)
        search_nodes.finish(process, -signal.SIGKILL)
        kill.snapshot = search_nodes.newest_snapshot_iteration(kill.folder)
        kills.append(kill)
        started += 1
        slots[slot] = (tmp_path / 'node{}'.format(started), search_nodes.start_worker(
            tmp_path / 'node{}'.format(started), url, shared, MANY_TRIALS, *BEATS,
            host=hosts[slot]))
    reports += [search_nodes.finish(process) for _, process in slots if process is not None]
    return kills, reports


@pytest.mark.slow(reason='four workers train twelve trials, three of them killed and '
                         'started again: 1-3 min on two busy cores')
@pytest.mark.timeout(1200)
def test_four_workers_killed_at_random_moments_lose_only_the_time_since_a_snapshot(
        tmp_path, tmp_path_factory, postgres_server, postgres_database, host_network, nodes):
    references = {rate: search_nodes.uninterrupted(tmp_path_factory, rate)
                  for rate in search_worker.LEARNING_RATES}
    shared = tmp_path / 'shared'
    os.makedirs(shared)
    url = server_url(postgres_server, postgres_database, host_network)
    hosts = [nodes[0], nodes[0], nodes[1], nodes[1]]
    folders_, processes = start_together(tmp_path, url, shared, MANY_TRIALS, hosts, *BEATS)
    slots = list(zip(folders_, processes))
    try:
        kills, reports = kill_at_random_moments(tmp_path, url, shared, hosts, slots,
                                                random.Random(KILL_SEED))
    finally:
        search_nodes.end(processes + [process for _, process in slots if process is not None])

    study = search_studies.load(postgres_server.url(postgres_database))
    trials = {t.number: t for t in study.trials}
    complete = [t for t in study.trials if t.state == STATES.COMPLETE]
    assert len(complete) == MANY_TRIALS
    assert len({t.number for t in complete}) == MANY_TRIALS
    exp = shared / 'exp'
    for trial in complete:
        # Its folder is its own, and holds what the trial never stopped gives, bit for bit.
        folder = folders.folder_of(str(exp), 'exp', trial)
        assert folder is not None, trial.number
        reference = references[trial.params[search_tasks.LR_KEY]]
        assert trial.value == reference['value'], trial.number
        assert search_nodes.arrays(os.path.join(folder, 'best_model.npz')) == \
            reference['best_model'], trial.number
    # Each killed trial was taken up by one retry, which resumed from the snapshot the kill
    # left, when there was one: its Trainer started there, not at iteration 0.
    started_at = {run['trial']: run['start_iteration'] for report in reports
                  for run in report['trained']}
    for kill in kills:
        assert trials[kill.trial].state == STATES.FAIL, kill
        retry, = [t for t in study.trials if t.system_attrs.get('retry_history', [None])[-1]
                  == kill.trial and not t.user_attrs.get('surplus')]
        assert retry.params == trials[kill.trial].params
        resumed = retry.user_attrs.get('resumed_at', {}).get('iteration')
        assert resumed == kill.snapshot, (kill, retry.user_attrs)
        if retry.number in started_at:  # trained to the end by a worker that reported it
            assert started_at[retry.number] == (kill.snapshot or 0), kill
    # search.json has each counted trial once; the best parameters run again score the same.
    saved = load_json(exp / 'search.json')
    counted = [entry for entry in saved['trials'] if entry['state'] == 'COMPLETE']
    assert sorted(entry['number'] for entry in counted) == sorted(t.number for t in complete)
    assert not [entry for entry in saved['trials'] if entry['number'] in
                {kill.trial for kill in kills}]
    best = Parameters.from_json(saved['best_params'], allowed_modules=['tests'])
    train, val = search_tasks.search_managers()
    model = ChainerExperiment(best, tasks.Regressor, name='again', save_path=str(tmp_path),
                              val_score_key='MSE', seed=0).run(train, val)
    assert val_mse(model) == pytest.approx(saved['best_score'], rel=1e-5)
