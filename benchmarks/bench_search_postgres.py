"""Hyper-parameter search with its study on a PostgreSQL server: one worker process against two.

The measurement of part 2 of ``bench_search.py`` (issue 20), with the study on a real
PostgreSQL server (issue 27) instead of the SQLite file: wall time to ``n_trials``
finished trials of one study, one worker process against two started together, each a
fresh interpreter running ``python -m tests.chainer.training.search_tasks`` (10 epochs a
trial, no pruning) with the server's URL as its storage. The server is Debian's PostgreSQL,
started here by ``tests/support/postgres_server.py`` on a private port (as root, under the
``postgres`` account); each run gets a fresh database, as each run of ``bench_search.py`` gets
a fresh folder. The SQLite runs of ``bench_search.py`` are repeated side by side, in the same
alternating rounds, so that both storages' figures come from the same machine load: the
ratios printed are two / one process for each storage (target <= 0.6x on 2 cores) and
PostgreSQL / SQLite for each count. The load average is printed before and after: the
machine is shared.

Usage: ``python benchmarks/bench_search_postgres.py [--quick] [--no-sqlite]``. Without
PostgreSQL's programs or its Python driver it says so and does nothing.
"""
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_search import workers  # noqa: E402 (this folder: the same workers, storage aside)

from tests.support import postgres_server  # noqa: E402


def load():
    return '{:.1f}'.format(os.getloadavg()[0])


def one_run(server, count, n_trials, storage_kind):
    folder = tempfile.mkdtemp()
    try:
        storage = 'default' if storage_kind == 'SQLite' else server.url(
            server.create_database())
        return workers(folder, count, n_trials, storage)
    finally:
        shutil.rmtree(folder)


def bench(rounds, n_trials, kinds):
    folder = tempfile.mkdtemp()
    try:
        with postgres_server.PostgresServer(folder) as server:
            times = {(kind, count): [] for kind in kinds for count in (1, 2)}
            before = load()
            for _ in range(rounds):
                for kind in kinds:
                    for count in (1, 2):
                        times[kind, count].append(one_run(server, count, n_trials, kind))
            after = load()
    finally:
        shutil.rmtree(folder)
    print('Wall time to n_trials={} on one study, {} alternating rounds (load average {} -> {}):'
          .format(n_trials, rounds, before, after))
    medians = {key: statistics.median(values) for key, values in times.items()}
    for kind in kinds:
        print('  {:10s} one process: {}  two processes: {}  median two / one: {:.3f}x  '
              '(target <= 0.6)'.format(
                  kind, ['{:.1f} s'.format(t) for t in times[kind, 1]],
                  ['{:.1f} s'.format(t) for t in times[kind, 2]],
                  medians[kind, 2] / medians[kind, 1]))
    if 'SQLite' in kinds:
        print('  PostgreSQL / SQLite, median: one process {:.3f}x, two processes {:.3f}x'.format(
            medians['PostgreSQL', 1] / medians['SQLite', 1],
            medians['PostgreSQL', 2] / medians['SQLite', 2]))


def missing():
    reason = postgres_server.missing()
    if reason:
        return reason
    try:
        from researchutils._storage_drivers import check_storage_driver
        check_storage_driver('postgresql://')
    except ImportError as error:
        return str(error)
    return None


def main(argv):
    reason = missing()
    if reason:
        print('bench_search_postgres: not run: {}'.format(reason))
        return
    quick = '--quick' in argv
    kinds = ['PostgreSQL'] if '--no-sqlite' in argv else ['PostgreSQL', 'SQLite']
    bench(1 if quick else 3, 8 if quick else 12, kinds)


if __name__ == '__main__':
    main(sys.argv[1:])
