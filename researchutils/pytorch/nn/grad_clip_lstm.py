"""The torch twin of ``researchutils.chainer.links.GradClipLSTM``: a stateful, fully-connected
LSTM layer whose gate gradients are clipped at every step.

Chainer name -> torch name (a Chainer link's arrays copy into these unchanged):

=================  ======================  ===========================================
Chainer            torch                   shape, layout
=================  ======================  ===========================================
``upward/W``       ``upward.weight``       ``(4U, in_size)``, rows interleaved: row
                                           ``4u + g`` is unit u, gate g (a, i, f, o)
``upward/b``       ``upward.bias``         ``(4U,)``, interleaved alike
``lateral/W``      ``lateral.weight``      ``(4U, U)``, interleaved alike (no bias)
``c``, ``h``       ``c``, ``h``            the state: tensors ``(B, U)``, or None
=================  ======================  ===========================================

``upward`` is a ``torch.nn.Linear`` (a ``torch.nn.LazyLinear`` until the first step when
``in_size`` is None) and ``lateral`` a ``torch.nn.Linear`` without bias. The gate layout is
Chainer's, not ``torch.nn.LSTMCell``'s (blocks i, f, g, o).
Tests: ``tests/pytorch/nn/test_grad_clip_lstm.py``.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from researchutils._layer_checks import check_clip_bounds, check_sizes
from researchutils.pytorch._tensor_checks import check_float_tensor, check_same_dtype
from researchutils.pytorch.functions import grad_clip_lstm
from researchutils.pytorch.nn._arguments import (
    Initializer,
    check_initializer,
    check_state,
    initialize,
    lecun_normal_,
)


class GradClipLSTM(torch.nn.Module):
    """Fully-connected LSTM layer whose gate gradients are clipped, as its Chainer twin.

    Each step runs :func:`~researchutils.pytorch.grad_clip_lstm` on
    ``upward(x) + lateral(h)``: the gradient with respect to the gate pre-activations is
    clipped to ``[clip_min, clip_max]`` in the backward pass (Graves 2013, section 2.1); the
    gradient carried back in time through the cell state is not. The state is kept as by
    :class:`chainer.links.LSTM`: :attr:`c` and :attr:`h` are None until the first step,
    :meth:`reset_state` clears them, :meth:`set_state` sets them, and a batch may shrink
    from one step to the next (the rows past it keep their state) but not grow. To cut the
    graph between sequences, ``set_state(lstm.c.detach(), lstm.h.detach())`` (Chainer's
    ``unchain_backward``). The state is no buffer: ``module.to(...)`` moves the parameters
    alone, so reset or set the state after moving the module. Given the twin's weights,
    every output and gradient equals the twin's.

    Parameters are initialized as Chainer initializes them: each gate's block of rows of the
    weights by ``upward_init`` / ``lateral_init`` (Chainer's LeCunNormal by default), the
    biases of a, i, o by ``bias_init`` (zero) and the forget gate's by ``forget_bias_init``
    (one).

    Args:
        in_size (int or None): Dimension of the input. ``None`` (or giving only one size)
            defers it to the first step; an input ``(B, ...)`` is flattened per sample.
        out_size (int): Number of LSTM units U.
        lateral_init: Initializer of ``lateral.weight``: None, a number or a callable that
            fills a tensor in place.
        upward_init: Initializer of ``upward.weight``.
        bias_init: Initializer of the biases other than the forget gate's.
        forget_bias_init: Initializer of the forget gate's bias.
        clip_min (float or None): Lower bound of the gate gradients; None is unbounded.
        clip_max (float or None): Upper bound of the gate gradients; None is unbounded.

    Attributes:
        c (torch.Tensor or None): The cell state ``(B, U)``.
        h (torch.Tensor or None): The output of the previous step ``(B, U)``.

    Raises:
        TypeError: a size that is not an int, a bound that is not a real number, an
            initializer that is not one (a str, say).
        ValueError: ``clip_min > clip_max``, a size below 1.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import GradClipLSTM
        >>> lstm = GradClipLSTM(3, 4, clip_min=-10.0, clip_max=10.0)
        >>> for x in torch.zeros(5, 2, 3):  # (time, batch, in_size)
        ...     y = lstm(x)
        >>> y.shape
        torch.Size([2, 4])
    """

    c: torch.Tensor | None
    h: torch.Tensor | None

    def __init__(self, in_size: int | None, out_size: int | None = None,
                 lateral_init: Initializer | None = None, upward_init: Initializer | None = None,
                 bias_init: Initializer | None = None, forget_bias_init: Initializer | None = None,
                 clip_min: float | None = None, clip_max: float | None = None) -> None:
        super().__init__()
        self.clip_min, self.clip_max = check_clip_bounds(clip_min, clip_max)
        check_sizes(in_size, out_size)
        for name, initializer in (('lateral_init', lateral_init), ('upward_init', upward_init),
                                  ('bias_init', bias_init),
                                  ('forget_bias_init', forget_bias_init)):
            check_initializer(initializer, name)
        if out_size is None:
            in_size, out_size = None, in_size
        assert out_size is not None
        self.state_size = out_size
        self.lateral_init, self.upward_init = lateral_init, upward_init
        self.bias_init, self.forget_bias_init = bias_init, forget_bias_init
        gates = 4 * out_size
        self.upward: torch.nn.Module = (torch.nn.LazyLinear(gates) if in_size is None
                                        else torch.nn.Linear(in_size, gates))
        self.lateral = torch.nn.Linear(out_size, gates, bias=False)
        self._initialize_blocks(self.lateral.weight, lateral_init)
        if in_size is not None:
            self._initialize_upward()
        self.reset_state()

    def _initialize_blocks(self, weight: torch.Tensor, initializer: Initializer | None) -> None:
        # Chainer fills each block of U rows on its own (the fan of each is U rows).
        for start in range(0, 4 * self.state_size, self.state_size):
            initialize(weight[start:start + self.state_size], initializer, lecun_normal_)

    def _initialize_upward(self) -> None:
        self._initialize_blocks(self.upward.weight, self.upward_init)
        gates = self.upward.bias.view(self.state_size, 4)
        for gate in (0, 1, 3):
            initialize(gates[:, gate], self.bias_init, torch.nn.init.zeros_)
        initialize(gates[:, 2], self.forget_bias_init, torch.nn.init.ones_)

    def reset_state(self) -> None:
        """Clears the state: :attr:`c` and :attr:`h` become None (zero at the next step)."""
        self.c = self.h = None

    def set_state(self, c: torch.Tensor, h: torch.Tensor) -> None:
        """Sets the state.

        Args:
            c (torch.Tensor): The cell state ``(B, U)``.
            h (torch.Tensor): The output of the previous step ``(B, U)``.

        Raises:
            TypeError: ``c`` or ``h`` is not a floating point tensor.
        """
        self.c, self.h = check_state(c, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Advances the state by one step and returns the new output.

        Args:
            x (torch.Tensor): Input ``(B, in_size)`` (or ``(B, ...)``, flattened per
                sample), the dtype of the parameters; ``B`` may shrink from one step to
                the next, never grow.

        Returns:
            torch.Tensor: Output ``(B, out_size)``.

        Raises:
            TypeError: ``x`` is not a floating point tensor of the parameters' dtype, or
                its batch is larger than the state's (Chainer's error).
        """
        return self._advance(x, self.lateral)

    def _advance(self, x: torch.Tensor,
                 lateral: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """One step; ``lateral(h)`` maps the previous output's first rows to gate inputs.

        The hook through which a subclass changes the recurrence and nothing else
        (:class:`~researchutils.pytorch.ActionConditionedLSTM` fuses the action into it).
        """
        check_float_tensor(x, 'x')
        check_same_dtype(x, 'x', self.lateral.weight, 'the parameters')
        x = x.reshape(len(x), -1)  # as Chainer's Linear, which flattens each sample
        if torch.nn.parameter.is_lazy(self.upward.weight):
            self.upward.weight.materialize((4 * self.state_size, x.shape[1]))
            self.upward.bias.materialize((4 * self.state_size,))
            self._initialize_upward()
        batch = len(x)
        gates = self.upward(x)
        h_rest = None
        if self.h is not None:
            state_batch = len(self.h)
            if batch > state_batch:
                raise TypeError(
                    'the batch size of x ({}) must not exceed the batch size of the '
                    'previous state h ({})'.format(batch, state_batch))
            if batch < state_batch:
                h_rest = self.h[batch:]
            if batch:
                gates = gates + lateral(self.h[:batch])
        if self.c is None:
            self.c = torch.zeros((batch, self.state_size), dtype=gates.dtype,
                                 device=gates.device)
        self.c, y = grad_clip_lstm(self.c, gates, self.clip_min, self.clip_max)
        self.h = y if h_rest is None else torch.cat([y, h_rest], dim=0)
        return y
