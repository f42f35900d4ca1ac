"""The bounded queue between the training thread and the poster (_slack_queue)."""


import pytest

from tests.support.slack_runs import (
    is_table,
    make_report,
    posted_column,
    reporting_trainer,
)

pytestmark = pytest.mark.timeout(30)


# A full queue --------------------------------------------------------------------------

def test_full_queue_keeps_rows_pending_for_the_next_report(server, tmp_path):
    server.slow(0.05)
    report = make_report(server, queue_size=1)
    trainer = reporting_trainer(tmp_path, report, stop_iteration=20, log_every=1, report_every=1)
    trainer.run()
    tables = [text for text in server.texts() if is_table(text)]
    assert len(tables) < 20  # some reports carried several rows
    assert posted_column(server, 'iteration') == [str(i) for i in range(1, 21)]
