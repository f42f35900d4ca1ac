"""Test-wide markers (``gpu`` tests skip without CUDA, ``mpi`` tests outside mpiexec) and the
session-wide fixtures of tests/support."""
import os

import pytest

# Session-wide fixtures that tests of several folders share (one PostgreSQL server and one
# bridge for the namespace hosts a session): they must be known here, at the top.
from tests.support.netns_hosts import host_network, network_hosts  # noqa: F401 (fixtures)
from tests.support.postgres_server import postgres_database, postgres_server  # noqa: F401

# Tests never open windows, whatever the machine: matplotlib draws with Agg. Tests of the
# display path select tests/support/recording_backend.py in a subprocess of their own.
os.environ['MPLBACKEND'] = 'Agg'


def _cuda_available():
    try:
        import chainer.backends.cuda as cuda
    except Exception:  # pragma: no cover - chainer import problems show elsewhere
        return False
    return bool(cuda.available)


def _under_mpi():
    return any(key in os.environ for key in ('OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK'))


def pytest_collection_modifyitems(config, items):
    has_cuda = _cuda_available()
    under_mpi = _under_mpi()
    skip_gpu = pytest.mark.skip(reason='needs CUDA and cupy')
    skip_mpi = pytest.mark.skip(reason='needs mpiexec -n 2 (run `make test-mpi`)')
    # By marker, not keyword: pytest counts the names of the folders above a test as its
    # keywords, so a checkout in a folder named `gpu` would skip every test.
    for item in items:
        if item.get_closest_marker('gpu') and not has_cuda:
            item.add_marker(skip_gpu)
        if item.get_closest_marker('mpi') and not under_mpi:
            item.add_marker(skip_mpi)


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
