"""SlackReport in tiny real Trainer runs: building them, and reading what they posted.

Shared by the tests of ``researchutils.chainer.training.extensions.slack_report`` and
of its private modules; the Slack side is :class:`tests.support.slack_server.SlackServer`.
"""
import logging
import os
import threading
import time

from chainer import training
from chainer.training import extensions

from researchutils.chainer.training.extensions import SlackReport
from tests.support.tiny_training import make_trainer

# The logger SlackReport and its private modules log to.
LOGGER = 'researchutils.chainer.training.extensions.slack_report'
FAST = dict(retry_backoff=0.01, max_retry_backoff=0.05, flush_timeout=5.0)


def make_report(server, client=None, **options):
    for key, value in FAST.items():
        options.setdefault(key, value)
    return SlackReport(client if client is not None else server.client(), **options)


def reporting_trainer(tmp_path, report, stop_iteration=8, log_every=2, report_every=4, name='run'):
    trainer = make_trainer(tmp_path / name, stop_iteration=stop_iteration)
    trainer.extend(extensions.LogReport(trigger=(log_every, 'iteration')))
    trainer.extend(report, trigger=(report_every, 'iteration'))
    return trainer


def table_rows(text):
    """(header, rows) of the code-block table in a report message."""
    lines = text.split('```')[1].strip('\n').split('\n')
    return lines[0].split(), lines[1:]


def is_table(text):
    """Whether ``text`` is a report table (not the continuation of another message)."""
    return text.startswith('```') and 'iteration' in table_rows(text)[0]


def posted_column(server, name):
    """Values of column ``name`` over every report table posted, in order."""
    values = []
    for text in server.texts():
        if is_table(text):
            header, rows = table_rows(text)
            index = header.index(name)
            values.extend(row.split()[index] for row in rows)
    return values


def runtime_warnings(record):
    return [w for w in record if issubclass(w.category, RuntimeWarning)]


def wait_for_thread(report, timeout=5.0):
    deadline = time.monotonic() + timeout
    while report.thread_ts is None:
        assert time.monotonic() < deadline, 'start message not posted within %s s' % timeout
        time.sleep(0.005)


def slack_threads():
    return [t for t in threading.enumerate() if t.name == 'SlackReport' and t.is_alive()]


def slack_warnings(caplog):
    return [r.message for r in caplog.records
            if r.name == LOGGER and r.levelno >= logging.WARNING]


def write_every(iterations, filename):

    @training.make_extension(trigger=(1, 'iteration'), priority=training.PRIORITY_WRITER)
    def write(trainer):
        if trainer.updater.iteration in iterations:
            with open(os.path.join(trainer.out, filename), 'wb') as f:
                f.write(b'image at %d' % trainer.updater.iteration)
    return write
