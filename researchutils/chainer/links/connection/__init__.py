"""Connection links, one module each (as in ``chainer.links.connection``).

The names here are modules, e.g. ``grad_clip_lstm`` is the module
:mod:`researchutils.chainer.links.connection.grad_clip_lstm`. The link classes live one
level up, in :mod:`researchutils.chainer.links`.

Example:
    >>> from researchutils.chainer.links.connection import grad_clip_lstm
    >>> grad_clip_lstm.GradClipLSTM.__name__
    'GradClipLSTM'
"""
from researchutils.chainer.links.connection import (
    action_conditioned_lstm,
    conv_lstm,
    deconvolution_ps,
    grad_clip_lstm,
)

__all__ = ['action_conditioned_lstm', 'conv_lstm', 'deconvolution_ps', 'grad_clip_lstm']
