"""researchutils.chainer.data_loading."""

__all__ = []
