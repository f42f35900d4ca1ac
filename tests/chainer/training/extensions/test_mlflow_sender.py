"""MLflowReport's sending thread (_mlflow_sender) against a real MLflow server behind a
DelayingProxy (tests/support/mlflow_server.py): what it retries and how long it waits, the
run it sets running again, and the rows that wait for room in its queue."""
import threading
import time
import uuid

import chainer
import numpy
import pytest
from chainer.training import extensions

from researchutils.chainer.training.extensions import MLflowReport, Preempted
from researchutils.chainer.training.extensions._mlflow_sender import Batch, Sender
from tests.support.mlflow_server import DelayingProxy
from tests.support.tracking_runs import logged_rows, tracked_trainer

mlflow = pytest.importorskip('mlflow')
pytestmark = pytest.mark.timeout(120)
WAIT = 60.0  # seconds a test waits for something the server must see


@pytest.fixture(autouse=True)
def client_without_its_own_retries(monkeypatch):
    monkeypatch.setenv('MLFLOW_HTTP_REQUEST_MAX_RETRIES', '0')
    monkeypatch.setenv('MLFLOW_HTTP_REQUEST_TIMEOUT', '10')


@pytest.fixture
def experiment_name():
    return 'sender-' + uuid.uuid4().hex[:8]


def _steps(url, run_id, key='main/loss'):
    return sorted(metric.step for metric in
                  mlflow.MlflowClient(url).get_metric_history(run_id, key))


def test_a_rate_limit_is_retried_and_every_metric_arrives_unrefused(
        mlflow_server, tmp_path, experiment_name, caplog):
    with DelayingProxy(mlflow_server.url) as proxy:
        proxy.fail(429, times=4)
        report = MLflowReport(proxy.url, experiment_name, retry_backoff=0.05,
                              max_retry_backoff=0.2)
        tracked_trainer(tmp_path, report).run()  # a RuntimeWarning would fail it
        assert proxy.requests > proxy.passed
    assert 'refused' not in caplog.text
    assert 'retrying in the background' in caplog.text
    client = mlflow.MlflowClient(mlflow_server.url)
    assert _steps(mlflow_server.url, report.run_id) == [
        row['iteration'] for row in logged_rows(tmp_path)]
    assert client.get_run(report.run_id).info.status == 'FINISHED'


def test_a_resumed_run_is_running_again_while_it_logs(mlflow_server, tmp_path, experiment_name):
    client = mlflow.MlflowClient(mlflow_server.url)
    statuses = []

    @chainer.training.make_extension(trigger=(8, 'iteration'))
    def status_once_step_6_arrived(trainer):
        run_id = first.run_id  # known since the first try ended
        deadline = time.monotonic() + WAIT
        while 6 not in _steps(mlflow_server.url, run_id):
            assert time.monotonic() < deadline, 'step 6 never reached MLflow'
            time.sleep(0.05)
        statuses.append(client.get_run(run_id).info.status)

    @chainer.training.make_extension(trigger=(3, 'iteration'))
    def run_id_known(trainer):  # so the snapshot of iteration 4 holds it
        deadline = time.monotonic() + WAIT
        while trainer.get_extension('MLflowReport').run_id is None:
            assert time.monotonic() < deadline, 'MLflow never gave the run an id'
            time.sleep(0.05)

    first = MLflowReport(mlflow_server.url, experiment_name)
    trainer = tracked_trainer(tmp_path, first, signal_at=4)
    # In both tries: the snapshot holds their triggers.
    trainer.extend(status_once_step_6_arrived)
    trainer.extend(run_id_known)
    with pytest.raises(Preempted):
        trainer.run()
    with numpy.load(str(tmp_path / 'snapshot_iter_4')) as snapshot:
        assert str(snapshot['extensions/MLflowReport/_run_id']) == first.run_id
    assert client.get_run(first.run_id).info.status == 'KILLED'
    second = MLflowReport(mlflow_server.url, experiment_name)
    trainer = tracked_trainer(tmp_path, second)
    trainer.extend(status_once_step_6_arrived)
    trainer.extend(run_id_known)
    trainer.run()
    assert second.run_id == first.run_id
    assert statuses == ['RUNNING']
    assert client.get_run(first.run_id).info.status == 'FINISHED'


class _HeldProxy(DelayingProxy):
    """A DelayingProxy that holds every request while :attr:`hold` is cleared."""

    def __init__(self, target):
        super().__init__(target)
        self.hold = threading.Event()
        self.hold.set()

    def _fault(self):
        assert self.hold.wait(WAIT), 'the proxy was held too long'
        return super()._fault()


def test_rows_waiting_for_room_in_the_queue_at_a_snapshot_all_reach_mlflow(
        mlflow_server, tmp_path, experiment_name):
    with _HeldProxy(mlflow_server.url) as proxy:
        proxy.hold.clear()  # the sender's first request waits: the queue (1) fills
        report = MLflowReport(proxy.url, experiment_name, queue_size=1)

        @chainer.training.make_extension(trigger=(5, 'iteration'))
        def release(trainer):  # after the snapshot of iteration 4
            proxy.hold.set()

        trainer = tracked_trainer(tmp_path, report)
        trainer.extend(extensions.snapshot(filename='snapshot_iter_{.updater.iteration}'),
                       trigger=(4, 'iteration'))
        trainer.extend(release)
        trainer.run()
    with numpy.load(str(tmp_path / 'snapshot_iter_4')) as snapshot:  # row 4 waited
        assert int(snapshot['extensions/MLflowReport/_rows_taken']) < 2
    assert _steps(mlflow_server.url, report.run_id) == [2, 4, 6, 8]
    assert _steps(mlflow_server.url, report.run_id, 'main/accuracy') == [2, 4, 6, 8]


class _RecordedWaits(threading.Event):
    """The sender's abort event, recording the waits asked of it and returning at once."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return False


@pytest.mark.parametrize('max_retry_backoff, expected', [
    (100.0, [0.25, 0.5, 1.0, 2.0, 4.0]),
    (0.75, [0.25, 0.5, 0.75, 0.75, 0.75]),
])
def test_the_first_retry_waits_retry_backoff_and_each_later_one_twice_as_long(
        max_retry_backoff, expected, experiment_name):
    with DelayingProxy('http://127.0.0.1:9') as proxy:
        proxy.down()
        client = mlflow.MlflowClient(proxy.url)
        run = {'tracking_uri': proxy.url, 'experiment_name': experiment_name,
               'run_key': uuid.uuid4().hex, 'run_id': None, 'tags': {}}
        sender = Sender(client, run, 1, 5, 0.25, max_retry_backoff)
        sender.abort = _RecordedWaits()
        assert sender.deliver(sender._send, [Batch([['x', 1.0, 0, 1]])]) is False
    assert sender.abort.waits == expected
    assert proxy.requests == 6  # the first try and five retries
