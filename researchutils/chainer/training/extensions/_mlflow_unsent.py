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
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from researchutils import _files
from researchutils.chainer.training._mlflow_runs import (
    create_run,
    end_run,
    find_run,
    mlflow_client_class,
)
from researchutils.chainer.training.extensions._mlflow_sender import Batch, Sender

logger = logging.getLogger('researchutils.chainer.training.extensions.mlflow_report')

__all__ = ['SEND_COMMAND', 'UNSENT_FORMAT', 'UNSENT_PREFIX', 'read_unsent', 'resend',
           'unsent_path', 'write_unsent']

# What could not be sent: <out>/mlflow_unsent_<run key>.json.
UNSENT_PREFIX = 'mlflow_unsent_'
UNSENT_FORMAT = 'researchutils.MLflowReport.unsent/1'
SEND_COMMAND = 'python -m researchutils.chainer.training.extensions.mlflow_report'


def unsent_path(out: str, run_key: str) -> str:
    return os.path.join(out, '{}{}.json'.format(UNSENT_PREFIX, run_key))


def write_unsent(path: str, run: Mapping[str, Any], items: Sequence[Any], last_step: int) -> int:
    """Adds ``items`` to the file of what was not sent (made when there is none), with the
    last step the run reported (``last_step``, -1 for none); returns how many metrics the
    file now holds."""
    data: dict[str, Any] = {
        'format': UNSENT_FORMAT,
        'about': ('What MLflowReport could not send to the MLflow run below before the '
                  'training run ended. Send it with: {} {}'.format(SEND_COMMAND, path)),
        'tracking_uri': run['tracking_uri'], 'experiment_name': run['experiment_name'],
        'run_name': run.get('run_name'), 'run_key': run['run_key'], 'run_id': run['run_id'],
        'tags': dict(run.get('tags') or {}), 'batches': [], 'end': None,
        'last_step': last_step}
    if os.path.exists(path):
        with open(path, encoding='utf-8') as stream:
            earlier = json.load(stream)
        data['batches'] = earlier.get('batches', [])
        data['run_id'] = data['run_id'] or earlier.get('run_id')
        data['last_step'] = max(last_step, earlier.get('last_step', -1))
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
    it names); returns the metric values sent.

    A run the server lacks is made and gets everything. A run it has gets the points it
    lacks (a key at a step it holds already is skipped), and the file's end only while the
    run stands where the file left it: it ended no later than the file's end and holds no
    step past the file's last. A run that moved on (a resumed try ended it, or went on past
    the file) keeps its status, and a warning says what was skipped.
    """
    run = dict(data)
    run['tracking_uri'] = tracking_uri or data['tracking_uri']
    client = mlflow_client_class('MLflowReport')(tracking_uri=run['tracking_uri'])
    metrics = [metric for batch in data['batches'] for metric in batch['metrics']]
    found = find_run(client, run)
    if found is None:
        sender = Sender(client, dict(run, run_id=create_run(client, run)), 1, 0, 1.0, 1.0)
        sender._log(str(sender.run['run_id']), [Batch(metrics, *_params_and_tags(data))])
        if data.get('end'):
            end_run(client, sender.run['run_id'], data['end']['status'],
                    data['end']['end_time'])
        return len(metrics)
    run_id = str(found.info.run_id)
    held = {(key, metric.step) for key in {metric[0] for metric in metrics}
            for metric in client.get_metric_history(run_id, key)}
    missing = [metric for metric in metrics if (metric[0], metric[3]) not in held]
    last_step = data.get('last_step')
    if last_step is None:
        last_step = max((metric[3] for metric in metrics), default=-1)
    end = data.get('end')
    moved_on = any(step > last_step for _, step in held) or (
        found.info.end_time is not None and end is not None
        and found.info.end_time > end['end_time'])
    params, tags = _params_and_tags(data)
    params = {key: value for key, value in params.items() if key not in found.data.params}
    if moved_on:  # a later try's tags stand
        tags = {key: value for key, value in tags.items() if key not in found.data.tags}
    Sender(client, dict(run, run_id=run_id), 1, 0, 1.0, 1.0)._log(
        run_id, [Batch(missing, params, tags)])
    if end is not None and not moved_on:
        end_run(client, run_id, end['status'], end['end_time'])
    skipped = ['{} metric value(s) at steps the run holds already'.format(
        len(metrics) - len(missing))] if len(missing) < len(metrics) else []
    if end is not None and moved_on:
        skipped.append('its end: the run moved on since the file was written, and its status '
                       '{} stays, not {}'.format(found.info.status, end['status']))
    if skipped:
        logger.warning('MLflowReport: run %s at %s: skipped %s', run_id, run['tracking_uri'],
                       '; '.join(skipped))
    return len(missing)


def _params_and_tags(data: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    params: dict[str, str] = {}
    tags: dict[str, str] = {}
    for batch in data['batches']:
        params.update(batch['params'])
        tags.update(batch['tags'])
    return params, tags
