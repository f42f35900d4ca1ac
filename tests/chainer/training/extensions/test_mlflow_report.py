"""MLflowReport against a real MLflow server (tests/support/mlflow_server.py), read back with
MlflowClient; the reference for every value is the LogReport's log file of the same run.
Faults (a slow, failing or absent server) are in test_mlflow_report_faults.py."""
import hashlib
import math
import os
import subprocess
import sys
import uuid

import chainer
import pytest
from chainer.training import extensions

from researchutils.chainer.training.extensions import MLflowReport, Preempted
from tests.support.tiny_training import Crash, crash_at
from tests.support.tracking_runs import logged_rows, tracked_trainer

mlflow = pytest.importorskip('mlflow')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def experiment_name():
    return 'test-' + uuid.uuid4().hex[:8]


def _history(client, run_id, key):
    return sorted((metric.step, metric.value) for metric in client.get_metric_history(run_id, key))


def _expected(out, key):
    return [(row['iteration'], pytest.approx(row[key], rel=1e-6)) for row in logged_rows(out)]


def _runs(client, experiment_name):
    experiment = client.get_experiment_by_name(experiment_name)
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


def test_metrics_and_parameters_reach_the_run_which_ends_finished(
        mlflow_server, tmp_path, experiment_name):
    report = MLflowReport(mlflow_server.url, experiment_name, run_name='tiny',
                          parameters={'model': {'n_units': 20}, 'lr': 0.1, 'augment': True},
                          tags={'purpose': 'test'})
    tracked_trainer(tmp_path, report).run()
    client = mlflow.MlflowClient(mlflow_server.url)
    run = client.get_run(report.run_id)
    assert run.info.status == 'FINISHED'
    assert run.info.run_name == 'tiny'
    assert run.data.params == {'model/n_units': '20', 'lr': '0.1', 'augment': 'True'}
    assert run.data.tags['purpose'] == 'test'
    for key in ('main/loss', 'main/accuracy'):
        assert _history(client, report.run_id, key) == _expected(tmp_path, key)
    assert sorted(run.data.metrics) == ['main/accuracy', 'main/loss']


def test_a_crashed_run_ends_failed_with_what_was_reported_before(
        mlflow_server, tmp_path, experiment_name):
    report = MLflowReport(mlflow_server.url, experiment_name)
    trainer = tracked_trainer(tmp_path, report)
    trainer.extend(crash_at(5))
    with pytest.raises(Crash):
        trainer.run()
    client = mlflow.MlflowClient(mlflow_server.url)
    assert client.get_run(report.run_id).info.status == 'FAILED'
    assert _history(client, report.run_id, 'main/loss') == _expected(tmp_path, 'main/loss')


def test_a_preempted_run_resumed_appends_to_the_same_run(
        mlflow_server, tmp_path, experiment_name):
    first = MLflowReport(mlflow_server.url, experiment_name, parameters={'lr': 0.1})
    with pytest.raises(Preempted):
        tracked_trainer(tmp_path, first, signal_at=4).run()
    client = mlflow.MlflowClient(mlflow_server.url)
    assert client.get_run(first.run_id).info.status == 'KILLED'
    second = MLflowReport(mlflow_server.url, experiment_name, parameters={'lr': 0.1})
    tracked_trainer(tmp_path, second).run()
    assert second.run_id == first.run_id
    assert [run.info.run_id for run in _runs(client, experiment_name)] == [first.run_id]
    assert client.get_run(first.run_id).info.status == 'FINISHED'
    history = _history(client, first.run_id, 'main/loss')
    assert history == _expected(tmp_path, 'main/loss')
    assert [step for step, _ in history] == [2, 4, 6, 8]


def test_a_fresh_run_in_the_folder_of_a_finished_one_opens_a_new_run(
        mlflow_server, tmp_path, experiment_name):
    first = MLflowReport(mlflow_server.url, experiment_name)
    tracked_trainer(tmp_path, first).run()
    for name in os.listdir(tmp_path):
        if name.startswith('snapshot'):
            os.remove(tmp_path / name)
    second = MLflowReport(mlflow_server.url, experiment_name)
    tracked_trainer(tmp_path, second, stop_iteration=4).run()
    assert second.run_id != first.run_id
    client = mlflow.MlflowClient(mlflow_server.url)
    assert [step for step, _ in _history(client, second.run_id, 'main/loss')] == [2, 4]
    assert [step for step, _ in _history(client, first.run_id, 'main/loss')] == [2, 4, 6, 8]


def test_a_child_run_links_to_its_parent(mlflow_server, tmp_path, experiment_name):
    client = mlflow.MlflowClient(mlflow_server.url)
    parent = client.create_run(client.create_experiment(experiment_name)).info.run_id
    report = MLflowReport(mlflow_server.url, experiment_name, parent_run_id=parent,
                          tags={'trial': '3'})
    tracked_trainer(tmp_path, report, stop_iteration=2).run()
    children = client.search_runs([client.get_experiment_by_name(experiment_name)
                                   .experiment_id],
                                  "tags.`mlflow.parentRunId` = '{}'".format(parent))
    assert [run.info.run_id for run in children] == [report.run_id]
    assert children[0].data.tags['trial'] == '3'


def _report_values(values):
    """An extension reporting ``values`` before LogReport reads the observation."""
    @chainer.training.make_extension(trigger=(1, 'iteration'),
                                     priority=chainer.training.PRIORITY_WRITER + 1)
    def report(trainer):
        chainer.reporter.report(values)
    return report


def test_nan_infinity_and_refused_names_never_stop_training(
        mlflow_server, tmp_path, experiment_name, caplog):
    report = MLflowReport(mlflow_server.url, experiment_name)
    trainer = tracked_trainer(tmp_path, report, stop_iteration=4)
    long = 'y' * 260
    trainer.extend(_report_values({'nan': float('nan'), 'inf': float('inf'),
                                   'acc@1 (top)': 0.5, '/odd//path/': 1.0,
                                   'acc#1 (top)': 0.25, long + 'A': 2.0, long + 'B': 3.0}))
    trainer.run()
    client = mlflow.MlflowClient(mlflow_server.url)
    run = client.get_run(report.run_id)
    assert run.info.status == 'FINISHED'
    assert all(math.isnan(value) for _, value in _history(client, report.run_id, 'nan'))
    # MLflow's SQL store keeps an infinity as the largest float, as its documentation says.
    assert [value for _, value in _history(client, report.run_id, 'inf')] == [
        sys.float_info.max] * 2
    assert _history(client, report.run_id, 'acc_1 _top_') == [(2, 0.5), (4, 0.5)]
    assert _history(client, report.run_id, 'odd/path') == [(2, 1.0), (4, 1.0)]
    assert "'acc@1 (top)'" in caplog.text and "'acc_1 _top_'" in caplog.text
    # Names cleaned or cut to one stay apart: a suffix of the key's SHA-1, said once.
    suffix = {key: '_' + hashlib.sha1(key.encode()).hexdigest()[:8]
              for key in ('acc#1 (top)', long + 'B')}
    assert _history(client, report.run_id, 'acc_1 _top_' + suffix['acc#1 (top)']) == [
        (2, 0.25), (4, 0.25)]
    assert _history(client, report.run_id, long[:250]) == [(2, 2.0), (4, 2.0)]
    assert _history(client, report.run_id, long[:241] + suffix[long + 'B']) == [
        (2, 3.0), (4, 3.0)]
    assert caplog.text.count('would both be logged as') == 2


def test_only_rank_zero_logs(mlflow_server, tmp_path, experiment_name):
    class Rank1(object):
        rank, size = 1, 2

    report = MLflowReport(mlflow_server.url, experiment_name, comm=Rank1())
    tracked_trainer(tmp_path, report).run()
    assert report.run_id is None
    assert _runs(mlflow.MlflowClient(mlflow_server.url), experiment_name) == []


def test_a_report_reused_for_a_second_run_opens_a_second_run(
        mlflow_server, tmp_path, experiment_name):
    report = MLflowReport(mlflow_server.url, experiment_name)
    tracked_trainer(tmp_path / 'one', report, stop_iteration=2).run()
    first = report.run_id
    tracked_trainer(tmp_path / 'two', report, stop_iteration=2).run()
    assert report.run_id not in (None, first)


@pytest.mark.parametrize('arguments, error, message', [
    ({'tracking_uri': 3}, TypeError, 'tracking_uri must be a non-empty str or None, got 3'),
    ({'experiment_name': ''}, TypeError, "experiment_name must be a non-empty str or None, "
                                         "got ''"),
    ({'tags': {'a': 1}}, TypeError, "tags must be a dict of str to str or None, got"),
    ({'entries': 'main/loss'}, TypeError, 'entries must be a list of str'),
    ({'step': 'batch'}, ValueError, "step must be one of"),
    ({'flush_timeout': -1}, ValueError, 'flush_timeout'),
    ({'max_retries': -1}, ValueError, 'max_retries'),
])
def test_bad_arguments_are_refused_by_name(arguments, error, message):
    with pytest.raises(error, match=message):
        MLflowReport(**arguments)


def test_without_mlflow_the_run_names_the_extra(tmp_path):
    code = ('import sys\n'
            'sys.modules["mlflow"] = None\n'
            'from researchutils.chainer.training.extensions import MLflowReport\n'
            'from tests.support.tracking_runs import tracked_trainer\n'
            'try:\n'
            '    tracked_trainer(sys.argv[1], MLflowReport("http://127.0.0.1:9")).run()\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n')
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    assert 'ImportError: MLflowReport needs mlflow: pip install researchutils[mlflow]' in out


def test_the_snapshot_holds_the_run_id(mlflow_server, tmp_path, experiment_name):
    report = MLflowReport(mlflow_server.url, experiment_name)
    trainer = tracked_trainer(tmp_path, report)
    trainer.extend(extensions.snapshot(filename='snapshot_end'), trigger=(8, 'iteration'))
    trainer.run()
    import numpy
    with numpy.load(str(tmp_path / 'snapshot_end')) as snapshot:
        assert str(snapshot['extensions/MLflowReport/_run_id']) in ('', report.run_id)
        assert str(snapshot['extensions/MLflowReport/_run_key']) == report.run_key


def test_a_report_larger_than_one_request_of_mlflow_arrives_whole(
        mlflow_server, tmp_path, experiment_name):
    # MLflow takes at most 1000 values, 100 parameters and 100 tags a request.
    parameters = {'p{}'.format(index): index for index in range(150)}
    values = {'m{}'.format(index): float(index) for index in range(1100)}
    report = MLflowReport(mlflow_server.url, experiment_name, parameters=parameters,
                          tags={'t{}'.format(index): 'x' for index in range(120)})
    trainer = tracked_trainer(tmp_path, report, stop_iteration=4)
    trainer.extend(_report_values(values))
    trainer.run()
    client = mlflow.MlflowClient(mlflow_server.url)
    run = client.get_run(report.run_id)
    assert run.data.params == {name: str(value) for name, value in parameters.items()}
    assert sum(tag.startswith('t') for tag in run.data.tags) == 120
    assert _history(client, report.run_id, 'm1099') == [(2, 1099.0), (4, 1099.0)]
    assert len(run.data.metrics) == 1102


def test_a_step_a_crashed_try_logged_after_its_snapshot_is_listed_on_the_run(
        mlflow_server, tmp_path, experiment_name, caplog):
    # A snapshot every 2 epochs (4 iterations each), a crash at the end of epoch 3: the rerun
    # resumes at step 8 and logs 12 again. MLflow keeps points, so step 12 shows twice (the
    # tutorial says so), and the run's tag lists it.
    def trainer_of(report):
        trainer = tracked_trainer(tmp_path, report, stop_iteration=16, log_every=4)
        trainer.extend(extensions.snapshot(filename='snapshot_iter_{.updater.iteration}'),
                       trigger=(2, 'epoch'))
        return trainer

    first = MLflowReport(mlflow_server.url, experiment_name)
    trainer = trainer_of(first)
    trainer.extend(crash_at(12))
    with pytest.raises(Crash):
        trainer.run()
    assert 'researchutils.repeated_steps' not in mlflow.MlflowClient(
        mlflow_server.url).get_run(first.run_id).data.tags
    second = MLflowReport(mlflow_server.url, experiment_name)
    trainer = trainer_of(second)
    trainer.extend(crash_at(10 ** 6))  # the same extensions as the snapshot's
    trainer.run()
    client = mlflow.MlflowClient(mlflow_server.url)
    assert second.run_id == first.run_id
    assert [step for step, _ in _history(client, first.run_id, 'main/loss')] == [
        4, 8, 12, 12, 16]
    run = client.get_run(first.run_id)
    assert run.info.status == 'FINISHED'
    assert run.data.tags['researchutils.repeated_steps'] == '12'
    assert 'already holds steps 12' in caplog.text
