"""Initializer drawing from a normal distribution with any mean.

Tests: ``tests/chainer/initializers/test_normal_with_loc.py``.
"""
from __future__ import annotations

from chainer import initializer, initializers
from numpy.typing import DTypeLike

from researchutils._checks import check_float, check_float_dtype
from researchutils._typing import Array


class NormalWithLoc(initializer.Initializer):
    """Fills an array with values drawn from :math:`N(loc, scale^2)`.

    :class:`chainer.initializers.Normal` with a mean other than zero: each element is drawn
    independently from a Gaussian of mean ``loc`` and standard deviation ``scale``. It
    draws from the array's own backend (NumPy's or CuPy's global random state, so
    ``numpy.random.seed`` / ``cupy.random.seed`` make it repeatable) and works wherever
    Chainer takes an initializer (``initialW``, ``initial_bias``,
    :func:`chainer.initializers.generate_array`).

    Args:
        loc (float): Mean of the distribution.
        scale (float): Standard deviation, ``>= 0`` (zero fills with ``loc``).
        dtype: Data type the filled arrays must have (float16, float32 or float64),
            or ``None`` for any float type.

    Raises:
        TypeError: ``loc`` or ``scale`` is not a real number, or ``dtype`` is not a
            floating point dtype (an integer dtype, a name NumPy does not know).
        ValueError: ``loc`` or ``scale`` is not finite, or ``scale`` is negative.

    Example:
        >>> import chainer.links as L
        >>> from researchutils.chainer.initializers import NormalWithLoc
        >>> layer = L.Linear(100, 100, initial_bias=NormalWithLoc(loc=1.0, scale=0.01))
        >>> bool(abs(layer.b.array.mean() - 1.0) < 0.01)
        True
    """

    def __init__(self, loc: float = 0.0, scale: float = 0.05,
                 dtype: DTypeLike | None = None) -> None:
        self.loc = check_float(loc, 'loc')
        self.scale = check_float(scale, 'scale', minimum=0)
        check_float_dtype(dtype, 'dtype', allow_none=True)
        super().__init__(dtype)

    def __call__(self, array: Array) -> None:
        # Chainer's Normal knows each backend's generator (CuPy draws float16 as float32).
        initializers.Normal(self.scale, self.dtype)(array)
        array += array.dtype.type(self.loc)
