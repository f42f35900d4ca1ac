"""MLflowReport when MLflow is slow, answers errors or is down: training never waits, and
nothing is lost (tests/support/mlflow_server.py's DelayingProxy stands between the real
client and the real server). MLflow's client makes retries of its own, which these tests
turn off (MLFLOW_HTTP_REQUEST_MAX_RETRIES=0), so that MLflowReport's retries are seen."""
import json
import os
import subprocess
import sys
import time
import uuid
import warnings

import chainer
import pytest

from researchutils.chainer.training.extensions import MLflowReport, Preempted
from researchutils.chainer.training.extensions.mlflow_report import send_unsent
from tests.support.mlflow_server import DelayingProxy
from tests.support.tracking_runs import logged_rows, tracked_trainer

mlflow = pytest.importorskip('mlflow')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
pytestmark = pytest.mark.timeout(120)
FAST_RETRIES = {'retry_backoff': 0.05, 'max_retry_backoff': 0.2}


@pytest.fixture(autouse=True)
def client_without_its_own_retries(monkeypatch):
    monkeypatch.setenv('MLFLOW_HTTP_REQUEST_MAX_RETRIES', '0')
    monkeypatch.setenv('MLFLOW_HTTP_REQUEST_TIMEOUT', '10')


@pytest.fixture
def experiment_name():
    return 'faults-' + uuid.uuid4().hex[:8]


def _history(url, run_id, key):
    client = mlflow.MlflowClient(url)
    return sorted((metric.step, metric.value) for metric in client.get_metric_history(run_id, key))


def _expected(out, key):
    return [(row['iteration'], pytest.approx(row[key], rel=1e-6)) for row in logged_rows(out)]


def _time_at_iterations(times):
    @chainer.training.make_extension(trigger=(1, 'iteration'))
    def note(trainer):
        times.append(time.monotonic())
    return note


def test_a_server_slow_by_half_a_second_a_request_never_slows_training(
        mlflow_server, tmp_path, experiment_name):
    times = []
    with DelayingProxy(mlflow_server.url, delay=0.5) as proxy:
        report = MLflowReport(proxy.url, experiment_name, parameters={'lr': 0.1})
        trainer = tracked_trainer(tmp_path, report)
        trainer.extend(_time_at_iterations(times))
        trainer.run()
        assert proxy.passed >= 4  # experiment, run, batches, end: each 0.5 s
    # Eight iterations and four reports, while the requests took two seconds and more.
    assert times[-1] - times[0] < 0.5
    assert _history(mlflow_server.url, report.run_id, 'main/loss') == _expected(
        tmp_path, 'main/loss')
    assert mlflow.MlflowClient(mlflow_server.url).get_run(report.run_id).info.status == \
        'FINISHED'


def test_errors_for_a_while_are_retried_and_nothing_is_lost(
        mlflow_server, tmp_path, experiment_name, caplog):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.fail(503, times=4)
        report = MLflowReport(proxy.url, experiment_name, **FAST_RETRIES)
        tracked_trainer(tmp_path, report).run()
        assert proxy.requests > proxy.passed  # the failed ones were retried
    assert _history(mlflow_server.url, report.run_id, 'main/loss') == _expected(
        tmp_path, 'main/loss')
    assert 'retrying in the background' in caplog.text
    assert 'MLflow at {} answers again'.format(proxy.url) in caplog.text
    assert not [name for name in os.listdir(tmp_path) if name.startswith('mlflow_unsent')]


def test_a_server_down_for_a_while_gets_everything_once_it_is_back(
        mlflow_server, tmp_path, experiment_name):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        report = MLflowReport(proxy.url, experiment_name, max_retries=100, **FAST_RETRIES)
        trainer = tracked_trainer(tmp_path, report)

        @chainer.training.make_extension(trigger=(6, 'iteration'))
        def back(trainer):
            proxy.recover()

        trainer.extend(back)
        trainer.run()
    assert _history(mlflow_server.url, report.run_id, 'main/loss') == _expected(
        tmp_path, 'main/loss')


def test_what_a_server_down_until_the_end_missed_is_kept_in_a_file_and_sent_later(
        mlflow_server, tmp_path, experiment_name):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        report = MLflowReport(proxy.url, experiment_name, parameters={'lr': 0.1},
                              max_retries=2, flush_timeout=5.0, **FAST_RETRIES)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            tracked_trainer(tmp_path, report).run()
    files = [name for name in os.listdir(tmp_path) if name.startswith('mlflow_unsent_')]
    assert files == ['mlflow_unsent_{}.json'.format(report.run_key)]
    path = str(tmp_path / files[0])
    assert any(path in str(warning.message) and '8 metric value(s)' in str(warning.message)
               for warning in caught)
    with open(path) as stream:
        kept = json.load(stream)
    assert 'python -m researchutils.chainer.training.extensions.mlflow_report' in kept['about']
    # The documented command, with the server now reachable at its own address.
    done = subprocess.run([sys.executable, '-m',
                           'researchutils.chainer.training.extensions.mlflow_report', path,
                           mlflow_server.url], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert '8 metric value(s) sent' in done.stdout
    assert not os.path.exists(path)
    client = mlflow.MlflowClient(mlflow_server.url)
    experiment = client.get_experiment_by_name(experiment_name)
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.status == 'FINISHED'
    assert run.data.params == {'lr': '0.1'}
    assert _history(mlflow_server.url, run.info.run_id, 'main/loss') == _expected(
        tmp_path, 'main/loss')


def test_sending_a_kept_file_twice_adds_no_point(mlflow_server, tmp_path, experiment_name):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        report = MLflowReport(proxy.url, experiment_name, max_retries=0, flush_timeout=5.0)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            tracked_trainer(tmp_path, report, stop_iteration=4).run()
    path = str(tmp_path / 'mlflow_unsent_{}.json'.format(report.run_key))
    with open(path) as stream:
        saved = stream.read()
    assert send_unsent(path, mlflow_server.url) == 4
    with open(path, 'w') as stream:
        stream.write(saved)
    send_unsent(path, mlflow_server.url)
    client = mlflow.MlflowClient(mlflow_server.url)
    [run] = client.search_runs([client.get_experiment_by_name(experiment_name).experiment_id])
    assert [step for step, _ in _history(mlflow_server.url, run.info.run_id, 'main/loss')] == [
        2, 4]


def test_a_file_that_is_not_a_kept_one_is_refused_naming_it(tmp_path):
    path = tmp_path / 'other.json'
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match='other.json is not a file of what MLflowReport'):
        send_unsent(path)


def test_a_run_preempted_before_the_server_gave_its_id_is_found_again_by_its_key(
        mlflow_server, tmp_path, experiment_name):
    # Slow enough that the snapshot at iteration 2 is written before the run exists: the
    # snapshot holds the key alone, and the resumed run finds the run by it.
    with DelayingProxy(mlflow_server.url, delay=0.5) as proxy:
        first = MLflowReport(proxy.url, experiment_name)
        with pytest.raises(Preempted):
            tracked_trainer(tmp_path, first, signal_at=2).run()
    import numpy
    with numpy.load(str(tmp_path / 'snapshot_iter_2')) as snapshot:
        assert str(snapshot['extensions/MLflowReport/_run_id']) == ''
        assert str(snapshot['extensions/MLflowReport/_run_key']) == first.run_key
    second = MLflowReport(mlflow_server.url, experiment_name)
    tracked_trainer(tmp_path, second).run()
    assert second.run_id == first.run_id
    assert [step for step, _ in _history(mlflow_server.url, first.run_id, 'main/loss')] == [
        2, 4, 6, 8]


def test_a_kept_file_that_cannot_be_written_is_a_warning_and_the_run_ends(
        mlflow_server, tmp_path, experiment_name):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        report = MLflowReport(proxy.url, experiment_name, max_retries=0, flush_timeout=5.0)
        os.makedirs(tmp_path / 'mlflow_unsent_{}.json'.format(report.run_key))  # in the way
        with pytest.warns(RuntimeWarning, match='could not be kept in .*mlflow_unsent_'):
            tracked_trainer(tmp_path, report, stop_iteration=2).run()


def test_a_store_that_refuses_never_stops_the_run(tmp_path, experiment_name, monkeypatch,
                                                  caplog, capfd):
    # MLflow 3's file store refuses to open (it is in maintenance mode).
    store = 'file://' + str(tmp_path / 'mlruns')
    monkeypatch.setenv('MLFLOW_TRACKING_URI', store)
    monkeypatch.delenv('MLFLOW_ALLOW_FILE_STORE', raising=False)
    report = MLflowReport(experiment_name=experiment_name, flush_timeout=5.0)
    trainer = tracked_trainer(tmp_path, report)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        trainer.run()
    assert trainer.updater.iteration == 8
    refusals = [record.getMessage() for record in caplog.records if 'refuses' in
                record.getMessage()]
    assert len(refusals) == 1 and store in refusals[0] and 'MlflowException' in refusals[0]
    path = tmp_path / 'mlflow_unsent_{}.json'.format(report.run_key)
    assert any(str(path) in str(warning.message) and store in str(warning.message)
               for warning in caught)
    with open(path) as stream:
        kept = json.load(stream)
    assert kept['tracking_uri'] == store and kept['end']['status'] == 'FINISHED'
    assert sorted(metric[3] for batch in kept['batches'] for metric in batch['metrics']) == [
        2, 2, 4, 4, 6, 6, 8, 8]
    assert 'Traceback' not in capfd.readouterr().err


def test_a_wait_at_the_end_longer_than_a_few_seconds_says_why_and_how_long(
        mlflow_server, tmp_path, experiment_name, caplog):
    from researchutils.chainer.training.extensions._background import NOTICE_AFTER
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.down()
        report = MLflowReport(proxy.url, experiment_name, max_retries=1000,
                              flush_timeout=NOTICE_AFTER + 1, **FAST_RETRIES)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            tracked_trainer(tmp_path, report, stop_iteration=2).run()
    [notice] = [record.getMessage() for record in caplog.records
                if 'waiting up to' in record.getMessage()]
    assert 'up to 1 s more (flush_timeout)' in notice
    assert proxy.url in notice and 'mlflow_unsent_' in notice
