"""researchutils.chainer.models: Delira-style networks and data-parallel training.

Each name is loaded on first use: the ChainerMN helpers, for instance, do not load the
data-parallel network.
"""
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.models.abstract_network import (
        AbstractChainerNetwork as AbstractChainerNetwork,
    )
    from researchutils.chainer.models.data_parallel import (
        DataParallelChainerNetwork as DataParallelChainerNetwork,
    )
    from researchutils.chainer.models.data_parallel_optimizer import (
        DataParallelChainerOptimizer as DataParallelChainerOptimizer,
    )
    from researchutils.chainer.models.data_parallel_optimizer import (
        ParallelOptimizerCumulateGradientsHook as ParallelOptimizerCumulateGradientsHook,
    )
    from researchutils.chainer.models.data_parallel_optimizer import (
        ParallelOptimizerUpdateModelParameters as ParallelOptimizerUpdateModelParameters,
    )
    from researchutils.chainer.models.multi_node import create_communicator as create_communicator
    from researchutils.chainer.models.multi_node import mean_across_ranks as mean_across_ranks
    from researchutils.chainer.models.multi_node import (
        setup_multi_node_optimizer as setup_multi_node_optimizer,
    )
