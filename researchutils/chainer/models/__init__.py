"""researchutils.chainer.models: Delira-style networks and data-parallel training."""
from researchutils.chainer.models.abstract_network import AbstractChainerNetwork
from researchutils.chainer.models.data_parallel import (
    DataParallelChainerNetwork,
    DataParallelChainerOptimizer,
    ParallelOptimizerCumulateGradientsHook,
    ParallelOptimizerUpdateModelParameters,
)

__all__ = [
    'AbstractChainerNetwork',
    'DataParallelChainerNetwork',
    'DataParallelChainerOptimizer',
    'ParallelOptimizerCumulateGradientsHook',
    'ParallelOptimizerUpdateModelParameters',
]
