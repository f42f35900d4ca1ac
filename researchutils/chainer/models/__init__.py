"""researchutils.chainer.models: Delira-style networks and data-parallel training."""
from researchutils.chainer.models.abstract_network import AbstractChainerNetwork

__all__ = ['AbstractChainerNetwork']
