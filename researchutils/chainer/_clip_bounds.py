"""The bounds of gradient clipping, checked alike by the functions and the links that clip.

The rule lives in :mod:`researchutils._layer_checks`, shared with the torch twins.
Tests: ``tests/chainer/test_clip_bounds.py``.
"""
from researchutils._layer_checks import check_clip_bounds

__all__ = ['check_clip_bounds']
