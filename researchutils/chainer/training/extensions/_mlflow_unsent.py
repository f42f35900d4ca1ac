"""What MLflowReport could not send: the file it keeps, read back and sent again.

When a run ends with metrics (or its end) still unsent, they go to
``<out>/mlflow_unsent_<run key>.json`` (:data:`UNSENT_PREFIX`), written atomically; a later
try of the same run adds to the same file. :func:`read_unsent` reads it back, checked, and
:func:`resend` sends it: ``mlflow_report.send_unsent`` (or ``python -m
researchutils.chainer.training.extensions.mlflow_report FILE``) does both.
Tests: tests/chainer/training/extensions/test_mlflow_report_faults.py.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from researchutils import _files
from researchutils.chainer.training._mlflow_runs import end_run, mlflow_client_class
from researchutils.chainer.training.extensions._mlflow_sender import Batch, Sender

__all__ = ['SEND_COMMAND', 'UNSENT_FORMAT', 'UNSENT_PREFIX', 'read_unsent', 'resend',
           'unsent_path', 'write_unsent']

# What could not be sent: <out>/mlflow_unsent_<run key>.json.
UNSENT_PREFIX = 'mlflow_unsent_'
UNSENT_FORMAT = 'researchutils.MLflowReport.unsent/1'
SEND_COMMAND = 'python -m researchutils.chainer.training.extensions.mlflow_report'


def unsent_path(out: str, run_key: str) -> str:
    return os.path.join(out, '{}{}.json'.format(UNSENT_PREFIX, run_key))


def write_unsent(path: str, run: Mapping[str, Any], items: Sequence[Any]) -> int:
    """Adds ``items`` to the file of what was not sent (made when there is none); returns
    how many metrics it now holds."""
    data: dict[str, Any] = {
        'format': UNSENT_FORMAT,
        'about': ('What MLflowReport could not send to the MLflow run below before the '
                  'training run ended. Send it with: {} {}'.format(SEND_COMMAND, path)),
        'tracking_uri': run['tracking_uri'], 'experiment_name': run['experiment_name'],
        'run_name': run.get('run_name'), 'run_key': run['run_key'], 'run_id': run['run_id'],
        'tags': dict(run.get('tags') or {}), 'batches': [], 'end': None}
    if os.path.exists(path):
        with open(path, encoding='utf-8') as stream:
            earlier = json.load(stream)
        data['batches'] = earlier.get('batches', [])
        data['run_id'] = data['run_id'] or earlier.get('run_id')
    for item in items:
        if isinstance(item, Batch):
            data['batches'].append(item.to_json())
        else:
            data['end'] = {'status': item.status, 'end_time': item.end_time}
    _files.write_text(path, json.dumps(data, indent=1))
    return sum(len(batch['metrics']) for batch in data['batches'])


def read_unsent(path: str) -> dict[str, Any]:
    """The content of the file at ``path``; a ValueError when MLflowReport did not write it."""
    with open(path, encoding='utf-8') as stream:
        data = json.load(stream)
    if not isinstance(data, dict) or data.get('format') != UNSENT_FORMAT:
        raise ValueError('{} is not a file of what MLflowReport could not send (format {!r}, '
                         'expected {!r})'.format(path, data.get('format') if isinstance(
                             data, dict) else None, UNSENT_FORMAT))
    return data


def resend(data: Mapping[str, Any], tracking_uri: str | None) -> int:
    """Sends the content of a file (:func:`read_unsent`) to ``tracking_uri`` (None: the one
    it names); returns the metric values sent."""
    run = dict(data)
    run['tracking_uri'] = tracking_uri or data['tracking_uri']
    client = mlflow_client_class('MLflowReport')(tracking_uri=run['tracking_uri'])
    sender = Sender(client, run, 1, 0, 1.0, 1.0)
    run_id = sender._ensure_run()
    batches = [Batch(batch['metrics'], batch['params'], batch['tags'])
               for batch in data['batches']]
    sender._log(run_id, batches)
    if data.get('end'):
        end_run(client, run_id, data['end']['status'], data['end']['end_time'])
    return sum(len(batch.metrics) for batch in batches)
