"""Activation-like functions."""
from researchutils.chainer.functions.activation.grad_clip_lstm import (  # noqa: F401
    GradClipLSTM,
    GradClipLSTMGrad,
    grad_clip_lstm,
)

__all__ = ['GradClipLSTM', 'GradClipLSTMGrad', 'grad_clip_lstm']
