"""Datasets, samplers and data managers for the unified training API (loaded on first use)."""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'abstract_dataset': ['AbstractDataset'],
    'abstract_sampler': ['AbstractSampler'],
    'data_manager': ['BaseDataManager', 'DataManager'],
    'random_sampler': ['RandomSampler'],
    'sequential_sampler': ['SequentialSampler'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.data_loading.abstract_dataset import (
        AbstractDataset as AbstractDataset,
    )
    from researchutils.chainer.data_loading.abstract_sampler import (
        AbstractSampler as AbstractSampler,
    )
    from researchutils.chainer.data_loading.data_manager import BaseDataManager as BaseDataManager
    from researchutils.chainer.data_loading.data_manager import DataManager as DataManager
    from researchutils.chainer.data_loading.random_sampler import RandomSampler as RandomSampler
    from researchutils.chainer.data_loading.sequential_sampler import (
        SequentialSampler as SequentialSampler,
    )
