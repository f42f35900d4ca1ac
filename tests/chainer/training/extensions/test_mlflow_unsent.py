"""The file of what MLflowReport could not send (_mlflow_unsent), against a real MLflow server
(tests/support/mlflow_server.py) that a DelayingProxy makes unreachable: what the file keeps
across the tries of a run, where it is sent again, and that a resend never rewrites a run that
moved on. The reference is the LogReport's log of the same run."""
import json
import os
import subprocess
import sys
import uuid
import warnings

import pytest
from chainer.training import extensions

from researchutils.chainer.training.extensions import MLflowReport, Preempted, send_unsent
from tests.support.mlflow_server import DelayingProxy
from tests.support.tiny_training import Crash, crash_at
from tests.support.tracking_runs import logged_rows, tracked_trainer

mlflow = pytest.importorskip('mlflow')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
pytestmark = pytest.mark.timeout(120)
COMMAND = [sys.executable, '-m', 'researchutils.chainer.training.extensions.mlflow_report']


@pytest.fixture(autouse=True)
def client_without_its_own_retries(monkeypatch):
    monkeypatch.setenv('MLFLOW_HTTP_REQUEST_MAX_RETRIES', '0')
    monkeypatch.setenv('MLFLOW_HTTP_REQUEST_TIMEOUT', '10')


@pytest.fixture
def experiment_name():
    return 'unsent-' + uuid.uuid4().hex[:8]


def _history(url, run_id, key):
    client = mlflow.MlflowClient(url)
    return sorted((metric.step, metric.value) for metric in client.get_metric_history(run_id, key))


def _expected(out, key):
    return [(row['iteration'], pytest.approx(row[key], rel=1e-6)) for row in logged_rows(out)]


def _only_run(url, experiment_name):
    client = mlflow.MlflowClient(url)
    [run] = client.search_runs([client.get_experiment_by_name(experiment_name).experiment_id])
    return run


def _quietly(run):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        run()


def test_a_stale_file_sent_after_the_resumed_run_finished_adds_only_the_missing_points(
        mlflow_server, tmp_path, experiment_name):
    # Try 1, server down: reports 2, 4, 6, snapshots at 4, crashes at 6; its file ends FAILED.
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        first = MLflowReport(proxy.url, experiment_name, max_retries=0, flush_timeout=5.0)
        trainer = tracked_trainer(tmp_path, first)
        trainer.extend(extensions.snapshot(filename='snapshot_iter_{.updater.iteration}'),
                       trigger=(4, 'iteration'))
        trainer.extend(crash_at(6))
        with pytest.raises(Crash):
            _quietly(trainer.run)
    path = str(tmp_path / 'mlflow_unsent_{}.json'.format(first.run_key))
    with open(path) as stream:
        assert json.load(stream)['end']['status'] == 'FAILED'
    # Try 2, server up: resumes at 4, reports 6 again and 8, and ends FINISHED.
    second = MLflowReport(mlflow_server.url, experiment_name)
    tracked_trainer(tmp_path, second).run()
    assert mlflow.MlflowClient(mlflow_server.url).get_run(second.run_id).info.status == \
        'FINISHED'
    done = subprocess.run(COMMAND + [path, mlflow_server.url], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '4 metric value(s) sent' in done.stdout  # steps 2 and 4 of both keys
    assert '2 metric value(s) at steps the run holds already' in done.stderr
    assert 'its status FINISHED stays, not FAILED' in done.stderr
    run = _only_run(mlflow_server.url, experiment_name)
    assert run.info.status == 'FINISHED'
    for key in ('main/loss', 'main/accuracy'):
        assert [step for step, _ in _history(mlflow_server.url, run.info.run_id, key)] == [
            2, 4, 6, 8]
    # Step 6 keeps the resumed try's value, the one its log (the reference) holds.
    assert _history(mlflow_server.url, run.info.run_id, 'main/loss') == _expected(
        tmp_path, 'main/loss')


def test_the_file_of_a_preempted_run_and_its_resumed_continuation_holds_both(
        mlflow_server, tmp_path, experiment_name):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        first = MLflowReport(proxy.url, experiment_name, max_retries=0, flush_timeout=5.0)
        with pytest.raises(Preempted):
            _quietly(tracked_trainer(tmp_path, first, signal_at=4).run)
        second = MLflowReport(proxy.url, experiment_name, max_retries=0, flush_timeout=5.0)
        _quietly(tracked_trainer(tmp_path, second).run)
    assert second.run_key == first.run_key
    path = tmp_path / 'mlflow_unsent_{}.json'.format(first.run_key)
    with open(path) as stream:
        kept = json.load(stream)
    assert sorted(metric[3] for batch in kept['batches'] for metric in batch['metrics']) == [
        2, 2, 4, 4, 6, 6, 8, 8]
    assert send_unsent(path, mlflow_server.url) == 8
    run = _only_run(mlflow_server.url, experiment_name)
    assert run.info.status == 'FINISHED'
    assert _history(mlflow_server.url, run.info.run_id, 'main/loss') == _expected(
        tmp_path, 'main/loss')


def test_the_file_is_sent_to_the_store_named_when_the_run_started(
        mlflow_server, tmp_path, experiment_name, monkeypatch, caplog):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        monkeypatch.setenv('MLFLOW_TRACKING_URI', proxy.url)
        report = MLflowReport(experiment_name=experiment_name, max_retries=0,
                              flush_timeout=5.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            tracked_trainer(tmp_path / 'out', report, stop_iteration=4).run()
        monkeypatch.delenv('MLFLOW_TRACKING_URI')
        path = str(tmp_path / 'out' / 'mlflow_unsent_{}.json'.format(report.run_key))
        assert report.tracking_uri == proxy.url
        assert any(proxy.url in str(warning.message) and path in str(warning.message)
                   for warning in caught)
        assert 'MLflow at {} does not answer'.format(proxy.url) in caplog.text
        with open(path) as stream:
            assert json.load(stream)['tracking_uri'] == proxy.url
        proxy.recover()
        # Later, in a shell without the variable, in a folder of its own.
        environment = {key: value for key, value in os.environ.items()
                       if key != 'MLFLOW_TRACKING_URI'}
        environment['PYTHONPATH'] = REPO
        shell = tmp_path / 'shell'
        shell.mkdir()
        done = subprocess.run(COMMAND + [path], cwd=str(shell), env=environment,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '4 metric value(s) sent' in done.stdout
    assert os.listdir(shell) == []  # no store of MLflow's default made here
    run = _only_run(mlflow_server.url, experiment_name)
    assert run.info.status == 'FINISHED'
    assert _history(mlflow_server.url, run.info.run_id, 'main/loss') == _expected(
        tmp_path / 'out', 'main/loss')
