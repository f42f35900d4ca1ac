"""What SlackReport says: start, table, error texts within Slack's limits (_slack_messages)."""
import os
import re
import socket
import sys
import traceback
import warnings

import chainer
import pytest
from chainer.training import extension as extension_module
from chainer.training import extensions

from researchutils.chainer.training.extensions._slack_messages import (
    end_texts,
    location,
    table_texts,
)
from tests.support.slack_runs import (
    is_table,
    make_report,
    posted_column,
    reporting_trainer,
    runtime_warnings,
    table_rows,
)
from tests.support.tiny_training import Crash, crash_at, make_trainer

pytestmark = pytest.mark.timeout(30)


# Start message -------------------------------------------------------------------------

def test_start_message_names_host_pid_command_and_output_folder(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server))
    trainer.run()
    start = server.texts()[0]
    assert 'started' in start
    assert socket.gethostname() in start
    assert 'pid:     %d' % os.getpid() in start
    assert sys.argv[0] in start
    assert os.path.abspath(str(tmp_path / 'run')) in start


# Tables --------------------------------------------------------------------------------

def test_table_shows_chosen_entries_in_order_with_blank_missing_cells(server, tmp_path):
    report = make_report(server, entries=['iteration', 'validation/main/loss', 'main/loss'])
    trainer = reporting_trainer(tmp_path, report, stop_iteration=4, report_every=4)
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
    trainer = reporting_trainer(tmp_path, make_report(server), stop_iteration=4, report_every=4)
    trainer.run()
    header, _ = table_rows(server.texts()[1])
    assert header == ['epoch', 'iteration', 'main/accuracy', 'main/loss', 'elapsed_time']


def test_long_report_is_split_into_messages_within_the_limit(server, tmp_path):
    report = make_report(server, max_message_chars=300)
    trainer = reporting_trainer(tmp_path, report, stop_iteration=40, log_every=1, report_every=40)
    trainer.run()
    tables = [text for text in server.texts() if is_table(text)]
    assert len(tables) > 1
    assert all(len(text) <= 300 for text in tables)
    assert posted_column(server, 'iteration') == [str(i) for i in range(1, 41)]


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
    trainer.extend(make_report(server, entries=['iteration', 'odd']), trigger=(4, 'iteration'))
    trainer.extend(restore)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        trainer.run()
    assert runtime_warnings(record) == []
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8']
    rows = [row.split() for text in server.texts() if is_table(text)
            for row in table_rows(text)[1]]
    assert ['4', '?'] in rows
    assert 'finished' in server.texts()[-1]


def test_table_wider_than_a_message_is_trimmed_not_rejected(server, tmp_path):
    entries = ['iteration'] + ['observation/with/a/long/name/%d' % i for i in range(30)]
    trainer = reporting_trainer(tmp_path,
                                make_report(server, entries=entries, max_message_chars=300))
    trainer.run()
    assert all(len(text) <= 300 for text in server.texts())
    assert 'finished' in server.texts()[-1]
    assert posted_column(server, 'iteration') == ['2', '4', '6', '8']


# Errors --------------------------------------------------------------------------------

def test_over_long_error_text_is_trimmed_and_split_not_rejected(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server, max_message_chars=400))
    trainer.extend(crash_at(3, Crash('x' * 5000)))
    with pytest.raises(Crash):
        trainer.run()
    errors = [text for text in server.texts()[1:] if 'failed' in text or 'Traceback' in text]
    assert errors and all(len(text) <= 400 for text in server.texts())
    assert server.calls('chat.postMessage') == ['chat.postMessage'] * len(server.messages)


# Text from the run is escaped ----------------------------------------------------------

def _as_slack_shows(text):
    """What a Slack client displays for ``text``: its three entities read back."""
    return text.replace('&lt;', '<').replace('&gt;', '>').replace('&amp;', '&')


def _assert_nothing_slack_would_parse(texts):
    """No ``<`` or ``>`` (which open Slack's mentions and links) and every ``&`` an entity."""
    for text in texts:
        assert '<' not in text and '>' not in text, text
        assert re.findall(r'&(?!amp;|lt;|gt;)', text) == [], text


def _observe(key):
    @extension_module.make_extension(trigger=(1, 'iteration'),
                                      priority=extension_module.PRIORITY_WRITER)
    def observe(trainer):
        chainer.report({key: 0.5})
    return observe


def test_text_from_the_run_reaches_slack_escaped_so_it_cannot_notify_anyone(server, tmp_path):
    key = '<!channel> & loss'
    out = tmp_path / 'runs <!here>'
    trainer = make_trainer(out, stop_iteration=4)
    trainer.extend(_observe(key))
    trainer.extend(extensions.LogReport(trigger=(2, 'iteration')))
    trainer.extend(make_report(server, entries=['iteration', key]), trigger=(2, 'iteration'))
    trainer.extend(crash_at(3, Crash('<@U0123ABCD> & <!here>: broken')))
    with pytest.raises(Crash):
        trainer.run()
    texts = server.texts()
    _assert_nothing_slack_would_parse(texts)
    start, table, error = texts[0], texts[1], '\n'.join(texts[2:])
    # What the reader sees is the run's own text, and the formatting around it is intact.
    assert start.startswith(':rocket: Training started on ')
    assert 'out:     %s\n```' % os.path.abspath(str(out)) in _as_slack_shows(start)
    header, row = _as_slack_shows(table).split('```')[1].strip('\n').split('\n')
    assert header == 'iteration  ' + key
    assert row.split() == ['2', '0.5']
    assert row.index('0.5') == header.index(key)  # aligned as the reader sees it
    assert error.startswith(':x: Training failed at iteration 3 on ')
    assert 'Crash: <@U0123ABCD> & <!here>: broken\n```' in _as_slack_shows(error)
    assert error.rstrip().endswith('```')


def test_escaped_text_stays_within_the_limit_and_no_entity_is_cut(server, tmp_path):
    trainer = reporting_trainer(tmp_path, make_report(server, max_message_chars=200))
    trainer.extend(crash_at(3, Crash('<>&' * 400)))
    with pytest.raises(Crash):
        trainer.run()
    texts = server.texts()
    assert all(len(text) <= 200 for text in texts)
    _assert_nothing_slack_would_parse(texts)
    shown = _as_slack_shows('\n'.join(texts))
    assert 'Crash: <>&<>&' in shown


# Long messages -------------------------------------------------------------------------

def _deep_crash(depth):
    """An extension raising a Crash ``depth`` calls down: a traceback of many lines."""

    def descend(level):
        if level == 0:
            raise Crash('deep down')
        descend(level - 1)

    @extension_module.make_extension(trigger=(1, 'iteration'))
    def crash(trainer):
        descend(depth)
    return crash


def test_a_long_titled_message_carries_its_title_in_its_first_part_only(server, tmp_path):
    # A long output folder makes the start message long whatever the command line is
    # (under pytest-xdist it is only `python -c`).
    trainer = reporting_trainer(tmp_path, make_report(server, max_message_chars=200),
                                name='run_' + 'o' * 120)
    trainer.extend(_deep_crash(30))
    with pytest.raises(Crash) as raised:
        trainer.run()
    texts = server.texts()
    first_error = next(i for i, text in enumerate(texts) if text.startswith(':x: '))
    for title, parts in [(':rocket: Training started on ', texts[:first_error]),
                         (':x: Training failed at iteration 1 on ', texts[first_error:])]:
        assert len(parts) > 1 and all(len(part) <= 200 for part in parts)
        assert parts[0].startswith(title) and '\n```\n' in parts[0]
        assert all(part.startswith('```\n') and part.endswith('\n```') for part in parts[1:])
        assert title not in ''.join(parts[1:])
    # Every line of the traceback, in order, once (the test's own frames, above the
    # trainer's, are in the exception's traceback only once it has reached the test).
    posted = [line for part in texts[first_error:]
              for line in _as_slack_shows(part).split('```')[1].split('\n') if line]
    error = raised.value
    reference = [line for line in ''.join(traceback.format_exception(
        type(error), error, error.__traceback__)).split('\n') if line]
    assert posted[0] == 'Traceback (most recent call last):'
    assert posted[1:] == reference[len(reference) - len(posted) + 1:]
    assert posted[-1] == 'tests.support.tiny_training.Crash: deep down'


def _block(lines):
    return '```\n' + '\n'.join(lines) + '\n```'


@pytest.mark.parametrize('widths', [[187], [93, 93], [40, 40, 40, 64]])
def test_a_table_of_exactly_the_limit_is_one_message_and_one_more_character_is_two(widths):
    # 'name' heads the table; each row is one cell of letters (no padding: rstrip).
    rows = [{'name': chr(ord('a') + i) * width} for i, width in enumerate(widths)]
    expected = _block(['name'] + [row['name'] for row in rows])
    assert len(expected) == 200
    assert table_texts(['name'], rows, 200) == [expected]
    if len(rows) > 1:
        longer = rows[:-1] + [{'name': rows[-1]['name'] + 'z'}]
        texts = table_texts(['name'], longer, 200)
        assert len(texts) == 2 and all(len(text) <= 200 for text in texts)
        assert texts[1] == _block(['name', longer[-1]['name']])


def test_a_titled_text_of_exactly_the_limit_is_one_message_untrimmed():
    title = ':white_check_mark: Training finished at iteration 8 (epoch 2, 3.0 s)'
    out = '/' + 'o' * (300 - len(title) - len('\n') - len(_block([''])) - 1)
    expected = title + '\n' + _block([out])
    assert len(expected) == 300
    assert end_texts(8, 2, 3.0, out, None, 300) == [expected]


# The texts themselves ------------------------------------------------------------------

def test_table_texts_repeat_the_header_and_keep_every_row_in_order():
    rows = [{'iteration': i, 'main/loss': 1.0 / i} for i in range(1, 61)]
    texts = table_texts(['iteration', 'main/loss'], rows, 200)
    assert len(texts) > 1 and all(len(text) <= 200 for text in texts)
    tables = [text.split('```')[1].strip('\n').split('\n') for text in texts]
    assert all(table[0].split() == ['iteration', 'main/loss'] for table in tables)
    cells = [line.split() for table in tables for line in table[1:]]
    assert cells == [[str(i), '%.6g' % (1.0 / i)] for i in range(1, 61)]


def test_end_texts_name_the_interrupt_instead_of_finished():
    text, = end_texts(8, 2, 3.0, 'result', KeyboardInterrupt(), 3900)
    assert text.startswith(':warning: Training interrupted (KeyboardInterrupt) at iteration 8 '
                           '(epoch 2, 3.0 s)\n')
    assert os.path.abspath('result') in text


def test_location_names_the_rank_under_chainermn():
    class Communicator(object):
        rank, size = 1, 4

    assert location(Communicator()) == 'on {} (rank 1 of 4)'.format(socket.gethostname())


# Every part Slack receives is within the limit, counted as Slack counts: escaped ----------

LIMIT = 200


def test_short_lines_of_ampersands_are_packed_by_their_escaped_length(server, tmp_path):
    # 30 lines of 20 '&': 20 characters each as written, 100 as posted ('&amp;').
    trainer = reporting_trainer(tmp_path, make_report(server, max_message_chars=LIMIT))
    trainer.extend(crash_at(3, Crash('\n'.join(['&' * 20] * 30))))
    with pytest.raises(Crash):
        trainer.run()
    texts = server.texts()
    assert max(len(text) for text in texts) <= LIMIT
    shown = _as_slack_shows('\n'.join(texts))
    assert shown.count('&' * 20 + '\n') >= 29  # every line there, whole


@pytest.mark.parametrize('name, reaches_the_limit', [
    # Short as written, far longer than a part as posted: trimmed by its escaped length.
    ('run_' + '&' * 30, False),
    # Longer than a part either way; the cut falls among plain characters, so the part is
    # exactly as long as the room its title line, newline and fences leave.
    ('run_&&&&&' + 'x' * 200, True),
])
def test_the_titled_part_counts_its_title_line_and_fences(server, tmp_path, name,
                                                          reaches_the_limit):
    # The finished message: a title line, then a code block of the output folder.
    trainer = reporting_trainer(tmp_path, make_report(server, max_message_chars=LIMIT),
                                name=name)
    trainer.run()
    texts = server.texts()
    assert max(len(text) for text in texts) <= LIMIT
    finished = [text for text in texts if text.startswith(':white_check_mark: ')]
    assert len(finished) == 1 and finished[0].endswith('\u2026\n```')
    if reaches_the_limit:
        assert len(finished[0]) == LIMIT


def test_the_repeated_header_of_a_table_counts_its_newline(server, tmp_path):
    # Ten columns of long names: the header is trimmed to a third of a part and heads
    # every part; a row, far wider than what is left, is trimmed to the room the header
    # (its newline included) and the fences leave.
    keys = ['&metric/{}/{}'.format(i, 'x' * 24) for i in range(10)]
    trainer = make_trainer(tmp_path / 'run', stop_iteration=4)
    for key in keys:
        trainer.extend(_observe(key))
    trainer.extend(extensions.LogReport(trigger=(2, 'iteration')))
    trainer.extend(make_report(server, entries=['iteration'] + keys,
                               max_message_chars=LIMIT), trigger=(2, 'iteration'))
    trainer.run()
    texts = server.texts()
    assert max(len(text) for text in texts) <= LIMIT
    tables = [text for text in texts if text.startswith('```\niteration')]
    assert tables and all(len(text) == LIMIT for text in tables)
