"""Angles and normalization on NumPy arrays (NumPy only).

The modules keep the original researchutils' paths:
``from researchutils.math.angle import fit_angle_in_rad_range`` and
``from researchutils.math.normalization import standardize``.
"""
from researchutils.math import angle, normalization

__all__ = ['angle', 'normalization']
