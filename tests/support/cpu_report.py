"""Where the suite's CPU goes: a pytest plugin that records CPU seconds per test and per fixture.

``pytest -p tests.support.cpu_report --cpu-report=PATH`` makes every process that runs tests
(each pytest-xdist worker, or pytest's own) append one JSON line per test and per fixture set-up
to ``PATH.<python version>.<worker>``. ``python -m tests.support.cpu_report PATH.3.13`` adds
one stack's files up (``PATH`` alone: every stack's) and prints the tables docs/testing.rst
records: CPU seconds per test file and per fixture, largest first.

A test's CPU is the user and system time of its process over its set-up, call and tear-down,
plus that of the child processes it waited for in that time (``RUSAGE_CHILDREN``: a worker
process, a server the test stopped, an interpreter it ran). A server kept for the whole session
is counted when it is stopped, at the end, under the fixture that stops it. Wall time is
recorded beside, to show what waits rather than computes.

Tested by tests/support/test_cpu_report.py.
"""
import collections
import json
import os
import resource
import sys
import time

import pytest


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser):
    parser.addoption('--cpu-report', metavar='PATH', default=None,
                     help='append CPU seconds per test and per fixture to '
                          'PATH.<python version>.<worker> '
                          '(tests/support/cpu_report.py)')


class _Recorder:
    def __init__(self, path):
        # One file a process and stack: PATH.3.13.gw0 (PATH.3.13 reads one stack's files).
        worker = os.environ.get('PYTEST_XDIST_WORKER') or 'main{}'.format(os.getpid())
        self._file = open('{}.{}.{}.{}'.format(path, *sys.version_info[:2], worker), 'a',
                          encoding='utf-8')

    def _write(self, **row):
        self._file.write(json.dumps(row) + '\n')
        self._file.flush()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu, wall = _cpu(), time.monotonic()
        yield
        self._write(kind='test', file=item.location[0], name=item.nodeid,
                    cpu=_cpu() - cpu, wall=time.monotonic() - wall)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        cpu, wall = _cpu(), time.monotonic()
        yield
        self._write(kind='fixture', file=request.node.location[0] if hasattr(
            request.node, 'location') else '', name=fixturedef.argname, scope=fixturedef.scope,
            cpu=_cpu() - cpu, wall=time.monotonic() - wall)

    def close(self):
        self._file.close()


def pytest_configure(config):
    path = config.getoption('--cpu-report')
    if path:
        recorder = _Recorder(os.path.abspath(path))
        config.pluginmanager.register(recorder, 'cpu-report-recorder')
        config.add_cleanup(recorder.close)


def tables(path):
    """Reads every ``path.<worker>`` file: (CPU and wall seconds and tests per file, CPU and
    wall seconds and set-ups per fixture), each a list of rows, largest CPU first."""
    folder, prefix = os.path.split(os.path.abspath(path))
    files = collections.defaultdict(lambda: [0., 0., 0])
    fixtures = collections.defaultdict(lambda: [0., 0., 0])
    for name in sorted(os.listdir(folder or '.')):
        if not name.startswith(prefix + '.'):
            continue
        with open(os.path.join(folder, name), encoding='utf-8') as f:
            for line in f:
                row = json.loads(line)
                if row['kind'] == 'test':
                    key, table = row['file'], files
                else:
                    key, table = '{} ({})'.format(row['name'], row['scope']), fixtures
                table[key][0] += row['cpu']
                table[key][1] += row['wall']
                table[key][2] += 1
    return ([(key,) + tuple(value) for key, value in
             sorted(table.items(), key=lambda pair: -pair[1][0])]
            for table in (files, fixtures))


def main(argv):
    if len(argv) not in (1, 2):
        sys.exit('usage: python -m tests.support.cpu_report PATH [ROWS]')
    rows = int(argv[1]) if len(argv) == 2 else 40
    by_file, by_fixture = tables(argv[0])
    total = sum(row[1] for row in by_file)
    print('CPU seconds of the tests: {:.0f} ({:.1f} min) in {} files'.format(
        total, total / 60, len(by_file)))
    for title, table in (('test file', by_file), ('fixture (scope)', by_fixture)):
        print('\n{:<72} {:>8} {:>8} {:>6}'.format(title, 'CPU s', 'wall s', 'count'))
        for key, cpu, wall, count in table[:rows]:
            print('{:<72} {:8.1f} {:8.1f} {:6d}'.format(key, cpu, wall, count))


if __name__ == '__main__':
    main(sys.argv[1:])
