"""Makes the two screenshots of docs/tutorials/tracking.rst (headless Chromium, 127.0.0.1).

docs/images/tracking_tensorboard.png: TensorBoard's scalars page for a short `make demo`
run (4 epochs, small). docs/images/tracking_mlflow_compare.png: MLflow's run comparison of
a four-trial search logged to a real `mlflow server` (tests/support/mlflow_server.py).
Needs chromium on PATH, tensorboard and the full mlflow (in one of the venvs). Usage, from
the repository root: `.venv/bin/python tools/tracking_screenshots.py`.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def screenshot(url, name, width, height):
    """Writes docs/images/``name``: the page at ``url``, as a small palette PNG (the docs'
    pictures are kept to a few dozen KB, tests/test_docs.py)."""
    from docs_images import save_small_png
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, name)
        subprocess.run(['chromium', '--headless', '--no-sandbox', '--disable-gpu',
                        '--hide-scrollbars', '--window-size={},{}'.format(width, height),
                        '--virtual-time-budget=30000', '--screenshot=' + path, url],
                       check=True, timeout=300, capture_output=True)
        save_small_png(path, name, colours=32, width=900)


def tensorboard_page(work):
    subprocess.run([sys.executable, os.path.join(ROOT, 'examples', 'video_prediction',
                                                 'train.py'), '--out', work, '--epochs', '4',
                    '--train-clips', '640', '--val-clips', '32', '--hidden', '128'],
                   check=True, timeout=600)
    from tests.support.mlflow_server import free_port
    port = free_port()
    board = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), 'tensorboard'),
                              '--logdir', work, '--host', '127.0.0.1', '--port', str(port)],
                             start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        url = 'http://127.0.0.1:{}/'.format(port)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        screenshot(url + '?darkMode=false#scalars&_smoothingWeight=0&tagFilter=k_step_error',
                   'tracking_tensorboard.png', 1300, 520)
    finally:
        os.killpg(board.pid, signal.SIGTERM)
        board.wait()


def mlflow_comparison(work):
    import numpy
    import optuna
    from mlflow import MlflowClient

    from tests.chainer.training import search_tasks, tasks
    from tests.support.mlflow_server import MLflowServer
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with MLflowServer(os.path.join(work, 'server')) as server:
        params = search_tasks.search_params(num_epochs=3,
                                            learning_rates=[0.01, 0.03, 0.1, 0.3])
        experiment = tasks.experiment(work, params, val_score_key='MSE', tracking={
            'mlflow': server.url, 'mlflow_experiment': 'search-demo'})
        with warnings.catch_warnings(), numpy.errstate(all='ignore'):
            warnings.simplefilter('ignore')
            experiment.search(*search_tasks.search_managers(), n_trials=4)
        client = MlflowClient(server.url)
        found = client.get_experiment_by_name('search-demo')
        trials = [run.info.run_id for run in client.search_runs([found.experiment_id])
                  if 'mlflow.parentRunId' in run.data.tags]
        url = '{}/#/compare-runs?runs={}&experiments={}'.format(
            server.url, urllib.parse.quote(json.dumps(trials)),
            urllib.parse.quote(json.dumps([found.experiment_id])))
        screenshot(url, 'tracking_mlflow_compare.png', 1400, 1100)


if __name__ == '__main__':
    tensorboard_page(tempfile.mkdtemp(prefix='tracking_tensorboard_'))
    mlflow_comparison(tempfile.mkdtemp(prefix='tracking_mlflow_'))
