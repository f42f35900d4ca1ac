"""researchutils.chainer.functions.activation."""

__all__ = []
