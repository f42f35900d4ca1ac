"""SlackReport in real Trainer runs, posting with the real slack_sdk client to a loopback server."""
import logging
import os
import subprocess
import sys
import threading
import time
import warnings

import pytest
from chainer.training import extension as extension_module
from chainer.training import extensions

from researchutils.chainer.training.extensions import SlackReport
from tests.support.slack_server import SlackServer
from tests.support.tiny_training import Crash, crash_at, make_trainer

pytestmark = pytest.mark.timeout(30)

LOGGER = 'researchutils.chainer.training.extensions.slack_report'
FAST = dict(retry_backoff=0.01, max_retry_backoff=0.05, flush_timeout=5.0)


@pytest.fixture
def server():
    with SlackServer() as running:
        yield running


def _report(server, client=None, **options):
    for key, value in FAST.items():
        options.setdefault(key, value)
    return SlackReport(client if client is not None else server.client(), **options)


def _trainer(tmp_path, report, stop_iteration=8, log_every=2, report_every=4, name='run'):
    trainer = make_trainer(tmp_path / name, stop_iteration=stop_iteration)
    trainer.extend(extensions.LogReport(trigger=(log_every, 'iteration')))
    trainer.extend(report, trigger=(report_every, 'iteration'))
    return trainer


def _table_rows(text):
    """(header, rows) of the code-block table in a report message."""
    lines = text.split('```')[1].strip('\n').split('\n')
    return lines[0].split(), lines[1:]


def _is_table(text):
    """Whether ``text`` is a report table (not the continuation of another message)."""
    return text.startswith('```') and 'iteration' in _table_rows(text)[0]


def _column(server, name):
    """Values of column ``name`` over every report table posted, in order."""
    values = []
    for text in server.texts():
        if _is_table(text):
            header, rows = _table_rows(text)
            index = header.index(name)
            values.extend(row.split()[index] for row in rows)
    return values


def _runtime_warnings(record):
    return [w for w in record if issubclass(w.category, RuntimeWarning)]


# Construction -----------------------------------------------------------------

def test_token_from_environment_builds_a_web_client(monkeypatch):
    monkeypatch.setenv('SLACK_BOT_TOKEN', 'xoxb-from-env')
    report = SlackReport()
    assert type(report.client).__name__ == 'WebClient'
    assert report.client.token == 'xoxb-from-env'


def test_token_string_builds_a_web_client():
    assert SlackReport('xoxb-given').client.token == 'xoxb-given'


def test_no_token_and_no_environment_is_a_clear_error(monkeypatch):
    monkeypatch.delenv('SLACK_BOT_TOKEN', raising=False)
    with pytest.raises(ValueError, match='token_or_client.*SLACK_BOT_TOKEN'):
        SlackReport()


def test_client_without_slack_interface_is_rejected():
    with pytest.raises(TypeError, match='token_or_client'):
        SlackReport(object())


@pytest.mark.parametrize('options, error, word', [
    (dict(channel=''), ValueError, 'channel'),
    (dict(entries='main/loss'), TypeError, 'entries'),
    (dict(log_report=3), TypeError, 'log_report'),
    (dict(comm=object()), TypeError, 'comm'),
    (dict(upload='loss.png'), TypeError, 'upload'),
    (dict(queue_size=0), ValueError, 'queue_size'),
    (dict(flush_timeout=-1), ValueError, 'flush_timeout'),
    (dict(flush_timeout=float('nan')), ValueError, 'flush_timeout'),
    (dict(flush_timeout=float('inf')), ValueError, 'flush_timeout'),
    (dict(flush_timeout=0), ValueError, 'flush_timeout'),
    (dict(request_timeout=float('inf')), ValueError, 'request_timeout'),
    (dict(request_timeout=float('nan')), ValueError, 'request_timeout'),
    (dict(request_timeout=True), TypeError, 'request_timeout'),
    (dict(retry_backoff=float('nan')), ValueError, 'retry_backoff'),
    (dict(retry_backoff=0), ValueError, 'retry_backoff'),
    (dict(max_retry_backoff=float('inf')), ValueError, 'max_retry_backoff'),
    (dict(max_retry_backoff=float('nan')), ValueError, 'max_retry_backoff'),
    (dict(max_retries=True), TypeError, 'max_retries'),
    (dict(thread='no'), TypeError, 'thread'),
    (dict(max_retries=1.5), TypeError, 'max_retries'),
    (dict(max_message_chars=50), ValueError, 'max_message_chars'),
    (dict(max_message_chars=50000), ValueError, 'max_message_chars'),
])
def test_bad_option_names_the_argument(server, options, error, word):
    with pytest.raises(error, match=word):
        SlackReport(server.client(), **options)


def test_missing_log_report_is_named_when_the_run_starts(server, tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.extend(_report(server))
    with pytest.raises(ValueError, match='LogReport'):
        trainer.run()


def _run_python(code):
    return subprocess.run([sys.executable, '-c', code], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def test_importing_the_extensions_does_not_import_slack_sdk():
    out = _run_python('import sys\n'
                      'import researchutils.chainer.training.extensions\n'
                      'print("slack_sdk" in sys.modules)\n')
    assert out.strip() == 'False'


def test_missing_slack_sdk_says_which_extra_to_install():
    out = _run_python('import sys\n'
                      'sys.modules["slack_sdk"] = None\n'
                      'from researchutils.chainer.training.extensions import SlackReport\n'
                      'try:\n'
                      '    SlackReport("xoxb-x")\n'
                      'except ImportError as e:\n'
                      '    print(e)\n')
    assert 'pip install researchutils[slack]' in out


# Content of a complete run ----------------------------------------------------------

def test_start_message_names_host_pid_command_and_output_folder(server, tmp_path):
    import socket
    trainer = _trainer(tmp_path, _report(server))
    trainer.run()
    start = server.texts()[0]
    assert 'started' in start
    assert socket.gethostname() in start
    assert 'pid:     %d' % os.getpid() in start
    assert sys.argv[0] in start
    assert os.path.abspath(str(tmp_path / 'run')) in start


def test_each_log_row_is_posted_exactly_once(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server), stop_iteration=12, log_every=2,
                       report_every=4)
    trainer.run()
    log = trainer.get_extension('LogReport').log
    assert _column(server, 'iteration') == [str(row['iteration']) for row in log]
    # One table per report at most: reports that waited together share one.
    assert 1 <= len([t for t in server.texts() if _is_table(t)]) <= 3


def test_table_shows_chosen_entries_in_order_with_blank_missing_cells(server, tmp_path):
    report = _report(server, entries=['iteration', 'validation/main/loss', 'main/loss'])
    trainer = _trainer(tmp_path, report, stop_iteration=4, report_every=4)
    trainer.run()
    table = server.texts()[1].split('```')[1].strip('\n').split('\n')
    assert table[0].split() == ['iteration', 'validation/main/loss', 'main/loss']
    loss = trainer.get_extension('LogReport').log[0]['main/loss']
    first = table[1]
    # The blank cell keeps the column aligned: main/loss starts under its header.
    column = table[0].index('main/loss')
    assert first[:len('2')] == '2'
    assert first[len('iteration'):column].strip() == ''
    assert float(first[column:]) == pytest.approx(float(loss), rel=1e-5)


def test_entries_are_inferred_epoch_and_iteration_first_elapsed_time_last(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server), stop_iteration=4, report_every=4)
    trainer.run()
    header, _ = _table_rows(server.texts()[1])
    assert header == ['epoch', 'iteration', 'main/accuracy', 'main/loss', 'elapsed_time']


def test_complete_run_ends_with_finished_message(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server))
    trainer.run()
    texts = server.texts()
    assert 'finished' in texts[-1] and 'iteration 8' in texts[-1]
    assert all('finished' not in text for text in texts[:-1])


def test_rows_logged_after_the_last_report_go_with_the_end_message(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server), stop_iteration=6, log_every=2,
                       report_every=4)
    trainer.run()
    assert _column(server, 'iteration') == ['2', '4', '6']


def test_long_report_is_split_into_messages_within_the_limit(server, tmp_path):
    report = _report(server, max_message_chars=300)
    trainer = _trainer(tmp_path, report, stop_iteration=40, log_every=1, report_every=40)
    trainer.run()
    tables = [text for text in server.texts() if _is_table(text)]
    assert len(tables) > 1
    assert all(len(text) <= 300 for text in tables)
    assert _column(server, 'iteration') == [str(i) for i in range(1, 41)]


def test_reports_waiting_together_for_a_slow_slack_go_out_as_one_table(server, tmp_path):
    server.slow(0.3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer = _trainer(tmp_path, _report(server), stop_iteration=40, log_every=1,
                           report_every=2)
        trainer.run()
    # 20 reports, each posted alone, would take 20 requests at 0.3 s behind a 40-step run.
    tables = [text for text in server.texts() if _is_table(text)]
    assert len(tables) < 10
    assert _column(server, 'iteration') == [str(i) for i in range(1, 41)]
    assert 'finished' in server.texts()[-1]
    assert _runtime_warnings(record) == []


def test_a_value_that_cannot_be_shown_costs_only_its_cell(server, tmp_path):
    class Unprintable(object):
        def __float__(self):
            raise ValueError('no float')

        def __str__(self):
            raise RuntimeError('no text either')

    def log_rows(trainer):
        return trainer.get_extension('LogReport').log

    # Between LogReport (which must write plain JSON) and SlackReport, put a value no
    # table can show into the row SlackReport reads; take it out again afterwards.
    @extension_module.make_extension(trigger=(4, 'iteration'))
    def spoil(trainer):
        log_rows(trainer)[-1]['odd'] = Unprintable()

    @extension_module.make_extension(trigger=(4, 'iteration'))
    def restore(trainer):
        log_rows(trainer)[-1].pop('odd', None)

    trainer = make_trainer(tmp_path / 'run', stop_iteration=8)
    trainer.extend(extensions.LogReport(trigger=(2, 'iteration')))
    trainer.extend(spoil)
    trainer.extend(_report(server, entries=['iteration', 'odd']), trigger=(4, 'iteration'))
    trainer.extend(restore)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer.run()
    assert _runtime_warnings(record) == []
    assert _column(server, 'iteration') == ['2', '4', '6', '8']
    rows = [row.split() for text in server.texts() if _is_table(text)
            for row in _table_rows(text)[1]]
    assert ['4', '?'] in rows
    assert 'finished' in server.texts()[-1]


def test_table_wider_than_a_message_is_trimmed_not_rejected(server, tmp_path):
    entries = ['iteration'] + ['observation/with/a/long/name/%d' % i for i in range(30)]
    trainer = _trainer(tmp_path, _report(server, entries=entries, max_message_chars=300))
    trainer.run()
    assert all(len(text) <= 300 for text in server.texts())
    assert 'finished' in server.texts()[-1]
    assert _column(server, 'iteration') == ['2', '4', '6', '8']


def test_over_long_error_text_is_trimmed_and_split_not_rejected(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server, max_message_chars=400))
    trainer.extend(crash_at(3, Crash('x' * 5000)))
    with pytest.raises(Crash):
        trainer.run()
    errors = [text for text in server.texts()[1:] if 'failed' in text or 'Traceback' in text]
    assert errors and all(len(text) <= 400 for text in server.texts())
    assert server.calls('chat.postMessage') == ['chat.postMessage'] * len(server.messages)


# Crashes and interruptions ------------------------------------------------------------------

def test_crash_posts_type_message_and_traceback_and_no_finished(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server))
    trainer.extend(crash_at(5))
    with pytest.raises(Crash, match='crash at iteration 5'):
        trainer.run()
    texts = server.texts()
    error = '\n'.join(text for text in texts if 'failed' in text or 'Traceback' in text)
    assert 'Crash: crash at iteration 5' in error
    assert 'Traceback (most recent call last)' in error
    assert 'in crash' in error  # the frame of the raising extension
    assert not any('finished' in text for text in texts)


def test_keyboard_interrupt_is_reported_as_interrupted(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server))
    trainer.extend(crash_at(5, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    texts = server.texts()
    assert 'interrupted (KeyboardInterrupt)' in texts[-1]
    assert not any('finished' in text for text in texts)


# Threads and resuming ----------------------------------------------------------------

def test_every_message_replies_in_the_thread_of_the_start_message(server, tmp_path):
    _trainer(tmp_path, _report(server)).run()
    start, *replies = server.messages
    assert start['thread_ts'] is None
    assert replies and all(m['thread_ts'] == start['ts'] for m in replies)


def test_thread_false_posts_every_message_into_the_channel(server, tmp_path):
    _trainer(tmp_path, _report(server, thread=False)).run()
    assert len(server.messages) > 2
    assert all(m['thread_ts'] is None for m in server.messages)


def _wait_for_thread(report, timeout=5.0):
    deadline = time.monotonic() + timeout
    while report.thread_ts is None:
        assert time.monotonic() < deadline, 'start message not posted within %s s' % timeout
        time.sleep(0.005)


def test_thread_ts_is_the_start_message_timestamp(server, tmp_path):
    report = _report(server)
    _trainer(tmp_path, report).run()
    assert report.thread_ts == server.messages[0]['ts']


def test_resumed_run_continues_the_thread_without_repeating_rows(server, tmp_path):
    report = _report(server)
    first = _trainer(tmp_path, report, stop_iteration=4, report_every=2, name='first')
    first.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    # A real epoch outlasts one post; here the start (which goes out with the first
    # report) must be posted before the snapshot.
    first.extend(lambda trainer: _wait_for_thread(report), trigger=(3, 'iteration'))
    first.run()
    root = server.messages[0]['ts']
    posted_by_first = len(server.messages)

    from chainer.serializers import load_npz
    second = _trainer(tmp_path, _report(server), stop_iteration=8, name='second')
    load_npz(str(tmp_path / 'first' / 'snapshot'), second)
    second.run()
    resumed = server.messages[posted_by_first:]
    assert 'resumed at iteration 4' in resumed[0]['text']
    assert [m['thread_ts'] for m in resumed] == [root] * len(resumed)
    assert _column(server, 'iteration') == ['2', '4', '6', '8']


def _autoloading_run(server, tmp_path, stop_iteration):
    """A run in tmp_path/run whose snapshot extension autoloads. Its priority (-100) is below
    SlackReport's, so Chainer initializes the report first, then loads the snapshot."""
    report = _report(server)
    trainer = make_trainer(tmp_path / 'run', stop_iteration=stop_iteration)
    trainer.extend(extensions.LogReport(trigger=(2, 'iteration')))
    trainer.extend(report, trigger=(2, 'iteration'))
    trainer.extend(extensions.snapshot(autoload=True), trigger=(4, 'iteration'))
    trainer.extend(lambda trainer: _wait_for_thread(report), trigger=(3, 'iteration'))
    trainer.run()
    return report


def test_a_run_resumed_by_snapshot_autoload_says_resumed_in_the_snapshots_thread(
        server, tmp_path):
    _autoloading_run(server, tmp_path, stop_iteration=4)
    root = server.messages[0]['ts']
    posted_by_first = len(server.messages)
    _autoloading_run(server, tmp_path, stop_iteration=8)
    resumed = server.messages[posted_by_first:]
    assert 'resumed at iteration 4' in resumed[0]['text']
    assert not any('started' in m['text'] for m in resumed)
    assert [m['thread_ts'] for m in resumed] == [root] * len(resumed)
    assert _column(server, 'iteration') == ['2', '4', '6', '8']


def test_a_fresh_run_with_snapshot_autoload_and_no_snapshot_says_started(server, tmp_path):
    _autoloading_run(server, tmp_path, stop_iteration=4)
    assert 'Training started' in server.messages[0]['text']
    assert server.messages[0]['thread_ts'] is None


# Off the training thread -----------------------------------------------------------

def test_a_finalized_report_given_to_a_new_trainer_starts_a_new_thread_with_all_rows(
        server, tmp_path):
    report = _report(server)
    _trainer(tmp_path, report, name='first').run()
    first_root = report.thread_ts
    posted_by_first = len(server.messages)
    _trainer(tmp_path, report, name='second').run()
    second = server.messages[posted_by_first:]
    assert 'started' in second[0]['text'] and second[0]['thread_ts'] is None
    assert report.thread_ts == second[0]['ts'] != first_root
    assert all(m['thread_ts'] == second[0]['ts'] for m in second[1:])
    assert 'finished' in second[-1]['text']
    assert _column(server, 'iteration') == ['2', '4', '6', '8'] * 2


def test_a_finalized_report_resumed_from_a_snapshot_continues_the_snapshots_thread(
        server, tmp_path):
    report = _report(server)
    first = _trainer(tmp_path, report, stop_iteration=4, report_every=2, name='first')
    first.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    first.extend(lambda trainer: _wait_for_thread(report), trigger=(3, 'iteration'))
    first.run()
    root = report.thread_ts
    posted_by_first = len(server.messages)

    from chainer.serializers import load_npz
    second = _trainer(tmp_path, report, stop_iteration=8, name='second')
    load_npz(str(tmp_path / 'first' / 'snapshot'), second)
    second.run()
    resumed = server.messages[posted_by_first:]
    assert 'resumed at iteration 4' in resumed[0]['text']
    assert [m['thread_ts'] for m in resumed] == [root] * len(resumed)


class _ThreadRecordingClient(object):
    """A real WebClient that notes on which thread each Slack method is called."""

    def __init__(self, client):
        self._client = client
        self.calls = []

    def __getattr__(self, name):
        method = getattr(self._client, name)

        def call(*args, **kwargs):
            self.calls.append((name, threading.current_thread()))
            return method(*args, **kwargs)
        return call


class _FailsToInitialize(extension_module.Extension):
    priority = extension_module.PRIORITY_READER - 1  # initialized after SlackReport

    def initialize(self, trainer):
        raise Crash('initialize failed')

    def __call__(self, trainer):
        pass


def _slack_threads():
    return [t for t in threading.enumerate() if t.name == 'SlackReport' and t.is_alive()]


def test_no_thread_outlives_a_run_whose_later_extension_fails_to_initialize(server, tmp_path):
    before = _slack_threads()
    trainer = _trainer(tmp_path, _report(server))
    trainer.extend(_FailsToInitialize())
    with pytest.raises(Crash, match='initialize failed'):
        trainer.run()
    assert _slack_threads() == before


def test_poster_thread_ends_when_idle_and_a_later_report_starts_it_again(server, tmp_path):
    report = _report(server)
    report._poster._idle_exit = 0.05
    trainer = _trainer(tmp_path, report)
    trainer.extend(lambda trainer: server.wait_for(lambda _: not _slack_threads()),
                   trigger=(5, 'iteration'))
    trainer.run()
    assert _column(server, 'iteration') == ['2', '4', '6', '8']
    assert 'finished' in server.texts()[-1]


def test_slack_is_called_only_off_the_training_thread(server, tmp_path):
    client = _ThreadRecordingClient(server.client())
    _trainer(tmp_path, _report(server, client=client)).run()
    assert client.calls
    assert all(thread is not threading.main_thread() for _, thread in client.calls)


def test_channel_name_is_resolved_once(server, tmp_path):
    _trainer(tmp_path, _report(server, channel='#random'), stop_iteration=12).run()
    assert server.calls('conversations.list') == ['conversations.list']
    assert {m['channel'] for m in server.messages} == {'C0000000002'}


def test_channel_name_found_on_a_later_page(tmp_path):
    channels = [('C%010d' % i, 'channel-%d' % i) for i in range(450)]
    with SlackServer(channels=channels) as server:
        _trainer(tmp_path, _report(server, channel='channel-420')).run()
        assert len(server.calls('conversations.list')) == 3
        assert {m['channel'] for m in server.messages} == {'C0000000420'}


def test_token_unable_to_list_channels_posts_by_name_and_skips_uploads(server, tmp_path,
                                                                      caplog):
    server.refuse('conversations.list', 'missing_scope')
    trainer = _trainer(tmp_path, _report(server, channel='random', upload=['plot.png']))
    trainer.extend(_write_every((3,), 'plot.png'))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='1 message'):
            trainer.run()
    assert {m['channel'] for m in server.messages} == {'C0000000002'}
    assert 'finished' in server.texts()[-1]
    assert server.uploads == []
    assert [r for r in caplog.records if 'channels:read' in r.message]


def test_channel_id_needs_no_lookup(server, tmp_path):
    _trainer(tmp_path, _report(server, channel='C0000000003')).run()
    assert server.calls('conversations.list') == []
    assert {m['channel'] for m in server.messages} == {'C0000000003'}


# Slack failures never break training --------------------------------------------------

def test_slack_down_from_the_start_training_completes_with_one_counting_warning(tmp_path):
    server = SlackServer().start()
    client = server.client(timeout=0.5)
    server.stop()  # nothing listens on the port any more
    trainer = _trainer(tmp_path, _report(server, client=client, flush_timeout=0.5))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer.run()
    assert trainer.updater.iteration == 8
    dropped, = _runtime_warnings(record)
    # start + 2 reports + end message were queued; none could be posted.
    assert 'SlackReport: 4 message(s) could not be posted' in str(dropped.message)


def test_rejected_token_logs_a_warning_and_training_completes(server, tmp_path, caplog):
    server.reject_token()
    trainer = _trainer(tmp_path, _report(server))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='4 message'):
            trainer.run()
    assert trainer.updater.iteration == 8
    assert [r.message for r in caplog.records if 'invalid_auth' in r.message]
    # After invalid_auth the poster stops calling Slack.
    assert len(server.requests) == 1


def test_unknown_channel_logs_a_warning_and_training_completes(server, tmp_path, caplog):
    trainer = _trainer(tmp_path, _report(server, channel='nowhere'))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='message'):
            trainer.run()
    assert trainer.updater.iteration == 8
    assert server.messages == []
    assert [r for r in caplog.records if "'nowhere'" in r.message]


@pytest.mark.parametrize('kind', ['500', 'drop'])
def test_transient_failures_are_retried_and_no_report_is_lost(server, tmp_path, kind):
    server.fail(kind, times=3, method='chat.postMessage')
    trainer = _trainer(tmp_path, _report(server))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer.run()
    assert _runtime_warnings(record) == []
    assert _column(server, 'iteration') == ['2', '4', '6', '8']
    assert 'finished' in server.texts()[-1]
    assert len(server.calls('chat.postMessage')) == len(server.messages) + 3


def test_request_timeout_is_retried(server, tmp_path):
    server.slow(1.0, times=1)
    trainer = _trainer(tmp_path, _report(server, client=server.client(timeout=0.2)))
    trainer.run()
    assert 'started' in server.texts()[0]
    assert 'finished' in server.texts()[-1]


def test_rate_limit_waits_retry_after_then_posts(server, tmp_path):
    server.fail('429', times=1, retry_after=1, method='chat.postMessage')
    trainer = _trainer(tmp_path, _report(server))
    trainer.run()
    limited, retried = [r for r in server.requests if r['method'] == 'chat.postMessage'][:2]
    assert limited['status'] == 429 and retried['status'] == 200
    assert retried['time'] - limited['time'] >= 0.95
    assert 'started' in server.texts()[0] and 'finished' in server.texts()[-1]


@pytest.mark.parametrize('body', ['', '<html><body>429 Too Many Requests</body></html>'])
def test_a_429_without_slacks_json_waits_retry_after_then_posts(server, tmp_path, body):
    # Proxies in front of Slack answer 429 with an empty or HTML body.
    server.fail('429', times=1, retry_after=1, method='chat.postMessage', body=body)
    trainer = _trainer(tmp_path, _report(server))
    trainer.run()
    limited, retried = [r for r in server.requests if r['method'] == 'chat.postMessage'][:2]
    assert limited['status'] == 429 and retried['status'] == 200
    assert retried['time'] - limited['time'] >= 0.95
    assert 'started' in server.texts()[0] and 'finished' in server.texts()[-1]


def _slack_warnings(caplog):
    return [r.message for r in caplog.records
            if r.name == LOGGER and r.levelno >= logging.WARNING]


@pytest.mark.parametrize('body', [None, '{"ok": tr'])
def test_a_page_that_is_not_slacks_json_costs_one_warning_per_outage(server, tmp_path, caplog,
                                                                      body):
    server.fail('200', method='chat.postMessage', body=body)  # the whole run
    trainer = _trainer(tmp_path, _report(server, max_retries=1), log_every=1, report_every=1)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='could not be posted'):
            trainer.run()
    assert trainer.updater.iteration == 8
    # Several messages (start, reports, end), each tried twice.
    assert len(server.calls('chat.postMessage')) >= 4
    warned = _slack_warnings(caplog)
    assert len(warned) == 1, warned


def test_slack_answering_again_after_an_outage_posts_the_rest(server, tmp_path, caplog):
    server.fail('200', times=4, method='chat.postMessage')
    trainer = _trainer(tmp_path, _report(server))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.run()
    assert _column(server, 'iteration') == ['2', '4', '6', '8']
    assert 'started' in server.texts()[0] and 'finished' in server.texts()[-1]
    outage = [m for m in _slack_warnings(caplog) if 'resumed' not in m]
    assert len(outage) == 1, outage


def test_message_failing_past_max_retries_is_dropped_and_the_next_posted(server, tmp_path):
    server.fail('500', times=3, method='chat.postMessage')
    trainer = _trainer(tmp_path, _report(server, max_retries=2))
    with pytest.warns(RuntimeWarning, match='1 message'):
        trainer.run()
    assert 'started' not in ''.join(server.texts())
    assert 'finished' in server.texts()[-1]


def test_finalize_waits_at_most_flush_timeout_for_a_hung_slack(server, tmp_path):
    server.slow(20)
    trainer = _trainer(tmp_path, _report(server, client=server.client(timeout=30),
                                         flush_timeout=0.3))
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match='flush_timeout=0.3'):
        trainer.run()
    # Generous bound: the point is that finalize does not wait for the 20 s answer.
    assert time.monotonic() - started < 5


def test_full_queue_keeps_rows_pending_for_the_next_report(server, tmp_path):
    server.slow(0.05)
    report = _report(server, queue_size=1)
    trainer = _trainer(tmp_path, report, stop_iteration=20, log_every=1, report_every=1)
    trainer.run()
    tables = [text for text in server.texts() if _is_table(text)]
    assert len(tables) < 20  # some reports carried several rows
    assert _column(server, 'iteration') == [str(i) for i in range(1, 21)]


# Files -------------------------------------------------------------------------

def _write_every(iterations, filename):
    from chainer import training

    @training.make_extension(trigger=(1, 'iteration'), priority=training.PRIORITY_WRITER)
    def write(trainer):
        if trainer.updater.iteration in iterations:
            with open(os.path.join(trainer.out, filename), 'wb') as f:
                f.write(b'image at %d' % trainer.updater.iteration)
    return write


def test_changed_files_are_uploaded_into_the_thread(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server, upload=['plot.png']), stop_iteration=12)
    trainer.extend(_write_every((3, 10), 'plot.png'))
    trainer.run()
    assert [u['data'] for u in server.uploads] == [b'image at 3', b'image at 10']
    root = server.messages[0]['ts']
    assert all(u['thread_ts'] == root and u['channel'] == 'C0000000001'
               for u in server.uploads)
    assert all(u['filename'] == 'plot.png' for u in server.uploads)


def test_plot_report_image_is_uploaded_with_files_upload_v2(server, tmp_path):
    pytest.importorskip('matplotlib')
    trainer = _trainer(tmp_path, _report(server, upload=['loss.png']), stop_iteration=8)
    trainer.extend(extensions.PlotReport(['main/loss'], 'iteration', filename='loss.png',
                                         trigger=(4, 'iteration')))
    trainer.run()
    assert server.uploads and server.uploads[0]['data'][:8] == b'\x89PNG\r\n\x1a\n'
    assert server.calls('files.upload') == []


# Many machines -------------------------------------------------------------------

class _Communicator(object):
    """Stands in for a ChainerMN communicator: SlackReport reads only rank and size."""

    def __init__(self, rank, size):
        self.rank = rank
        self.size = size


def test_only_rank_zero_posts_reports(server, tmp_path):
    _trainer(tmp_path, _report(server, comm=_Communicator(1, 2))).run()
    assert server.requests == []


def test_rank_zero_names_its_rank_in_the_start_message(server, tmp_path):
    _trainer(tmp_path, _report(server, comm=_Communicator(0, 2))).run()
    assert '(rank 0 of 2)' in server.texts()[0]
    assert 'finished' in server.texts()[-1]


def test_error_on_another_rank_is_posted_naming_the_rank(server, tmp_path):
    trainer = _trainer(tmp_path, _report(server, comm=_Communicator(1, 2)))
    trainer.extend(crash_at(3))
    with pytest.raises(Crash):
        trainer.run()
    error, = server.texts()
    assert '(rank 1 of 2)' in error and 'Crash: crash at iteration 3' in error


@pytest.mark.mpi
def test_under_mpi_rank_zero_reports_and_a_failing_rank_names_itself(tmp_path):
    import chainermn
    comm = chainermn.create_communicator('naive')
    with SlackServer() as server:
        trainer = _trainer(tmp_path, _report(server, comm=comm))
        if comm.rank == 1:
            trainer.extend(crash_at(3))
            with pytest.raises(Crash):
                trainer.run()
            error, = server.texts()
            assert '(rank 1 of %d)' % comm.size in error
        else:
            trainer.run()
            assert '(rank 0 of %d)' % comm.size in server.texts()[0]
            assert 'finished' in server.texts()[-1]
    comm.mpi_comm.barrier()
