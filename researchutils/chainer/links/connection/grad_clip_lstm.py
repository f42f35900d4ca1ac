"""Fully-connected LSTM layer with derivative clipping, a drop-in for ``chainer.links.LSTM``.

Tests: ``tests/chainer/links/connection/test_grad_clip_lstm.py``.
"""
from __future__ import annotations

from collections.abc import Callable

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import utils

from researchutils._typing import Initializer, Variable, VariableOrArray
from researchutils.chainer._clip_bounds import check_clip_bounds
from researchutils.chainer.functions.activation.grad_clip_lstm import grad_clip_lstm
from researchutils.chainer.links._arguments import check_array, check_initializer, check_sizes


class GradClipLSTM(L.LSTM):
    """Fully-connected LSTM layer whose gate gradients are clipped at every step.

    The same layer as :class:`chainer.links.LSTM` (parameters ``upward/W``, ``upward/b``
    and ``lateral/W``, their initialization, lazy initialization when ``in_size`` is None,
    :meth:`reset_state`, :meth:`set_state`, a batch that shrinks between steps, and
    serialization), except that each step runs
    :func:`~researchutils.chainer.functions.grad_clip_lstm`: in the backward pass the
    gradient with respect to the gate pre-activations is clipped to
    ``[clip_min, clip_max]`` (Graves 2013, section 2.1). Gradients carried back in time
    through the cell state are not clipped.

    Args:
        in_size (int or None): Dimension of the input. ``None`` (or giving only one size)
            defers it to the first call.
        out_size (int): Number of LSTM units.
        lateral_init: Initializer of the lateral connection's weight.
        upward_init: Initializer of the upward connection's weight.
        bias_init: Initializer of the biases other than the forget gate's.
        forget_bias_init: Initializer of the forget gate's bias.
        clip_min (float or None): Lower bound of the gate gradients; ``None`` is unbounded.
        clip_max (float or None): Upper bound of the gate gradients; ``None`` is unbounded.

    Raises:
        TypeError: a size that is not an int, a bound that is not a real number, an
            initializer that is not one (a str, say).
        ValueError: ``clip_min > clip_max``, a size below 1 (Chainer's ``L.LSTM(0, 4)``
            fails with a ZeroDivisionError).

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.links import GradClipLSTM
        >>> lstm = GradClipLSTM(3, 4, clip_min=-10.0, clip_max=10.0)
        >>> y = lstm(np.zeros((2, 3), np.float32))
        >>> y.shape
        (2, 4)
    """

    # The state, kept by chainer.links.LSTM: None (zero) until the first step.
    c: Variable | None
    h: Variable | None

    def __init__(self, in_size: int | None, out_size: int | None = None,
                 lateral_init: Initializer | None = None,
                 upward_init: Initializer | None = None, bias_init: Initializer | None = None,
                 forget_bias_init: Initializer | None = None, clip_min: float | None = None,
                 clip_max: float | None = None) -> None:
        self.clip_min, self.clip_max = check_clip_bounds(clip_min, clip_max)
        check_sizes(in_size, out_size)
        for name, initializer in (('lateral_init', lateral_init), ('upward_init', upward_init),
                                  ('bias_init', bias_init),
                                  ('forget_bias_init', forget_bias_init)):
            check_initializer(initializer, name)
        super().__init__(in_size, out_size, lateral_init=lateral_init,
                         upward_init=upward_init, bias_init=bias_init,
                         forget_bias_init=forget_bias_init)

    def forward(self, x: VariableOrArray) -> Variable:
        """Advances the state by one step and returns the new output.

        Args:
            x (:class:`~chainer.Variable` or ndarray): Input of shape
                ``(B, in_size)``; ``B`` may shrink from one step to the next (never grow),
                and the rows beyond it keep their state.

        Returns:
            ~chainer.Variable: Output of shape ``(B, out_size)``.
        """
        return self._advance(x, self.lateral)

    def _advance(self, x: VariableOrArray,
                 lateral: Callable[[Variable], Variable]) -> Variable:
        """One step; ``lateral(h)`` maps the previous output's first rows to gate inputs.

        The hook through which a subclass changes the recurrence and nothing else
        (:class:`ActionConditionedLSTM` fuses the action into ``lateral``).
        """
        check_array('x', x, 'the input x')
        if self.upward.W.array is None:
            with chainer.using_device(self.device):
                self.upward._initialize_params(utils.size_of_shape(x.shape[1:]))
                self._initialize_params()

        batch = len(x)
        gates = self.upward(x)
        h_rest = None
        if self.h is not None:
            state_batch = len(self.h)
            if batch > state_batch:
                raise TypeError(
                    'the batch size of x ({}) must not exceed the batch size of the '
                    'previous state h ({})'.format(batch, state_batch))
            if batch == 0:
                h_rest = self.h
            elif batch < state_batch:
                h_used, h_rest = F.split_axis(self.h, [batch], axis=0)
                gates = gates + lateral(h_used)
            else:
                gates = gates + lateral(self.h)
        if self.c is None:
            with chainer.using_device(self.device):
                self.c = chainer.Variable(
                    self.xp.zeros((batch, self.state_size), dtype=gates.dtype))
        self.c, y = grad_clip_lstm(self.c, gates, self.clip_min, self.clip_max)

        if h_rest is None:
            self.h = y
        elif batch == 0:
            self.h = h_rest
        else:
            self.h = F.concat([y, h_rest], axis=0)
        return y
