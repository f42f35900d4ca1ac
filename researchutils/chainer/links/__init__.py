"""researchutils.chainer.links."""

__all__ = []
