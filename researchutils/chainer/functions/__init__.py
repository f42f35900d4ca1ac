"""researchutils.chainer.functions."""

__all__ = []
