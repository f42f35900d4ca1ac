"""Datasets, samplers and data managers for the unified training API (loaded on first use)."""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'abstract_dataset': ['AbstractDataset'],
    'abstract_sampler': ['AbstractSampler'],
    'data_manager': ['BaseDataManager', 'DataManager'],
    'random_sampler': ['RandomSampler'],
    'sequential_sampler': ['SequentialSampler'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
