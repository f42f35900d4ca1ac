"""The torch twin of ``researchutils.chainer.links.ActionConditionedLSTM``: an LSTM layer whose
recurrence is conditioned on an action (Chiappa et al. 2017).

Chainer name -> torch name (a Chainer link's arrays copy into these unchanged): those of
:mod:`researchutils.pytorch.nn.grad_clip_lstm` (``upward/W`` -> ``upward.weight``,
``upward/b`` -> ``upward.bias``, ``lateral/W`` -> ``lateral.weight``, interleaved gate rows),
and

============  ===============  ================================================
Chainer       torch            shape
============  ===============  ================================================
``Wh/W``      ``Wh.weight``    ``(U, U)``, a ``torch.nn.Linear`` without bias
``Wa/W``      ``Wa.weight``    ``(U, action_size)``, a ``torch.nn.Linear`` without
                               bias (``torch.nn.LazyLinear`` until the first call
                               when ``action_size`` is None)
============  ===============  ================================================

Tests: ``tests/pytorch/nn/test_action_conditioned_lstm.py``.
"""
from __future__ import annotations

import math

import torch

from researchutils._checks import check_int
from researchutils.pytorch._tensor_checks import check_float_tensor
from researchutils.pytorch.nn._arguments import (
    Initializer,
    check_initializer,
    initialize,
    lecun_normal_,
)
from researchutils.pytorch.nn.grad_clip_lstm import GradClipLSTM


class ActionConditionedLSTM(GradClipLSTM):
    """LSTM layer whose previous output is fused with an action, equal to its Chainer twin.

    The previous output and the action are mapped to the same size and multiplied
    elementwise before the lateral connection,

    .. math::

        v_t = (W_h h_{t-1}) \\odot (W_a a_t), \\qquad
        (c_t, h_t) = \\mathrm{lstm}(c_{t-1}, W_x x_t + b + W_v v_t),

    with ``upward`` (:math:`W_x`, :math:`b`), ``lateral`` (:math:`W_v`), ``Wh`` and ``Wa``.
    At the first step after a reset there is no previous output, so the action has no
    effect then. Otherwise it behaves as :class:`~researchutils.pytorch.GradClipLSTM` (the
    state, a shrinking batch, the clip). An action of any shape ``(B, ...)`` is flattened
    per sample; one with one row is used for the whole batch. The action is checked at
    every step, the first included, and must be a tensor of the parameters' dtype (a
    one-hot float64 action given to a float32 layer is refused naming ``a``).

    Args:
        in_size (int or None): Dimension of the input; None (or giving only one size)
            defers it to the first step.
        out_size (int): Number of LSTM units.
        lateral_init: Initializer of ``lateral.weight``.
        upward_init: Initializer of ``upward.weight``.
        bias_init: Initializer of the biases other than the forget gate's.
        forget_bias_init: Initializer of the forget gate's bias.
        h_fusion_init: Initializer of ``Wh.weight`` (None: Chainer's LeCunNormal).
        a_fusion_init: Initializer of ``Wa.weight`` (None: Chainer's LeCunNormal).
        action_size (int or None): Size of a flattened action, keyword only; None takes
            it from the first call.
        clip_min (float or None): Lower bound of the gate gradients, keyword only.
        clip_max (float or None): Upper bound of the gate gradients, keyword only.

    Raises:
        TypeError: a bound that is not a real number, a size or ``action_size`` that is not
            an int, an initializer that is not one; when called, an action ``a`` that is
            not a tensor of the parameters' dtype.
        ValueError: ``clip_min > clip_max``, a size or ``action_size`` below 1; when called,
            an action whose rows are neither one nor those of ``x``, or whose flattened size
            is not the action size.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import ActionConditionedLSTM
        >>> lstm = ActionConditionedLSTM(8, 16)
        >>> x = torch.zeros(2, 8)
        >>> action = torch.eye(2, 3)  # one-hot actions, 3 of them
        >>> y = lstm(x, action)
        >>> y = lstm((x, action))  # the original's call with one pair
        >>> y.shape
        torch.Size([2, 16])
    """

    def __init__(self, in_size: int | None, out_size: int | None = None,
                 lateral_init: Initializer | None = None, upward_init: Initializer | None = None,
                 bias_init: Initializer | None = None, forget_bias_init: Initializer | None = None,
                 h_fusion_init: Initializer | None = None,
                 a_fusion_init: Initializer | None = None, *, action_size: int | None = None,
                 clip_min: float | None = None, clip_max: float | None = None) -> None:
        action_size = check_int(action_size, 'action_size', minimum=1, allow_none=True)
        check_initializer(h_fusion_init, 'h_fusion_init')
        check_initializer(a_fusion_init, 'a_fusion_init')
        super().__init__(in_size, out_size, lateral_init=lateral_init,
                         upward_init=upward_init, bias_init=bias_init,
                         forget_bias_init=forget_bias_init, clip_min=clip_min,
                         clip_max=clip_max)
        self.a_fusion_init = a_fusion_init
        units = self.state_size
        self.Wh = torch.nn.Linear(units, units, bias=False)
        initialize(self.Wh.weight, h_fusion_init, lecun_normal_)
        self.Wa: torch.nn.Module = (torch.nn.LazyLinear(units, bias=False) if action_size is None
                                    else torch.nn.Linear(action_size, units, bias=False))
        if action_size is not None:
            initialize(self.Wa.weight, a_fusion_init, lecun_normal_)

    def forward(self, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
                a: torch.Tensor | None = None) -> torch.Tensor:
        """Advances the state by one step and returns the new output.

        Args:
            x (torch.Tensor or tuple): Input ``(B, in_size)``, or the pair ``(x, a)`` when
                ``a`` is not given.
            a (torch.Tensor or None): Action ``(B, ...)`` or ``(1, ...)``, a tensor of the
                parameters' dtype.

        Returns:
            torch.Tensor: Output ``(B, out_size)``.
        """
        if a is None:
            if not isinstance(x, (tuple, list)) or len(x) != 2:
                raise TypeError('ActionConditionedLSTM takes x and an action a: call it as '
                                'module(x, a) or module((x, a)), not with {}'.format(
                                    type(x).__name__))
            x, a = x
        action = self._check_action(x, a)

        def fused_lateral(h: torch.Tensor) -> torch.Tensor:
            fused = self.Wa(action)
            if len(fused) != len(h):
                fused = fused.expand(h.shape)
            return self.lateral(self.Wh(h) * fused)

        return self._advance(x, fused_lateral)

    def _check_action(self, x: object, a: object) -> torch.Tensor:
        """The action flattened per sample, or the error the Chainer twin raises.

        Done at every step: at the first one the action is not used yet, and a wrong one
        would otherwise pass there and fail one step later.
        """
        rows = len(check_float_tensor(x, 'x'))
        if not isinstance(a, torch.Tensor):
            raise TypeError('a must be a torch.Tensor (the action), got {}'.format(
                type(a).__name__))
        if len(a) not in (1, rows):
            raise ValueError('the action a must have one row or as many as x ({}), got '
                             'shape {}'.format(rows, tuple(a.shape)))
        width = math.prod(a.shape[1:])
        if torch.nn.parameter.is_lazy(self.Wa.weight):
            self.Wa.weight.materialize((self.state_size, width))
            initialize(self.Wa.weight, self.a_fusion_init, lecun_normal_)
        if width != self.Wa.weight.shape[1]:
            raise ValueError('the action a must have {} values per sample (the action size), '
                             'got shape {}'.format(self.Wa.weight.shape[1], tuple(a.shape)))
        if a.dtype != self.Wa.weight.dtype:
            raise TypeError('the action a must have the dtype of the module, {}, got {} '
                            '(convert it: a.to({}))'.format(
                                self.Wa.weight.dtype, a.dtype, self.Wa.weight.dtype))
        return a.reshape(len(a), width)
