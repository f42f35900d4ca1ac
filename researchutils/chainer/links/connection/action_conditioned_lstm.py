"""LSTM layer whose recurrence is conditioned on an action (Chiappa et al. 2017).

Tests: ``tests/chainer/links/connection/test_action_conditioned_lstm.py``.
"""
from __future__ import annotations

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import utils

from researchutils._checks import check_int
from researchutils._typing import Initializer, Variable, VariableOrArray
from researchutils.chainer.links._arguments import check_array, check_initializer
from researchutils.chainer.links.connection.grad_clip_lstm import GradClipLSTM


class ActionConditionedLSTM(GradClipLSTM):
    """Fully-connected LSTM layer whose previous output is fused with an action.

    The action-conditioned transition of Chiappa et al. (2017), "Recurrent Environment
    Simulators" (the multiplicative, factorised form of Oh et al. 2015): the previous
    output and the action are mapped to the same size and multiplied elementwise before
    the lateral connection,

    .. math::

        v_t = (W_h h_{t-1}) \\odot (W_a a_t), \\qquad
        (c_t, h_t) = \\mathrm{lstm}(c_{t-1}, W_x x_t + b + W_v v_t),

    with ``upward`` (:math:`W_x`, :math:`b`), ``lateral`` (:math:`W_v`), ``Wh`` and ``Wa``
    as child links. At the first step after a reset there is no previous output, so the
    action has no effect then (it acts on the transition from the previous state).

    Otherwise it behaves as :class:`chainer.links.LSTM` (it is one, through
    :class:`~researchutils.chainer.links.GradClipLSTM`): lazy ``in_size``,
    :meth:`reset_state`, :meth:`set_state`, a batch that may shrink between steps but not
    grow, serialization. The action size comes from the first call (``Wa`` is a lazily
    sized :class:`~chainer.links.Linear`, as in the original researchutils) unless
    ``action_size`` is given; an action of any shape ``(B, ...)`` is flattened per sample.
    An action with one row is used for the whole batch. With ``clip_min`` / ``clip_max``
    the gate gradients are clipped as in ``GradClipLSTM``.

    The action is checked at every step, the first included (where it has no effect yet),
    and held to the rules of ``x``: an array or a :class:`~chainer.Variable` of the link's
    dtype (that of ``Wa``), never converted silently. A Python list, an integer array or
    a float64 one-hot array (``numpy.eye``'s default) given to a float32 link is refused
    naming ``a``; convert it first, e.g. ``numpy.asarray(a, numpy.float32)``.

    Args:
        in_size (int or None): Dimension of the input ``x``; ``None`` (or giving only one
            size) defers it to the first call.
        out_size (int): Number of LSTM units.
        lateral_init: Initializer of the lateral connection's weight :math:`W_v`.
        upward_init: Initializer of the upward connection's weight :math:`W_x`.
        bias_init: Initializer of the biases other than the forget gate's.
        forget_bias_init: Initializer of the forget gate's bias.
        h_fusion_init: Initializer of :math:`W_h` (``None``: Chainer's default).
        a_fusion_init: Initializer of :math:`W_a` (``None``: Chainer's default).
        action_size (int or None): Size of a flattened action, keyword only; ``None``
            takes it from the first call.
        clip_min (float or None): Lower bound of the gate gradients, keyword only.
        clip_max (float or None): Upper bound of the gate gradients, keyword only.

    Raises:
        TypeError: a bound that is not a real number, a size or ``action_size`` that is
            not an int, an initializer that is not one (a str, say);
            when called, an action ``a`` that is not an array or of another dtype.
        ValueError: ``clip_min > clip_max``, a size or ``action_size`` below 1; when
            called, an action whose rows are neither one nor those of ``x``, or whose
            flattened size is not the action size.

    Example:
        >>> import numpy as np
        >>> from researchutils.chainer.links import ActionConditionedLSTM
        >>> lstm = ActionConditionedLSTM(8, 16)
        >>> x = np.zeros((2, 8), np.float32)
        >>> action = np.eye(2, 3, dtype=np.float32)  # one-hot actions, 3 of them
        >>> y = lstm(x, action)
        >>> y = lstm((x, action))  # the original's call with one pair
        >>> y.shape
        (2, 16)
    """

    def __init__(self, in_size: int | None, out_size: int | None = None,
                 lateral_init: Initializer | None = None,
                 upward_init: Initializer | None = None, bias_init: Initializer | None = None,
                 forget_bias_init: Initializer | None = None,
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
        with self.init_scope():
            self.Wh = L.Linear(self.state_size, self.state_size, nobias=True,
                               initialW=h_fusion_init)
            self.Wa = L.Linear(action_size, self.state_size, nobias=True,
                               initialW=a_fusion_init)

    def forward(self, x: VariableOrArray | tuple[VariableOrArray, VariableOrArray],
                a: VariableOrArray | None = None) -> Variable:
        """Advances the state by one step and returns the new output.

        Args:
            x (:class:`~chainer.Variable`, ndarray or tuple): Input ``(B, in_size)``, or
                the pair ``(x, a)`` when ``a`` is not given.
            a (:class:`~chainer.Variable`, ndarray or None): Action ``(B, ...)`` or
                ``(1, ...)``, an array or Variable of the link's dtype.

        Returns:
            ~chainer.Variable: Output of shape ``(B, out_size)``.
        """
        if a is None:
            if not isinstance(x, (tuple, list)) or len(x) != 2:
                raise TypeError('ActionConditionedLSTM takes x and an action a: call it as '
                                'link(x, a) or link((x, a)), not with {}'.format(
                                    type(x).__name__))
            x, a = x
        self._check_action(x, a)

        def fused_lateral(h: Variable) -> Variable:
            action = self.Wa(a)
            if len(action) != len(h):
                action = F.broadcast_to(action, h.shape)
            return self.lateral(self.Wh(h) * action)

        return self._advance(x, fused_lateral)

    def _check_action(self, x: VariableOrArray, a: VariableOrArray) -> None:
        """Refuses an action the lateral step could not use, before anything is computed.

        Done at every step: at the first one the action is not used yet, and a wrong one
        would otherwise pass there and fail one step later inside Chainer.
        """
        check_array('x', x, 'the input x')
        check_array('a', a, 'the action a')
        if len(a) not in (1, len(x)):
            raise ValueError('the action a must have one row or as many as x ({}), got '
                             'shape {}'.format(len(x), a.shape))
        width = utils.size_of_shape(a.shape[1:])
        if self.Wa.W.array is None:
            with chainer.using_device(self.device):
                self.Wa._initialize_params(width)
        if width != self.Wa.W.shape[1]:
            raise ValueError('the action a must have {} values per sample (the action size), '
                             'got shape {}'.format(self.Wa.W.shape[1], a.shape))
        if a.dtype != self.Wa.W.dtype:
            raise TypeError('the action a must have the dtype of the link, {}, got {} (convert '
                            'it: a.astype(numpy.{}))'.format(
                                self.Wa.W.dtype, a.dtype, self.Wa.W.dtype))
