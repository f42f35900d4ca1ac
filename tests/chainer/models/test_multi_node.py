"""Tests of the ChainerMN helpers; those marked ``mpi`` run under ``mpiexec -n 2``.

Every MPI test does all its communication before it asserts, and asserts on values that
every rank received alike, so the ranks pass or fail together and never wait on a rank
that left; each has a thread timeout, which ends the process and so the whole MPI job.
"""
import importlib.util
import os
import subprocess
import sys

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest
from chainer.dataset import concat_examples

from researchutils.chainer.iterators import DecorableSerialIterator
from researchutils.chainer.models import AbstractChainerNetwork, multi_node

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
OPTIMIZERS = {
    'MomentumSGD': lambda: chainer.optimizers.MomentumSGD(lr=0.1),
    'Adam': lambda: chainer.optimizers.Adam(alpha=0.01),
}
MPI_TIMEOUT = pytest.mark.timeout(60, method='thread')


class MLP(AbstractChainerNetwork):
    def __init__(self, seed=0):
        super().__init__(seed=seed)
        rng = np.random.RandomState(seed)
        with self.init_scope():
            self.l1 = L.Linear(3, 5, initialW=rng.randn(5, 3).astype(np.float32))
            self.l2 = L.Linear(5, 2, initialW=rng.randn(2, 5).astype(np.float32))

    def forward(self, x):
        return {'pred': self.l2(F.tanh(self.l1(x)))}


def _dataset(samples=48, seed=0):
    rng = np.random.RandomState(seed)
    return chainer.datasets.TupleDataset(rng.randn(samples, 3).astype(np.float32),
                                         rng.randint(0, 2, size=samples).astype(np.int32))


def _as_batch(examples):
    x, labels = concat_examples(examples)
    return AbstractChainerNetwork.prepare_batch({'data': x, 'label': labels},
                                                '@numpy', '@numpy')


def _step(network, batch, optimizer):
    AbstractChainerNetwork.closure(network, batch, {'default': optimizer},
                                   losses={'ce': F.softmax_cross_entropy})


def _flat(network):
    return {name: param.array.copy() for name, param in network.namedparams()}


def _assert_flat_equal(actual, expected, rtol=1e-5, atol=1e-6):
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol,
                                   err_msg=name)


def test_importing_the_module_imports_neither_mpi4py_nor_chainermn():
    env = {key: value for key, value in os.environ.items() if not key.startswith(('OMPI', 'PMI'))}
    code = ('import sys, researchutils.chainer.models.multi_node; '
            'print(sorted({"mpi4py", "chainermn"} & set(sys.modules)))')
    output = subprocess.run([sys.executable, '-c', code], env=env, cwd=ROOT, timeout=60,
                            check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert output.strip().splitlines()[-1] == '[]'


@pytest.mark.parametrize('missing', ['mpi4py', 'chainermn'])
def test_a_missing_mpi_dependency_raises_import_error_naming_the_extra(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ImportError, match=r'pip install researchutils\[mpi\]'):
        multi_node.create_communicator('naive')


def test_create_communicator_rejects_a_non_string_name():
    with pytest.raises(TypeError, match='communicator_name'):
        multi_node.create_communicator(3)


def test_setup_multi_node_optimizer_rejects_what_is_not_an_optimizer():
    with pytest.raises(TypeError, match='optimizer'):
        multi_node.setup_multi_node_optimizer(MLP(), MLP(), communicator=None)


def test_setup_multi_node_optimizer_rejects_what_is_not_a_link():
    with pytest.raises(TypeError, match='network'):
        multi_node.setup_multi_node_optimizer(chainer.optimizers.SGD(), 'net', None)


def test_setup_multi_node_optimizer_rejects_an_optimizer_set_up_on_another_link():
    optimizer = chainer.optimizers.SGD().setup(MLP())
    with pytest.raises(ValueError, match='another link'):
        multi_node.setup_multi_node_optimizer(optimizer, MLP(), communicator=None)


def test_mean_across_ranks_rejects_what_is_not_a_dict():
    with pytest.raises(TypeError, match='values'):
        multi_node.mean_across_ranks([1.0], communicator=None)


@pytest.mark.mpi
@MPI_TIMEOUT
@pytest.mark.parametrize('optimizer_name', sorted(OPTIMIZERS))
def test_every_rank_ends_equal_to_one_process_training_on_the_union_of_batches(
        optimizer_name):
    import chainermn
    communicator = multi_node.create_communicator('naive')
    local = chainermn.scatter_dataset(_dataset(), communicator, shuffle=True, seed=3)
    iterator = DecorableSerialIterator(local, 4, shuffle=True, seed=communicator.rank)
    network = MLP(seed=communicator.rank)  # ranks start apart; rank 0's values are broadcast
    optimizer = multi_node.setup_multi_node_optimizer(OPTIMIZERS[optimizer_name](), network,
                                                      communicator)
    batches = [_as_batch(iterator.next()) for _ in range(5)]
    for batch in batches:
        _step(network, batch, optimizer)
    every_rank_params = communicator.mpi_comm.allgather(_flat(network))
    every_rank_batches = communicator.mpi_comm.allgather(batches)
    assert len(every_rank_params) == 2

    reference = MLP(seed=0)
    reference_optimizer = OPTIMIZERS[optimizer_name]().setup(reference)
    for step in range(len(batches)):
        _step(reference, {key: np.concatenate([rank_batches[step][key]
                                               for rank_batches in every_rank_batches])
                          for key in ('data', 'label')}, reference_optimizer)
    for params in every_rank_params:
        _assert_flat_equal(params, _flat(reference))


@pytest.mark.mpi
@MPI_TIMEOUT
def test_scatter_dataset_gives_each_rank_a_disjoint_share_of_the_rows():
    import chainermn
    communicator = multi_node.create_communicator('naive')
    local = chainermn.scatter_dataset(_dataset(), communicator, shuffle=True, seed=3)
    iterator = DecorableSerialIterator(local, len(local), repeat=False, shuffle=False)
    rows = [tuple(row) for row in _as_batch(iterator.next())['data'].tolist()]
    every_rank_rows = communicator.mpi_comm.allgather(rows)
    union = sorted(row for rank_rows in every_rank_rows for row in rank_rows)
    assert union == sorted(tuple(row) for row in _dataset()._datasets[0].tolist())


@pytest.mark.mpi
@MPI_TIMEOUT
def test_chainermn_optimizer_alone_spends_its_first_update_on_a_broadcast():
    import chainermn
    communicator = multi_node.create_communicator('naive')
    network = MLP(seed=communicator.rank)
    optimizer = chainermn.create_multi_node_optimizer(OPTIMIZERS['Adam'](), communicator)
    optimizer.setup(network)
    _step(network, _as_batch(list(_dataset(4))), optimizer)
    every_rank_params = communicator.mpi_comm.allgather(_flat(network))
    for params in every_rank_params:
        _assert_flat_equal(params, _flat(MLP(seed=0)), rtol=0, atol=0)


@pytest.mark.mpi
@MPI_TIMEOUT
def test_mean_across_ranks_averages_every_value():
    communicator = multi_node.create_communicator('naive')
    means = multi_node.mean_across_ranks(
        {'loss': float(communicator.rank), 'accuracy': 2.0 * communicator.rank}, communicator)
    every_rank_means = communicator.mpi_comm.allgather(means)
    assert every_rank_means == [{'accuracy': 1.0, 'loss': 0.5}] * 2


@pytest.mark.mpi
@MPI_TIMEOUT
def test_mean_across_ranks_rejects_keys_that_differ_between_ranks():
    communicator = multi_node.create_communicator('naive')
    with pytest.raises(ValueError, match='same keys'):
        multi_node.mean_across_ranks({'rank{}'.format(communicator.rank): 1.0}, communicator)


@pytest.mark.mpi
@MPI_TIMEOUT
def test_chainermn_example_trains_to_the_same_report_on_every_rank():
    spec = importlib.util.spec_from_file_location(
        'chainermn_example', os.path.join(ROOT, 'examples', 'chainermn', 'train.py'))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    report = example.main(['--epochs', '2', '--samples', '256'])
    communicator = multi_node.create_communicator('naive')
    every_rank_reports = communicator.mpi_comm.allgather(report)
    assert every_rank_reports[0] == every_rank_reports[1]
    assert report['accuracy'] > 0.85
