"""Posting from the background thread, retrying what Slack lets retry (_slack_poster)."""
import logging
import threading
import time
import warnings

import pytest
from chainer.training import extensions

from researchutils.chainer.training.extensions._slack_poster import SlackPoster
from tests.support.slack_runs import (
    LOGGER,
    is_table,
    make_report,
    posted_column,
    reporting_trainer,
    runtime_warnings,
    slack_threads,
    slack_warnings,
    write_every,
)
from tests.support.slack_server import SlackServer

pytestmark = pytest.mark.timeout(30)


# Threads -------------------------------------------------------------------------------

def test_every_message_replies_in_the_thread_of_the_start_message(server, tmp_path):
    reporting_trainer(tmp_path, make_report(server)).run()
    start, *replies = server.messages
    assert start['thread_ts'] is None
    assert replies and all(m['thread_ts'] == start['ts'] for m in replies)


def test_thread_false_posts_every_message_into_the_channel(server, tmp_path):
    reporting_trainer(tmp_path, make_report(server, thread=False)).run()
    assert len(server.messages) > 2
    assert all(m['thread_ts'] is None for m in server.messages)


def test_reports_waiting_together_for_a_slow_slack_go_out_as_one_table(server, tmp_path):
    server.slow(0.3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer = reporting_trainer(tmp_path, make_report(server), stop_iteration=40, log_every=1,
                                    report_every=2)
        trainer.run()
    # 20 reports, each posted alone, would take 20 requests at 0.3 s behind a 40-step run.
    tables = [text for text in server.texts() if is_table(text)]
    assert len(tables) < 10
    assert posted_column(server, 'iteration') == [str(i) for i in range(1, 41)]
    assert 'finished' in server.texts()[-1]
    assert runtime_warnings(record) == []


# Off the training thread ---------------------------------------------------------------

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


def test_poster_thread_ends_when_idle_and_a_later_message_starts_it_again(server):
    before = slack_threads()
    # idle_timeout is the poster's documented test seam; SlackReport keeps its minute.
    poster = SlackPoster(server.client(), 'general', idle_timeout=0.05)
    poster.post(['first'], root=True)
    server.wait_for(lambda _: slack_threads() == before)
    assert server.texts() == ['first']
    poster.post(['second'])
    assert poster.close(timeout=5.0) == 0
    assert server.texts() == ['first', 'second']
    assert server.messages[1]['thread_ts'] == server.messages[0]['ts'] == poster.thread_ts


def test_slack_is_called_only_off_the_training_thread(server, tmp_path):
    client = _ThreadRecordingClient(server.client())
    reporting_trainer(tmp_path, make_report(server, client=client)).run()
    assert client.calls
    assert all(thread is not threading.main_thread() for _, thread in client.calls)


# Channels ------------------------------------------------------------------------------

def test_channel_name_is_resolved_once(server, tmp_path):
    reporting_trainer(tmp_path, make_report(server, channel='#random'), stop_iteration=12).run()
    assert server.calls('conversations.list') == ['conversations.list']
    assert {m['channel'] for m in server.messages} == {'C0000000002'}


def test_channel_name_found_on_a_later_page(tmp_path):
    channels = [('C%010d' % i, 'channel-%d' % i) for i in range(450)]
    with SlackServer(channels=channels) as server:
        reporting_trainer(tmp_path, make_report(server, channel='channel-420')).run()
        assert len(server.calls('conversations.list')) == 3
        assert {m['channel'] for m in server.messages} == {'C0000000420'}


def test_token_unable_to_list_channels_posts_by_name_and_skips_uploads(server, tmp_path,
                                                                      caplog):
    server.refuse('conversations.list', 'missing_scope')
    trainer = reporting_trainer(tmp_path,
                                make_report(server, channel='random', upload=['plot.png']))
    trainer.extend(write_every((3,), 'plot.png'))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='1 message'):
            trainer.run()
    assert {m['channel'] for m in server.messages} == {'C0000000002'}
    assert 'finished' in server.texts()[-1]
    assert server.uploads == []
    assert [r for r in caplog.records if 'channels:read' in r.message]


def test_channel_id_needs_no_lookup(server, tmp_path):
    reporting_trainer(tmp_path, make_report(server, channel='C0000000003')).run()
    assert server.calls('conversations.list') == []
    assert {m['channel'] for m in server.messages} == {'C0000000003'}


# Slack failures never break training ---------------------------------------------------

def test_slack_down_from_the_start_training_completes_with_one_counting_warning(tmp_path):
    server = SlackServer().start()
    client = server.client(timeout=0.5)
    server.stop()  # nothing listens on the port any more
    trainer = reporting_trainer(tmp_path, make_report(server, client=client, flush_timeout=0.5))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer.run()
    assert trainer.updater.iteration == 8
    dropped, = runtime_warnings(record)
    # start + 2 reports + end message were queued; none could be posted.
    assert 'SlackReport: 4 message(s) could not be posted' in str(dropped.message)


def test_rejected_token_logs_a_warning_and_training_completes(server, tmp_path, caplog):
    server.reject_token()
    trainer = reporting_trainer(tmp_path, make_report(server))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='4 message'):
            trainer.run()
    assert trainer.updater.iteration == 8
    assert [r.message for r in caplog.records if 'invalid_auth' in r.message]
    # After invalid_auth the poster stops calling Slack.
    assert len(server.requests) == 1


def test_unknown_channel_logs_a_warning_and_training_completes(server, tmp_path, caplog):
    trainer = reporting_trainer(tmp_path, make_report(server, channel='nowhere'))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='message'):
            trainer.run()
    assert trainer.updater.iteration == 8
    assert server.messages == []
    assert [r for r in caplog.records if "'nowhere'" in r.message]


@pytest.mark.parametrize('kind', ['500', 'drop'])
def test_transient_failures_are_retried_and_no_report_is_lost(server, tmp_path, kind):
    server.fail(kind, times=3, method='chat.postMessage')
    trainer = reporting_trainer(tmp_path, make_report(server))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer.run()
    assert runtime_warnings(record) == []
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8']
    assert 'finished' in server.texts()[-1]
    assert len(server.calls('chat.postMessage')) == len(server.messages) + 3


def test_request_timeout_is_retried(server, tmp_path):
    server.slow(1.0, times=1)
    trainer = reporting_trainer(tmp_path, make_report(server, client=server.client(timeout=0.2)))
    trainer.run()
    assert 'started' in server.texts()[0]
    assert 'finished' in server.texts()[-1]


@pytest.mark.parametrize('body', [None, '', '<html><body>429 Too Many Requests</body></html>'])
def test_a_429_waits_retry_after_then_posts_whatever_its_body(server, tmp_path, body):
    # None: Slack's own JSON body; proxies in front of Slack answer with an empty or HTML one.
    server.fail('429', times=1, retry_after=1, method='chat.postMessage', body=body)
    trainer = reporting_trainer(tmp_path, make_report(server))
    trainer.run()
    limited, retried = [r for r in server.requests if r['method'] == 'chat.postMessage'][:2]
    assert limited['status'] == 429 and retried['status'] == 200
    assert retried['time'] - limited['time'] >= 0.95
    assert 'started' in server.texts()[0] and 'finished' in server.texts()[-1]


@pytest.mark.parametrize('body', [None, '{"ok": tr'])
def test_a_page_that_is_not_slacks_json_costs_one_warning_per_outage(server, tmp_path, caplog,
                                                                      body):
    server.fail('200', method='chat.postMessage', body=body)  # the whole run
    trainer = reporting_trainer(tmp_path, make_report(server, max_retries=1), log_every=1,
                                report_every=1)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(RuntimeWarning, match='could not be posted'):
            trainer.run()
    assert trainer.updater.iteration == 8
    # Several messages (start, reports, end), each tried twice.
    assert len(server.calls('chat.postMessage')) >= 4
    warned = slack_warnings(caplog)
    assert len(warned) == 1, warned


def test_slack_answering_again_after_an_outage_posts_the_rest(server, tmp_path, caplog):
    server.fail('200', times=4, method='chat.postMessage')
    trainer = reporting_trainer(tmp_path, make_report(server))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.run()
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8']
    assert 'started' in server.texts()[0] and 'finished' in server.texts()[-1]
    outage = [m for m in slack_warnings(caplog) if 'resumed' not in m]
    assert len(outage) == 1, outage


def test_retry_waits_double_from_retry_backoff_and_stop_growing_at_max_retry_backoff(
        server, tmp_path):
    server.fail('500', times=6, method='chat.postMessage')
    report = make_report(server, retry_backoff=0.025, max_retry_backoff=0.1, max_retries=8)
    reporting_trainer(tmp_path, report).run()
    times = [r['time'] for r in server.requests if r['method'] == 'chat.postMessage'][:7]
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    waits = [0.025, 0.05, 0.1, 0.1, 0.1, 0.1]  # uncapped, the last three: 0.2, 0.4, 0.8
    assert all(gap >= wait - 0.005 for gap, wait in zip(gaps, waits)), gaps
    # A loaded machine may add to a wait; 0.25 s more than the cap is far below 0.8.
    assert max(gaps[3:]) < 0.35, gaps
    assert 'finished' in server.texts()[-1]


def test_message_failing_past_max_retries_is_dropped_and_the_next_posted(server, tmp_path):
    server.fail('500', times=3, method='chat.postMessage')
    trainer = reporting_trainer(tmp_path, make_report(server, max_retries=2))
    with pytest.warns(RuntimeWarning, match='1 message'):
        trainer.run()
    assert 'started' not in ''.join(server.texts())
    assert 'finished' in server.texts()[-1]


def test_finalize_waits_at_most_flush_timeout_for_a_hung_slack(server, tmp_path):
    server.slow(20)
    trainer = reporting_trainer(tmp_path, make_report(server, client=server.client(timeout=30),
                                         flush_timeout=0.3))
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match='flush_timeout=0.3'):
        trainer.run()
    # Generous bound: the point is that finalize does not wait for the 20 s answer.
    assert time.monotonic() - started < 5


# Files ---------------------------------------------------------------------------------

def test_plot_report_image_is_uploaded_with_files_upload_v2(server, tmp_path):
    pytest.importorskip('matplotlib')
    trainer = reporting_trainer(tmp_path, make_report(server, upload=['loss.png']),
                                stop_iteration=8)
    trainer.extend(extensions.PlotReport(['main/loss'], 'iteration', filename='loss.png',
                                         trigger=(4, 'iteration')))
    trainer.run()
    assert server.uploads and server.uploads[0]['data'][:8] == b'\x89PNG\r\n\x1a\n'
    assert server.calls('files.upload') == []
