"""Seeded NumPy randomness shared by the iterators and the data managers (private).

:func:`seeded_permutation` is the one rule for a seeded epoch order.
:func:`seeded_numpy_random` gives per-call NumPy random states for ``decor_fun``
and ``transforms``.

``numpy.random.rand`` and its siblings are bound methods of one process-wide
``RandomState``, so two threads that each seed it would interleave their draws.
:func:`seeded_numpy_random` therefore makes the legacy functions of
:mod:`numpy.random` look up a state private to the calling thread while it is
active, and fall through to the global state everywhere else. The indirection is
installed once per process, the first time a seeded iterator makes an example.
"""
import contextlib
import threading

import numpy

_local = threading.local()
_install_lock = threading.Lock()
_installed = False
# Module functions of numpy.random that are not bound methods of the global
# state but act on it.
_MODULE_FUNCTIONS = {'seed': 'seed', 'ranf': 'random_sample', 'sample': 'random_sample'}


class _ThreadLocalDispatch(object):
    """Stands in for one legacy ``numpy.random`` function."""

    __slots__ = ('_name', '_method_name', '_original')

    def __init__(self, name, method_name, original):
        self._name = name
        self._method_name = method_name
        self._original = original

    def __call__(self, *args, **kwargs):
        state = getattr(_local, 'state', None)
        if state is None:
            return self._original(*args, **kwargs)
        return getattr(state, self._method_name)(*args, **kwargs)

    @property
    def __self__(self):
        # Chainer's ShuffleOrderSampler reads numpy.random.random.__self__ to
        # find the global state.
        return numpy.random.mtrand._rand

    @property
    def __doc__(self):
        return self._original.__doc__

    def __reduce__(self):
        # By name, so a pickled function is whatever numpy.random holds where it is loaded.
        return _numpy_random_function, (self._name,)

    def __repr__(self):
        return '<thread-dispatching numpy.random.{}>'.format(self._name)


def _numpy_random_function(name):
    return getattr(numpy.random, name)


def _install():
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


def seeded_permutation(seed, epoch, size):
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
def seeded_numpy_random(key):
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
