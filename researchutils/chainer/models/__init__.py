"""researchutils.chainer.models: Delira-style networks and data-parallel training.

Each name is loaded on first use: the ChainerMN helpers, for instance, do not load the
data-parallel network.
"""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'abstract_network': ['AbstractChainerNetwork'],
    'data_parallel': ['DataParallelChainerNetwork'],
    'data_parallel_optimizer': ['DataParallelChainerOptimizer',
                                'ParallelOptimizerCumulateGradientsHook',
                                'ParallelOptimizerUpdateModelParameters'],
    'multi_node': ['create_communicator', 'mean_across_ranks', 'setup_multi_node_optimizer'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
