"""researchutils.chainer.serializers."""

__all__ = []
