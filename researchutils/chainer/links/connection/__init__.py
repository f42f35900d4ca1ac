"""researchutils.chainer.links.connection."""

__all__ = []
