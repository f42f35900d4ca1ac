"""Which tests each stack ran: the record ``make test`` adds up at its end.

With ``RECORD_VARIABLE`` naming a file, every pytest process of a run (the leader, each
xdist worker, each MPI rank) appends one JSON line per test to it: the stack (Python's
version), the test's id, and what became of it (``passed``, ``failed``, ``skipped`` with the
reason, or ``deselected``: left to another stack by a marker). ``python -m
tests.support.run_record FILE`` prints, per stack, how many tests passed, failed, were
skipped and were left to another stack, then how many distinct tests ran (passed or
failed) on at least one stack, and names those that ran nowhere, with why.

Tested by tests/support/test_run_record.py.
"""
import collections
import json
import os
import re
import sys

RECORD_VARIABLE = 'RESEARCHUTILS_TEST_RECORD'


def _stack():
    return '{}.{}'.format(*sys.version_info[:2])


class Recorder:
    """The plugin: appends a line per test outcome to ``path``."""

    def __init__(self, path, mpi, worker=False):
        self._path = path
        self._stack = _stack() + (' MPI' if mpi else '')
        self._worker = worker

    def _write(self, rows):
        # One write a line, in append mode: lines of several processes never interleave.
        with open(self._path, 'a', encoding='utf-8') as f:
            for row in rows:
                f.write(json.dumps(dict(row, stack=self._stack)) + '\n')

    def pytest_deselected(self, items):
        self._write({'id': item.nodeid, 'outcome': 'deselected'} for item in items)

    def pytest_runtest_logreport(self, report):
        if self._worker:
            return  # the leader records what its workers report
        if report.when == 'call' or (report.when == 'setup' and not report.passed) or (
                report.when == 'teardown' and report.failed):
            row = {'id': report.nodeid, 'outcome': report.outcome}
            if report.skipped and isinstance(report.longrepr, tuple):
                row['why'] = report.longrepr[2].removeprefix('Skipped: ')
            self._write([row])


def configure(config, mpi):
    path = os.environ.get(RECORD_VARIABLE)
    if path:
        # An xdist worker is told by its config, not by PYTEST_XDIST_WORKER, which a run
        # that a test on a worker starts inherits.
        config.pluginmanager.register(
            Recorder(os.path.abspath(path), mpi, worker=hasattr(config, 'workerinput')),
            'run-record')
        if not getattr(config.option, 'numprocesses', None):
            # This process runs the tests (an xdist leader starts its workers with the
            # variable): a pytest run that one of them starts is no test of this stack.
            del os.environ[RECORD_VARIABLE]


# pytest-xdist's loadgroup adds "@<group>" to the id of a test that carries an xdist_group
# (tests/conftest.py: a module's name, or session-fixture-NAME); a run without xdist (the MPI
# runs) reports the bare id. The record keeps the bare one, so both name one test.
_XDIST_GROUP = re.compile(r'@(tests\.[\w.]+|session-fixture-[\w-]+)$')


def read(path):
    """{stack: {test id: (outcome, why)}}; a test reported twice (an MPI test on each rank,
    a failing tear-down after a pass) keeps its worst outcome."""
    rank = {'deselected': 0, 'skipped': 1, 'passed': 2, 'failed': 3}
    stacks = collections.defaultdict(dict)
    with open(path, encoding='utf-8') as f:
        for line in f:
            row = json.loads(line)
            row['id'] = _XDIST_GROUP.sub('', row['id'])
            seen = stacks[row['stack']].get(row['id'])
            if seen is None or rank[row['outcome']] > rank[seen[0]]:
                stacks[row['stack']][row['id']] = (row['outcome'], row.get('why', ''))
    return stacks


def summary(stacks):
    """The lines ``make test`` prints: per stack, then across them."""
    lines = ['== tests per stack (passed / failed / skipped / left to another stack)']
    for stack in sorted(stacks):
        counts = collections.Counter(outcome for outcome, _ in stacks[stack].values())
        lines.append('  {:<10} {:>6} passed {:>4} failed {:>5} skipped {:>6} left'.format(
            stack, counts['passed'], counts['failed'], counts['skipped'], counts['deselected']))
    # Each test's best outcome over the stacks: ran (passed or failed), else skipped (with
    # its reason), else left to another stack by every one.
    rank = {'deselected': 0, 'skipped': 1, 'passed': 2, 'failed': 2}
    everywhere = {}
    for tests in stacks.values():
        for test, (outcome, why) in tests.items():
            best = everywhere.get(test)
            if best is None or rank[outcome] > rank[best[0]]:
                everywhere[test] = (outcome, why)
    ran = [test for test, (outcome, _) in everywhere.items() if outcome in ('passed', 'failed')]
    never = sorted((why or outcome, test) for test, (outcome, why) in everywhere.items()
                   if outcome not in ('passed', 'failed'))
    lines.append('  {} distinct tests, {} ran on at least one stack; {} ran nowhere{}'.format(
        len(everywhere), len(ran), len(never), ':' if never else ''))
    for why, count in collections.Counter(why for why, _ in never).most_common():
        lines.append('    {:5d}  {}'.format(count, why))
    return lines


def main(argv):
    if len(argv) != 1:
        sys.exit('usage: python -m tests.support.run_record FILE')
    if not os.path.exists(argv[0]):
        return
    print('\n'.join(summary(read(argv[0]))))


if __name__ == '__main__':
    main(sys.argv[1:])

