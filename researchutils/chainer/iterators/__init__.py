"""researchutils.chainer.iterators."""

__all__ = []
