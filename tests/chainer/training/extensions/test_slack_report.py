"""SlackReport in real Trainer runs, posting with the real slack_sdk client to a loopback server.

What it posts when: these tests; how texts read, how the queue fills and how posting
survives Slack: test_slack_messages.py, test_slack_queue.py, test_slack_poster.py."""
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
from chainer.training import extension as extension_module
from chainer.training import extensions

from researchutils.chainer.training.extensions import Preempted, PreemptionSnapshot, SlackReport
from tests.support.preemptible_training import signal_self_at
from tests.support.slack_runs import (
    LOGGER,
    is_table,
    make_report,
    posted_column,
    reporting_trainer,
    slack_threads,
    slack_warnings,
    wait_for_thread,
    write_every,
)
from tests.support.slack_server import SlackServer
from tests.support.tiny_training import Crash, crash_at, make_trainer

pytestmark = pytest.mark.timeout(30)


# Construction --------------------------------------------------------------------------

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


# Every argument in the signature's order: a good value, a wrong one, the error it raises.
ARGUMENTS = [
    ('token_or_client', 'xoxb-given', -100, TypeError),
    ('entries', ['main/loss'], 'main/loss', TypeError),
    ('channel', 'test-channel', 'test channel', ValueError),
    ('log_report', 'LogReport', 5, TypeError),
    ('comm', None, object(), TypeError),
    ('thread', True, 'yes', TypeError),
    ('upload', (), 'loss.png', TypeError),
    ('queue_size', 64, 0, ValueError),
    ('flush_timeout', 10.0, -1.0, ValueError),
    ('max_retries', 8, -1, ValueError),
    ('retry_backoff', 1.0, 0.0, ValueError),
    ('max_retry_backoff', 30.0, 0.0, ValueError),
    ('request_timeout', 30.0, -1.0, ValueError),
    ('max_message_chars', 3900, 10, ValueError),
]


def test_the_original_researchutils_wrong_client_is_a_type_error_before_the_channel():
    # The original researchutils' own test: a client of the wrong type, with a channel that
    # is wrong too, names the client.
    with pytest.raises(TypeError, match='token_or_client'):
        SlackReport(token_or_client=-100, entries=['main/loss'], channel='test channel')


@pytest.mark.parametrize('first_wrong', range(len(ARGUMENTS)),
                         ids=[name for name, *_ in ARGUMENTS])
def test_the_first_wrong_argument_in_the_signature_order_is_named(first_wrong):
    arguments = {name: (good if k < first_wrong else wrong)
                 for k, (name, good, wrong, _) in enumerate(ARGUMENTS)}
    name, _, wrong, error = ARGUMENTS[first_wrong]
    with pytest.raises(error, match=name) as info:
        SlackReport(**arguments)
    assert repr(wrong) in str(info.value) or name == 'comm'


def test_the_arguments_table_follows_the_signature():
    import inspect
    names = [name for name in inspect.signature(SlackReport).parameters]
    assert names == [name for name, *_ in ARGUMENTS]


def test_client_without_slack_interface_is_rejected():
    with pytest.raises(TypeError, match='token_or_client'):
        SlackReport(object())


@pytest.mark.parametrize('options, error, word', [
    (dict(channel=''), ValueError, 'channel'),
    (dict(entries='main/loss'), TypeError, 'entries'),
    (dict(log_report=3), TypeError, 'log_report'),
    (dict(comm=object()), TypeError, 'comm'),
    (dict(upload='loss.png'), TypeError, 'upload'),
    (dict(entries=5), TypeError, '^entries must be a list of str, got 5'),
    (dict(entries=['epoch', 5]), TypeError, '^entries must be a list of str'),
    (dict(upload=5), TypeError, '^upload must be a list of str, got 5'),
    (dict(upload=None), TypeError, '^upload must be a list of str, got None'),
    (dict(upload=['loss\0.png']), ValueError, '^upload holds'),
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


# Slack's rule: a channel name is lower case letters, digits, '-' and '_', at most 80
# characters; an ID (C..., G..., D... in upper case) takes no '#'.
@pytest.mark.parametrize('channel', ['general ', 'my channel', ' general', 'General',
                                     'gen\teral', 'ml.runs', '#', '##general', '#C0123ABCD',
                                     'a' * 81, '#' + 'a' * 81, '---'])
def test_a_channel_slack_can_never_have_is_refused_naming_channel_before_any_request(
        server, channel):
    with pytest.raises(ValueError, match='channel.*' + re.escape(repr(channel))):
        SlackReport(server.client(), channel=channel)
    assert server.requests == []


def test_a_channel_given_as_no_str_is_a_type_error_naming_channel(server):
    with pytest.raises(TypeError, match='channel.*None'):
        SlackReport(server.client(), channel=None)


@pytest.mark.parametrize('channel', ['general', '#general', 'C0123ABCD', 'G0123ABCDEF',
                                     'ml_runs-2', 'a' * 80, '#' + 'a' * 80, '\u5b9f\u9a13',
                                     '\u092a\u094d\u0930\u092f\u094b\u0917'])
def test_every_channel_id_and_name_slack_allows_is_accepted(server, channel):
    SlackReport(server.client(), channel=channel)


def test_missing_log_report_is_named_when_the_run_starts(server, tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.extend(make_report(server))
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


# A complete run ------------------------------------------------------------------------

def test_each_log_row_is_posted_exactly_once(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server), stop_iteration=12, log_every=2,
                                report_every=4)
    trainer.run()
    log = trainer.get_extension('LogReport').log
    assert posted_column(server, 'iteration') == [str(row['iteration']) for row in log]
    # One table per report at most: reports that waited together share one.
    assert 1 <= len([t for t in server.texts() if is_table(t)]) <= 3


def test_complete_run_ends_with_finished_message(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server))
    trainer.run()
    texts = server.texts()
    assert 'finished' in texts[-1] and 'iteration 8' in texts[-1]
    assert all('finished' not in text for text in texts[:-1])


def test_rows_logged_after_the_last_report_go_with_the_end_message(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server), stop_iteration=6, log_every=2,
                                report_every=4)
    trainer.run()
    assert posted_column(server, 'iteration') == ['2', '4', '6']


# Crashes and interruptions -------------------------------------------------------------

def test_crash_posts_type_message_and_traceback_and_no_finished(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server))
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
    trainer = reporting_trainer(tmp_path, make_report(server))
    trainer.extend(crash_at(5, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    texts = server.texts()
    assert 'interrupted (KeyboardInterrupt)' in texts[-1]
    assert not any('finished' in text for text in texts)


def test_a_preempted_run_is_reported_as_preempted_and_resuming(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server))
    trainer.extend(PreemptionSnapshot())
    trainer.extend(signal_self_at(5, signal.SIGTERM))
    with pytest.raises(Preempted):
        trainer.run()
    texts = server.texts()
    snapshot = os.path.join(str(tmp_path), 'run', 'snapshot_iter_5')
    assert texts[-1].startswith(':double_vertical_bar: Training preempted by SIGTERM at '
                                'iteration 5 (epoch 1, ')
    assert 'it resumes from {} when run again (exit status 75)'.format(snapshot) in texts[-1]
    assert not any('finished' in text or 'interrupted' in text or 'failed' in text
                   for text in texts)
    # The rows of the iterations done are posted before it.
    assert posted_column(server, 'iteration') == ['2', '4']


# Threads and resuming ------------------------------------------------------------------

def test_thread_ts_is_the_start_message_timestamp(server, tmp_path):
    report = make_report(server)
    reporting_trainer(tmp_path, report).run()
    assert report.thread_ts == server.messages[0]['ts']


def test_resumed_run_continues_the_thread_without_repeating_rows(server, tmp_path):
    report = make_report(server)
    first = reporting_trainer(tmp_path, report, stop_iteration=4, report_every=2, name='first')
    first.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    # A real epoch outlasts one post; here the start (which goes out with the first
    # report) must be posted before the snapshot.
    first.extend(lambda trainer: wait_for_thread(report), trigger=(3, 'iteration'))
    first.run()
    root = server.messages[0]['ts']
    posted_by_first = len(server.messages)

    from chainer.serializers import load_npz
    second = reporting_trainer(tmp_path, make_report(server), stop_iteration=8, name='second')
    load_npz(str(tmp_path / 'first' / 'snapshot'), second)
    second.run()
    resumed = server.messages[posted_by_first:]
    assert 'resumed at iteration 4' in resumed[0]['text']
    assert [m['thread_ts'] for m in resumed] == [root] * len(resumed)
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8']


def _autoloading_run(server, tmp_path, stop_iteration):
    """A run in tmp_path/run whose snapshot extension autoloads. Its priority (-100) is below
    SlackReport's, so Chainer initializes the report first, then loads the snapshot."""
    report = make_report(server)
    trainer = make_trainer(tmp_path / 'run', stop_iteration=stop_iteration)
    trainer.extend(extensions.LogReport(trigger=(2, 'iteration')))
    trainer.extend(report, trigger=(2, 'iteration'))
    trainer.extend(extensions.snapshot(autoload=True), trigger=(4, 'iteration'))
    trainer.extend(lambda trainer: wait_for_thread(report), trigger=(3, 'iteration'))
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
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8']


def test_a_fresh_run_with_snapshot_autoload_and_no_snapshot_says_started(server, tmp_path):
    _autoloading_run(server, tmp_path, stop_iteration=4)
    assert 'Training started' in server.messages[0]['text']
    assert server.messages[0]['thread_ts'] is None


def test_a_finalized_report_given_to_a_new_trainer_starts_a_new_thread_with_all_rows(
        server, tmp_path):
    report = make_report(server)
    reporting_trainer(tmp_path, report, name='first').run()
    first_root = report.thread_ts
    posted_by_first = len(server.messages)
    reporting_trainer(tmp_path, report, name='second').run()
    second = server.messages[posted_by_first:]
    assert 'started' in second[0]['text'] and second[0]['thread_ts'] is None
    assert report.thread_ts == second[0]['ts'] != first_root
    assert all(m['thread_ts'] == second[0]['ts'] for m in second[1:])
    assert 'finished' in second[-1]['text']
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8'] * 2


def test_a_finalized_report_resumed_from_a_snapshot_continues_the_snapshots_thread(
        server, tmp_path):
    report = make_report(server)
    first = reporting_trainer(tmp_path, report, stop_iteration=4, report_every=2, name='first')
    first.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    first.extend(lambda trainer: wait_for_thread(report), trigger=(3, 'iteration'))
    first.run()
    root = report.thread_ts
    posted_by_first = len(server.messages)

    from chainer.serializers import load_npz
    second = reporting_trainer(tmp_path, report, stop_iteration=8, name='second')
    load_npz(str(tmp_path / 'first' / 'snapshot'), second)
    second.run()
    resumed = server.messages[posted_by_first:]
    assert 'resumed at iteration 4' in resumed[0]['text']
    assert [m['thread_ts'] for m in resumed] == [root] * len(resumed)


class _FailsToInitialize(extension_module.Extension):
    priority = extension_module.PRIORITY_READER - 1  # initialized after SlackReport

    def initialize(self, trainer):
        raise Crash('initialize failed')

    def __call__(self, trainer):
        pass


def test_no_thread_outlives_a_run_whose_later_extension_fails_to_initialize(server, tmp_path):
    before = slack_threads()
    trainer = reporting_trainer(tmp_path, make_report(server))
    trainer.extend(_FailsToInitialize())
    with pytest.raises(Crash, match='initialize failed'):
        trainer.run()
    assert slack_threads() == before


# Files ---------------------------------------------------------------------------------

def test_changed_files_are_uploaded_into_the_thread(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server, upload=['plot.png']),
                                stop_iteration=12)
    trainer.extend(write_every((3, 10), 'plot.png'))
    trainer.run()
    assert [u['data'] for u in server.uploads] == [b'image at 3', b'image at 10']
    root = server.messages[0]['ts']
    assert all(u['thread_ts'] == root and u['channel'] == 'C0000000001'
               for u in server.uploads)
    assert all(u['filename'] == 'plot.png' for u in server.uploads)


@contextlib.contextmanager
def _releasing_readers(fifo):
    """Opens ``fifo`` for writing whenever a reader waits on it, so that a reader that
    blocks (waiting for a writer, as a plain open does) gets an empty file, not a hang."""
    done = threading.Event()

    def release():
        while not done.wait(0.02):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader waits
                pass

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _fifo(path):
    os.mkfifo(path)
    return _releasing_readers(path)


def _folder(path):
    os.mkdir(path)
    return contextlib.nullcontext()


@pytest.mark.parametrize('make, says', [
    (_folder, 'a folder'),
    pytest.param(_fifo, 'no regular file',
                 marks=pytest.mark.skipif(not hasattr(os, 'mkfifo'), reason='no FIFOs')),
])
def test_an_upload_that_is_no_file_costs_that_upload_only_with_one_warning(
        server, tmp_path, caplog, make, says):
    (tmp_path / 'run').mkdir()
    report = make_report(server, upload=['plots', 'plot.png'])
    trainer = reporting_trainer(tmp_path, report, stop_iteration=12)
    trainer.extend(write_every((3, 10), 'plot.png'))
    with make(str(tmp_path / 'run' / 'plots')), caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.run()  # three reports and the end each find it
    assert [u['data'] for u in server.uploads] == [b'image at 3', b'image at 10']
    assert 'finished' in server.texts()[-1]
    warned = slack_warnings(caplog)
    assert len(warned) == 1 and "'plots'" in warned[0] and says in warned[0], warned


# Python calls audit hooks just before it opens a file; once added, one stays for the
# process, so this one acts only on the paths in _REMOVE_WHEN_READ.
_REMOVE_WHEN_READ = set()
_audit_hook_added = []


def _remove_when_read(event, args):
    if event == 'open' and isinstance(args[0], str) and args[0] in _REMOVE_WHEN_READ:
        mode, flags = args[1], args[2]
        reading = ('r' in mode and '+' not in mode if isinstance(mode, str)
                   else flags & (os.O_WRONLY | os.O_RDWR) == 0)
        if reading:
            _REMOVE_WHEN_READ.discard(args[0])
            os.remove(args[0])


def test_an_upload_removed_between_its_check_and_its_read_costs_that_upload_only(
        server, tmp_path):
    if not _audit_hook_added:
        sys.addaudithook(_remove_when_read)
        _audit_hook_added.append(True)
    # No report before the end: finalize is the one that reads the files.
    report = make_report(server, upload=['plot.png', 'other.png'])
    trainer = reporting_trainer(tmp_path, report, stop_iteration=4, report_every=100)
    trainer.extend(write_every((2,), 'plot.png'))
    trainer.extend(write_every((2,), 'other.png'))
    _REMOVE_WHEN_READ.add(os.path.join(trainer.out, 'plot.png'))
    try:
        trainer.run()
    finally:
        _REMOVE_WHEN_READ.clear()
    assert not (tmp_path / 'run' / 'plot.png').exists()  # removed as it was opened
    assert [(u['filename'], u['data']) for u in server.uploads] == [('other.png', b'image at 2')]
    assert 'finished' in server.texts()[-1]


# Many machines -------------------------------------------------------------------------

class _Communicator(object):
    """Stands in for a ChainerMN communicator: SlackReport reads only rank and size."""

    def __init__(self, rank, size):
        self.rank = rank
        self.size = size


def test_only_rank_zero_posts_reports(server, tmp_path):
    reporting_trainer(tmp_path, make_report(server, comm=_Communicator(1, 2))).run()
    assert server.requests == []


def test_rank_zero_names_its_rank_in_the_start_message(server, tmp_path):
    reporting_trainer(tmp_path, make_report(server, comm=_Communicator(0, 2))).run()
    assert '(rank 0 of 2)' in server.texts()[0]
    assert 'finished' in server.texts()[-1]


def test_error_on_another_rank_is_posted_naming_the_rank(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server, comm=_Communicator(1, 2)))
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
        trainer = reporting_trainer(tmp_path, make_report(server, comm=comm))
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


# Uploads stay under the trainer's out: never an absolute path or "..".

@pytest.mark.parametrize('path', ['/etc/passwd', '../secret.txt', 'plots/../../secret.txt',
                                  '..', ''])
def test_an_upload_path_outside_the_trainer_out_is_refused_naming_it(server, path):
    with pytest.raises(ValueError, match=r"upload.*{}".format(repr(path).replace('.', r'\.'))):
        SlackReport(server.client(), upload=['loss.png', path])


def test_relative_upload_paths_under_the_trainer_out_are_accepted(server):
    SlackReport(server.client(), upload=['loss.png', 'plots/metrics.png', 'plots/./x.png'])
