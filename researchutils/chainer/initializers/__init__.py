"""Initializers, usable wherever Chainer takes one (``initialW``, ``initial_bias``).

Example:
    >>> from researchutils.chainer.initializers import NormalWithLoc
"""
from researchutils.chainer.initializers.normal_with_loc import NormalWithLoc  # noqa: F401

__all__ = ['NormalWithLoc']
