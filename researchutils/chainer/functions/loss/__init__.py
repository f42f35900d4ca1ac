"""researchutils.chainer.functions.loss."""

__all__ = []
