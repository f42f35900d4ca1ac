"""The MLflow server of the tracking tests and the proxy that makes it misbehave."""
import os
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.support.mlflow_server import DelayingProxy, MLflowServer, answers, group_members

pytestmark = pytest.mark.timeout(120)


def test_the_session_server_answers_the_real_client(mlflow_server):
    mlflow = pytest.importorskip('mlflow')
    client = mlflow.MlflowClient(mlflow_server.url)
    experiment = client.create_experiment('support-{}'.format(time.time_ns()))
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, 'x', 1.5, step=3)
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, 'x')] == [
        (3, 1.5)]
    assert mlflow_server.url.startswith('http://127.0.0.1:')


def test_the_session_server_runs_without_job_runners_in_a_group_of_its_own(mlflow_server):
    group = os.getpgid(mlflow_server.process.pid)
    assert group == mlflow_server.process.pid != os.getpgid(0)
    # The server and its one uvicorn worker; no job consumers.
    assert len(group_members(group)) == 2


# A stand-in for ``python -m mlflow server``: it answers /health (a file in its folder) on
# the port given, and leaves a child of its own, as the real server leaves uvicorn's worker.
_STAND_IN = """#!/bin/sh
port=$(echo "$@" | sed 's/.* --port \\([0-9]*\\).*/\\1/')
echo OK > health
sleep 600 &
exec {python} -m http.server --bind 127.0.0.1 "$port"
"""


def test_stop_ends_the_whole_process_group(tmp_path):
    stand_in = tmp_path / 'python'
    stand_in.write_text(_STAND_IN.format(python=sys.executable))
    stand_in.chmod(0o755)
    with MLflowServer(tmp_path, python=str(stand_in)) as server:
        group = server.process.pid
        url = server.url
        assert answers(url)
        assert len(group_members(group)) == 2
    assert not server.group_alive(group)
    assert not answers(url)


def test_a_server_that_cannot_start_is_an_error_with_its_log(tmp_path):
    server = MLflowServer(tmp_path, python='/bin/false')
    with pytest.raises(RuntimeError, match=r'exited \(1\) while starting'):
        server.start()
    assert server.process is None


def test_the_proxy_delays_fails_and_goes_down(mlflow_server):
    with DelayingProxy(mlflow_server.url, delay=0.3) as proxy:
        start = time.monotonic()
        assert answers(proxy.url, timeout=10)
        assert time.monotonic() - start >= 0.3
        proxy.delay = 0
        proxy.fail(503, times=1)
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(proxy.url + '/health', timeout=10)
        assert failed.value.code == 503
        failed.value.close()
        assert answers(proxy.url)
        proxy.down()
        assert not answers(proxy.url)
        proxy.recover()
        assert answers(proxy.url)
        assert (proxy.requests, proxy.passed) == (5, 3)
