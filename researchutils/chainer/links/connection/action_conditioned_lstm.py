"""LSTM layer whose recurrence is conditioned on an action (Chiappa et al. 2017).

Tests: ``tests/chainer/links/connection/test_action_conditioned_lstm.py``.
"""
import chainer
import chainer.functions as F
import chainer.links as L

from researchutils._checks import check_int
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
        TypeError: a bound that is not a real number, an ``action_size`` that is not an int.
        ValueError: ``clip_min > clip_max``, ``action_size < 1``.

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

    def __init__(self, in_size, out_size=None, lateral_init=None, upward_init=None,
                 bias_init=None, forget_bias_init=None, h_fusion_init=None,
                 a_fusion_init=None, *, action_size=None, clip_min=None, clip_max=None):
        action_size = check_int(action_size, 'action_size', minimum=1, allow_none=True)
        super().__init__(in_size, out_size, lateral_init=lateral_init,
                         upward_init=upward_init, bias_init=bias_init,
                         forget_bias_init=forget_bias_init, clip_min=clip_min,
                         clip_max=clip_max)
        with self.init_scope():
            self.Wh = L.Linear(self.state_size, self.state_size, nobias=True,
                               initialW=h_fusion_init)
            self.Wa = L.Linear(action_size, self.state_size, nobias=True,
                               initialW=a_fusion_init)

    def forward(self, x, a=None):
        """Advances the state by one step and returns the new output.

        Args:
            x: Input ``(B, in_size)``, or the pair ``(x, a)`` when ``a`` is not given.
            a: Action ``(B, ...)`` or ``(1, ...)``.

        Returns:
            ~chainer.Variable: Output of shape ``(B, out_size)``.
        """
        if a is None:
            if not isinstance(x, (tuple, list)) or len(x) != 2:
                raise TypeError('ActionConditionedLSTM takes x and an action a: call it as '
                                'link(x, a) or link((x, a)), not with {}'.format(
                                    type(x).__name__))
            x, a = x
        if len(a) not in (1, len(x)):
            raise ValueError('the action a must have one row or as many as x ({}), got '
                             'shape {}'.format(len(x), a.shape))
        if self.Wa.W.array is None:
            with chainer.using_device(self.device):
                self.Wa._initialize_params(a.size // len(a))

        def fused_lateral(h):
            action = self.Wa(a)
            if len(action) != len(h):
                action = F.broadcast_to(action, h.shape)
            return self.lateral(self.Wh(h) * action)

        return self._advance(x, fused_lateral)
