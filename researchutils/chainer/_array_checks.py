"""The check of an array argument shared by the functions and the links: a Chainer
Variable or an array of the running backend, never a list, named in the message.

Tests: ``tests/chainer/links/test_arguments.py`` and the whole-API test,
``tests/test_every_argument_checked.py``.
"""
from __future__ import annotations

import chainer

from researchutils._typing import VariableOrArray


def check_array(name: str, value: VariableOrArray, what: str) -> None:
    """Refuses what is not an array or a :class:`chainer.Variable` (a list, say), naming it.

    ``what`` says what the value is in the message ("the input x"). Lists are refused, not
    converted: the dtype a list would become (float64) is rarely the link's.
    """
    if not isinstance(value, chainer.Variable) and not isinstance(
            value, chainer.get_array_types()):
        raise TypeError('{} must be an array or a chainer.Variable, got {} (convert it: '
                        'numpy.asarray({}, numpy.float32))'.format(
                            what, type(value).__name__, name))
    if value.ndim == 0:
        raise ValueError('{} must have a batch axis, shape (B, ...), got shape ()'.format(what))
