"""Datasets, samplers and data managers for the unified training API."""
from researchutils.chainer.data_loading.abstract_dataset import AbstractDataset
from researchutils.chainer.data_loading.abstract_sampler import AbstractSampler
from researchutils.chainer.data_loading.data_manager import BaseDataManager, DataManager
from researchutils.chainer.data_loading.random_sampler import RandomSampler
from researchutils.chainer.data_loading.sequential_sampler import SequentialSampler

__all__ = ['AbstractDataset', 'AbstractSampler', 'BaseDataManager', 'DataManager',
           'RandomSampler', 'SequentialSampler']
