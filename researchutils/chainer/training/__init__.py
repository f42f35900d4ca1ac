"""researchutils.chainer.training."""

__all__ = []
