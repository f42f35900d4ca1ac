"""Fixtures of the training tests.

``comm``: one ChainerMN ``naive`` communicator per module (the ``mpi`` tests, run under
``mpiexec -n 2`` by ``make test-mpi``); ``shared_path``: rank 0's ``tmp_path``, the same
folder on every rank; ``nodes``: two hosts for search workers
(``tests/support/search_nodes.py``); every study storage a test opened through
``tests/support/search_studies.py`` is closed when it ends (autouse).
"""
import pytest

from tests.support.search_nodes import nodes  # noqa: F401 (fixture)
from tests.support.search_studies import close_studies  # noqa: F401 (autouse fixture)


@pytest.fixture(scope='module')
def comm():
    import chainermn
    return chainermn.create_communicator('naive')


@pytest.fixture
def shared_path(comm, tmp_path):
    return comm.mpi_comm.bcast(str(tmp_path) if comm.rank == 0 else None, root=0)
