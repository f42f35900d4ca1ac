"""Test-wide markers: ``gpu`` tests skip without CUDA, ``mpi`` tests outside mpiexec."""
import os

import pytest


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
    for item in items:
        if 'gpu' in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)
        if 'mpi' in item.keywords and not under_mpi:
            item.add_marker(skip_mpi)
