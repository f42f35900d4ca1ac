"""The environment a search worker (tests/support/search_worker.py) starts with."""
from tests.support import search_nodes


def test_a_worker_keeps_the_blas_settings_and_nothing_else_of_this_process(
        tmp_path, monkeypatch):
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'Haswell')
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    monkeypatch.setenv('RESEARCHUTILS_TEST_SECRET', 'not for workers')
    env = search_nodes.node_env(tmp_path)
    # The same BLAS kernels and threads as here: numbers compared bit for bit agree.
    assert env['OPENBLAS_CORETYPE'] == 'Haswell' and env['OMP_NUM_THREADS'] == '1'
    assert 'RESEARCHUTILS_TEST_SECRET' not in env
    assert env['HOME'] == str(tmp_path) and env['PYTHONPATH'] == search_nodes.REPO
