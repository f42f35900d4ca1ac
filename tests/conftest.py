"""Test-wide markers (``gpu`` tests skip without CUDA, ``mpi`` tests outside mpiexec), the
session-wide fixtures of tests/support, and what running on several pytest-xdist workers
needs (``make test`` runs each stack's suite on two workers a core, docs/testing.rst):

* tests that share a module- or session-scoped fixture of the suite run on one worker
  (an ``xdist_group`` per fixture), so that fixture is made once, not once a worker;
* each process does its BLAS on one thread, so two workers on two cores do not each start
  a pool of threads for every core;
* the tests of the files tests/support/stacks.py names as system tests are marked
  ``system`` (make test runs them on the newest stack only);
* the tests marked ``slow`` are handed out first, so a long one does not start last and
  keep one worker busy while the other has nothing left to do;
* at the end, the tests that took over SLOW_SECONDS without the ``slow`` mark are named;
* nothing the run starts outlives it (tests/support/leftovers.py): the pytest process that
  leads the run tags every process started from it, ends them when it is stopped by SIGTERM
  or SIGHUP (under pytest-xdist, where it runs no test itself) and at its end, and ends at
  its start what killed runs left behind.
"""
import os

import pytest

from tests.support import leftovers, run_record, stacks

# Session-wide fixtures that tests of several folders share (one PostgreSQL server, one MLflow
# server and one bridge for the namespace hosts a session, researchutils' wheel for the
# install and typing tests): they must be known here, at the top.
from tests.support.mlflow_server import mlflow_server  # noqa: F401 (fixture)
from tests.support.netns_hosts import host_network, network_hosts  # noqa: F401 (fixtures)
from tests.support.postgres_server import postgres_database, postgres_server  # noqa: F401
from tests.support.wheel import researchutils_wheel  # noqa: F401

# Before NumPy loads (the modules above import none), here and in the subprocesses tests
# start: the suite's arrays are tiny, and a BLAS thread pool in every process would only
# compete for the same cores.
for _variable in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_variable, '1')

# Tests never open windows, whatever the machine: matplotlib draws with Agg. Tests of the
# display path select tests/support/recording_backend.py in a subprocess of their own.
os.environ['MPLBACKEND'] = 'Agg'

# A test that takes longer than this (setup, call and teardown, on an idle machine) does
# less, or is marked slow with its reason (docs/testing.rst).
SLOW_SECONDS = 10.


def _is_xdist_worker(config):
    # By the config xdist gives its workers, not by PYTEST_XDIST_WORKER: a pytest run that a
    # test on a worker starts inherits that variable, and is a run of its own.
    return hasattr(config, 'workerinput')


def pytest_configure(config):
    # What became of each test, for make test's counts per stack (tests/support/run_record.py).
    run_record.configure(config, _under_mpi())
    if not _is_xdist_worker(config):
        # The leader of the run. Under xdist it runs no test, so no test's signal handler
        # stands in place of its own.
        leftovers.lead_run(handle_signals=bool(getattr(config.option, 'numprocesses', 0)))


def pytest_unconfigure(config):
    if not _is_xdist_worker(config):
        ended = leftovers.close_run()
        if ended:
            print('tests/support/leftovers.py: ended {} process(es) the run left running: '
                  '{}'.format(len(ended), ' '.join(map(str, ended))))


def _cuda_available():
    try:
        import chainer.backends.cuda as cuda
    except Exception:  # pragma: no cover - chainer import problems show elsewhere
        return False
    return bool(cuda.available)


def _under_mpi():
    return any(key in os.environ for key in ('OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK'))


# First: the xdist worker turns xdist_group markers into node ids, and -m deselects, after.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    has_cuda = _cuda_available()
    under_mpi = _under_mpi()
    skip_gpu = pytest.mark.skip(reason='needs CUDA and cupy')
    skip_mpi = pytest.mark.skip(reason='needs mpiexec -n 2 (run `make test-mpi`)')
    # By marker, not keyword: pytest counts the names of the folders above a test as its
    # keywords, so a checkout in a folder named `gpu` would skip every test.
    mpi_files = config.stash.setdefault(MPI_TEST_FILES, set())
    system_files = {}
    for item in items:
        # A system test runs once, on the newest stack (tests/support/stacks.py).
        path = str(item.path)
        if system_files.setdefault(path, stacks.is_system_file(path)):
            item.add_marker(pytest.mark.system)
        if item.get_closest_marker('gpu') and not has_cuda:
            item.add_marker(skip_gpu)
        if item.get_closest_marker('mpi'):
            mpi_files.add(str(item.path))
            if not under_mpi:
                item.add_marker(skip_mpi)
        group = _shared_fixture_group(item)
        if group is not None and not item.get_closest_marker('xdist_group'):
            item.add_marker(pytest.mark.xdist_group(group))
    if 'PYTEST_XDIST_WORKER' in os.environ:
        # Stable, so every worker collects the same order, as xdist requires. Only on
        # workers: they receive a group's tests together, where a run in one process would
        # see a module's tests split and make its module-scoped fixtures twice.
        items.sort(key=lambda item: item.get_closest_marker('slow') is None)


# The files holding an mpi test, as collected (tests/test_conftest.py checks that the
# Makefile's MPI_TESTS finds each of them).
MPI_TEST_FILES = pytest.StashKey()
_TESTS = os.path.dirname(os.path.abspath(__file__))


def _shared_fixture_group(item):
    """The xdist group of a test that uses a module- or session-scoped fixture of the suite
    (tests/), or None: one group per session fixture, one per module otherwise."""
    shared = []
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name)
        if not definitions:
            continue
        fixture = definitions[-1]
        if fixture.scope not in ('module', 'session'):
            continue
        source = os.path.abspath(getattr(fixture.func, '__code__', None) and
                                 fixture.func.__code__.co_filename or '')
        if source.startswith(_TESTS + os.sep):
            shared.append((fixture.scope != 'session', name))
    if not shared:
        return None
    is_module, name = min(shared)
    return item.module.__name__ if is_module else 'session-fixture-' + name


def pytest_terminal_summary(terminalreporter, config):
    """Names the tests that took over SLOW_SECONDS (setup, call and teardown) unmarked."""
    slow = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            # Test reports only: a collection report (a file that failed to import) has a
            # `when` but no keywords.
            if getattr(report, 'when', None) not in ('setup', 'call', 'teardown') \
                    or 'slow' in report.keywords:
                continue
            slow[report.nodeid] = slow.get(report.nodeid, 0.) + report.duration
    over = sorted(((seconds, nodeid) for nodeid, seconds in slow.items()
                   if seconds > SLOW_SECONDS), reverse=True)
    if over:
        terminalreporter.section('tests over {:.0f} s not marked slow'.format(SLOW_SECONDS))
        for seconds, nodeid in over:
            terminalreporter.write_line('{:7.1f} s  {}'.format(seconds, nodeid))


def pytest_collection_finish(session):
    """Under mpiexec, stop unless every rank is about to run the same tests in the same order.

    MPI collectives pair up by order only: ranks running different tests would pair one test's
    communication with another's and fail confusingly or wait forever.
    """
    if not _under_mpi():
        return
    try:
        from mpi4py import MPI
    except ImportError:  # the mpi tests report the missing extra themselves
        return
    node_ids = [item.nodeid for item in session.items]
    every_rank_ids = MPI.COMM_WORLD.allgather(node_ids)
    if any(ids != node_ids for ids in every_rank_ids):
        pytest.exit('MPI ranks collected different tests (or orders): {}'.format(
            [len(ids) for ids in every_rank_ids]), returncode=4)
