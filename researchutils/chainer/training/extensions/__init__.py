"""researchutils.chainer.training.extensions."""

__all__ = []
