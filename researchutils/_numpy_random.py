"""Seeded NumPy randomness, and the process's global random states (private).

:func:`seeded_permutation` is the one rule for a seeded epoch order.
:func:`seeded_numpy_random` gives per-call NumPy random states for ``decor_fun``
and ``transforms``. :func:`get_global_random_states` and
:func:`set_global_random_states` save and restore NumPy's legacy global state
and Python's :mod:`random` state whole, cached Gaussians included, as arrays
under stable keys (PreemptionSnapshot keeps them in a snapshot).

``numpy.random.rand`` and its siblings are bound methods of one process-wide
``RandomState``, so two threads that each seed it would interleave their draws.
:func:`seeded_numpy_random` therefore makes the legacy functions of
:mod:`numpy.random` look up a state private to the calling thread while it is
active, and fall through to the global state everywhere else. The indirection is
installed once per process, the first time a seeded iterator makes an example.
"""
from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy
from numpy.typing import NDArray

_local = threading.local()
_install_lock = threading.Lock()
_installed = False
# Module functions of numpy.random that are not bound methods of the global
# state but act on it.
_MODULE_FUNCTIONS = {'seed': 'seed', 'ranf': 'random_sample', 'sample': 'random_sample'}
_MT19937_WORDS = 624


class _ThreadLocalDispatch(object):
    """Stands in for one legacy ``numpy.random`` function."""

    __slots__ = ('_name', '_method_name', '_original')

    def __init__(self, name: str, method_name: str, original: Callable[..., Any]) -> None:
        self._name = name
        self._method_name = method_name
        self._original = original

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = getattr(_local, 'state', None)
        if state is None:
            return self._original(*args, **kwargs)
        return getattr(state, self._method_name)(*args, **kwargs)

    @property
    def __self__(self) -> numpy.random.RandomState:
        # Chainer's ShuffleOrderSampler reads numpy.random.random.__self__ to
        # find the global state.
        return numpy.random.mtrand._rand

    # Read-only where object's __doc__ is writable, which mypy flags; nothing sets the
    # __doc__ of a stand-in, and reading it gives a str or None as for any object.
    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self._original.__doc__

    def __reduce__(self) -> tuple[Callable[[str], Any], tuple[str]]:
        # By name, so a pickled function is whatever numpy.random holds where it is loaded.
        return _numpy_random_function, (self._name,)

    def __repr__(self) -> str:
        return '<thread-dispatching numpy.random.{}>'.format(self._name)


def _numpy_random_function(name: str) -> Any:
    return getattr(numpy.random, name)


def _install() -> None:
    global _installed
    with _install_lock:
        if _installed:
            return
        global_state = numpy.random.mtrand._rand
        for name in dir(numpy.random):
            original = getattr(numpy.random, name)
            if getattr(original, '__self__', None) is global_state:
                method_name = name
            elif name in _MODULE_FUNCTIONS:
                method_name = _MODULE_FUNCTIONS[name]
            else:
                continue
            setattr(numpy.random, name, _ThreadLocalDispatch(name, method_name, original))
        _installed = True


def seeded_permutation(seed: int, epoch: int, size: int) -> NDArray[numpy.int_]:
    """The order of ``epoch`` under ``seed``: ``RandomState([seed, epoch]).permutation(size)``.

    Args:
        seed (int): In ``[0, 2**32)``.
        epoch (int): The epoch, 0-based.
        size (int): How many positions to permute.

    Returns:
        numpy.ndarray: A permutation of ``range(size)``.
    """
    return numpy.random.RandomState([seed, epoch]).permutation(size)


@contextlib.contextmanager
def seeded_numpy_random(key: Sequence[int]) -> Iterator[None]:
    """Within the block, this thread's ``numpy.random`` draws follow ``RandomState(key)``.

    Args:
        key (list of int): Seed material, each in ``[0, 2**32)``.
    """
    if not _installed:
        _install()
    state = getattr(_local, 'spare', None)
    if state is None:
        state = numpy.random.RandomState()
    else:
        _local.spare = None
    state.seed(key)
    previous = getattr(_local, 'state', None)
    _local.state = state
    try:
        yield
    finally:
        _local.state = previous
        _local.spare = state


def get_global_random_states() -> dict[str, NDArray[Any]]:
    """NumPy's and Python's global random states, as arrays under stable keys.

    Each generator's whole state: NumPy's ``RandomState`` keeps the second of
    the two normals a draw makes (``has_gauss``, ``cached_gaussian``), and
    Python's :mod:`random` keeps ``gauss_next`` for :func:`random.gauss`; both
    are saved, so the first Gaussian after a restore is the one that would
    have come.

    Returns:
        dict of str to numpy.ndarray: What :func:`set_global_random_states` takes.
    """
    name, keys, position, has_gauss, cached_gaussian = numpy.random.get_state()
    if name != 'MT19937':  # pragma: no cover - the legacy global state is always MT19937
        raise RuntimeError('numpy.random holds a {} state; only MT19937 is saved'.format(name))
    version, words, gauss_next = random.getstate()
    return {
        'numpy_random/keys': numpy.asarray(keys, dtype=numpy.uint32),
        'numpy_random/pos': numpy.asarray(position, dtype=numpy.int64),
        'numpy_random/has_gauss': numpy.asarray(has_gauss, dtype=numpy.int64),
        'numpy_random/cached_gaussian': numpy.asarray(cached_gaussian, dtype=numpy.float64),
        'python_random/version': numpy.asarray(version, dtype=numpy.int64),
        # 624 words of 32 bits and the position, at most 624.
        'python_random/state': numpy.asarray(words, dtype=numpy.uint64),
        'python_random/has_gauss_next': numpy.asarray(gauss_next is not None),
        'python_random/gauss_next': numpy.asarray(
            0. if gauss_next is None else gauss_next, dtype=numpy.float64),
    }


def empty_global_random_states() -> dict[str, NDArray[Any]]:
    """Arrays of the shapes and dtypes :func:`get_global_random_states` gives, all zero
    (for a deserializer to fill)."""
    return {
        'numpy_random/keys': numpy.zeros(_MT19937_WORDS, dtype=numpy.uint32),
        'numpy_random/pos': numpy.zeros((), dtype=numpy.int64),
        'numpy_random/has_gauss': numpy.zeros((), dtype=numpy.int64),
        'numpy_random/cached_gaussian': numpy.zeros((), dtype=numpy.float64),
        'python_random/version': numpy.zeros((), dtype=numpy.int64),
        'python_random/state': numpy.zeros(_MT19937_WORDS + 1, dtype=numpy.uint64),
        'python_random/has_gauss_next': numpy.zeros((), dtype=bool),
        'python_random/gauss_next': numpy.zeros((), dtype=numpy.float64),
    }


def set_global_random_states(states: Mapping[str, NDArray[Any]]) -> None:
    """Sets NumPy's and Python's global random states to ``states`` (see
    :func:`get_global_random_states`)."""
    numpy.random.set_state((
        'MT19937', states['numpy_random/keys'], int(states['numpy_random/pos']),
        int(states['numpy_random/has_gauss']), float(states['numpy_random/cached_gaussian'])))
    gauss_next = (float(states['python_random/gauss_next'])
                  if bool(states['python_random/has_gauss_next']) else None)
    random.setstate((int(states['python_random/version']),
                     tuple(int(word) for word in states['python_random/state']), gauss_next))
