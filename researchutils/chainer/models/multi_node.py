"""Train an AbstractChainerNetwork on several processes or machines with ChainerMN.

ChainerMN ships with Chainer 7 and runs one process per device over MPI: each process (rank)
trains the same network on its own share of the data, and the optimizer averages the gradients
over all ranks before each update. The network and its closure stay as they are; three things
change in the script:

1. ``communicator = create_communicator('naive')`` (``'pure_nccl'`` on GPUs);
2. the dataset is split with ``chainermn.scatter_dataset(dataset, communicator)``, and each rank
   iterates over its share;
3. ``optimizer = setup_multi_node_optimizer(optimizer, network, communicator)``.

With equally sized local batches and losses that average over the batch, every rank then ends
each step with the parameters a single process would have after training on the union of the
ranks' batches. Metrics returned by the closure are each rank's own; average them with
:func:`mean_across_ranks`. Run the script with ``mpiexec -n 2 python train.py``.

Do not combine ChainerMN with :class:`DataParallelChainerOptimizer` in one process: ChainerMN
would average the master's gradients before the replicas' are added. Use one process per
device instead.

This module imports mpi4py and ChainerMN only when a function is called, and raises an
ImportError naming ``pip install researchutils[mpi]`` when they are missing.
"""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

import chainer
import numpy as np

if TYPE_CHECKING:
    import chainermn
    import mpi4py.MPI

_MISSING = ('ChainerMN needs mpi4py and an MPI library: install them with '
            '`pip install researchutils[mpi]` (and, on Debian, `apt-get install openmpi-bin '
            'libopenmpi-dev`)')


def _import_chainermn() -> ModuleType:
    """Import and return ChainerMN, with mpi4py, or raise an ImportError naming the extra."""
    try:
        import chainermn
        import mpi4py  # noqa: F401 - ChainerMN imports it only later, on first use
    except ImportError as error:
        raise ImportError('{} ({})'.format(_MISSING, error)) from error
    return chainermn


def create_communicator(communicator_name: str = 'naive', mpi_comm: mpi4py.MPI.Comm | None = None,
                        **kwargs: Any) -> chainermn.CommunicatorBase:
    """Create a ChainerMN communicator over all processes started by ``mpiexec``.

    Args:
        communicator_name (str): ChainerMN's communicator: ``'naive'`` works on CPUs,
            ``'pure_nccl'`` is the fast one for GPUs.
        mpi_comm: An mpi4py communicator; ``MPI.COMM_WORLD`` by default.
        **kwargs: Passed to :func:`chainermn.create_communicator`.

    Returns:
        The communicator, with ``rank``, ``size`` and ``mpi_comm``.

    Raises:
        ImportError: If mpi4py or ChainerMN is missing.

    Example:
        >>> communicator = create_communicator('naive')  # doctest: +SKIP
        >>> communicator.rank, communicator.size  # under `mpiexec -n 2`  # doctest: +SKIP
        (0, 2)
    """
    if not isinstance(communicator_name, str):
        raise TypeError('communicator_name must be a str, got {!r}'.format(communicator_name))
    chainermn = _import_chainermn()
    return chainermn.create_communicator(communicator_name, mpi_comm=mpi_comm, **kwargs)


def setup_multi_node_optimizer(optimizer: chainer.Optimizer, network: chainer.Link,
                               communicator: chainermn.CommunicatorBase) -> chainer.Optimizer:
    """Wrap ``optimizer`` for ChainerMN, set it up on ``network`` and align all ranks.

    Wraps with :func:`chainermn.create_multi_node_optimizer`, whose ``update()`` averages the
    gradients over the ranks before updating, so :meth:`AbstractChainerNetwork.closure` trains
    with it unchanged. Then rank 0's parameters are broadcast to every rank. ChainerMN's
    optimizer would otherwise spend its first ``update()`` on that broadcast without training;
    here the first update already trains. (A network with parameters that are initialized on
    the first forward pass keeps ChainerMN's behaviour: its first update only broadcasts.)

    Args:
        optimizer (chainer.Optimizer): A plain optimizer, not yet set up or set up on
            ``network`` (as an ``optim_builder`` of ChainerExperiment returns it).
        network (chainer.Link): The network, built on every rank.
        communicator: A ChainerMN communicator (see :func:`create_communicator`).

    Returns:
        The multi-node optimizer, set up; pass it as ``{"default": optimizer}`` to the closure.

    Example:
        >>> communicator = create_communicator('naive')  # doctest: +SKIP
        >>> optimizer = setup_multi_node_optimizer(  # doctest: +SKIP
        ...     chainer.optimizers.Adam(), network, communicator)
        >>> AbstractChainerNetwork.closure(  # doctest: +SKIP
        ...     network, batch, {'default': optimizer}, losses={'ce': F.softmax_cross_entropy})
    """
    if not isinstance(optimizer, chainer.Optimizer):
        raise TypeError('optimizer must be a chainer.Optimizer, got {!r}'.format(
            type(optimizer).__name__))
    if not isinstance(network, chainer.Link):
        raise TypeError('network must be a chainer.Link, got {!r}'.format(
            type(network).__name__))
    if optimizer.target is not None and optimizer.target is not network:
        raise ValueError('optimizer is set up on another link ({}), not on network ({})'.format(
            type(optimizer.target).__name__, type(network).__name__))
    chainermn = _import_chainermn()
    multi_node_optimizer = chainermn.create_multi_node_optimizer(optimizer, communicator)
    if optimizer.target is None:
        # One set up already keeps its update rules: a second setup would reset them.
        multi_node_optimizer.setup(network)
    if all(param.array is not None for param in network.params()):
        communicator.bcast_data(network)
        # Records the parameter set, so the next update() averages and updates at once.
        multi_node_optimizer.is_changed(network)
    return multi_node_optimizer


def mean_across_ranks(values: dict[str, float], communicator: chainermn.CommunicatorBase
                      ) -> dict[str, float]:
    """Average a dict of floats (a closure's losses or metrics) over all ranks.

    Every rank must pass the same keys; every rank receives the same result.

    Args:
        values (dict): Name to float, this rank's values.
        communicator: A ChainerMN communicator.

    Returns:
        dict: Name to the mean over ranks, as a float.

    Example:
        >>> metric_vals, loss_vals, _ = AbstractChainerNetwork.closure(  # doctest: +SKIP
        ...     network, batch, None, metrics={'acc': F.accuracy})
        >>> mean_across_ranks(metric_vals, communicator)  # doctest: +SKIP
        {'acc': 0.75}
    """
    if not isinstance(values, dict):
        raise TypeError('values must be a dict of floats, got {!r}'.format(
            type(values).__name__))
    names = sorted(values)
    all_names = communicator.mpi_comm.allgather(names)
    if any(other != names for other in all_names):
        raise ValueError('values must have the same keys on every rank, got {!r}'.format(
            all_names))
    totals = communicator.mpi_comm.allreduce(
        np.array([float(values[name]) for name in names], dtype=np.float64))
    return {name: float(total) / communicator.size for name, total in zip(names, totals)}
