"""researchutils.chainer.models: Delira-style networks and data-parallel training."""
from researchutils.chainer.models.abstract_network import AbstractChainerNetwork
from researchutils.chainer.models.data_parallel import (
    DataParallelChainerNetwork,
    DataParallelChainerOptimizer,
    ParallelOptimizerCumulateGradientsHook,
    ParallelOptimizerUpdateModelParameters,
)
from researchutils.chainer.models.multi_node import (
    create_communicator,
    mean_across_ranks,
    setup_multi_node_optimizer,
)

__all__ = [
    'AbstractChainerNetwork',
    'DataParallelChainerNetwork',
    'DataParallelChainerOptimizer',
    'ParallelOptimizerCumulateGradientsHook',
    'ParallelOptimizerUpdateModelParameters',
    'create_communicator',
    'mean_across_ranks',
    'setup_multi_node_optimizer',
]
