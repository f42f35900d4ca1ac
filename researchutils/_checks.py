"""Argument checks shared across packages (standard library only)."""
import numbers


def check_seed(seed):
    """Returns ``seed`` as an int, or None: a seed NumPy's ``RandomState`` takes.

    A bool is refused although it is an ``int``: ``seed=True`` is a mistake, not the seed 1.

    Raises:
        TypeError: ``seed`` is not None or an integer.
        ValueError: ``seed`` is outside ``[0, 2**32)``.
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError('seed must be None or an integer in [0, 2**32), got {!r}'.format(seed))
    if not 0 <= seed < 2 ** 32:
        raise ValueError('seed must be None or an integer in [0, 2**32), got {!r}'.format(seed))
    return int(seed)
