"""researchutils.chainer.models."""

__all__ = []
