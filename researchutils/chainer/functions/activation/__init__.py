"""Activation-like functions, one module each (as in ``chainer.functions.activation``).

The names here are modules: ``grad_clip_lstm`` is the module
:mod:`researchutils.chainer.functions.activation.grad_clip_lstm`, which holds the
function of the same name and its ``FunctionNode`` classes. The flat names live one
level up, in :mod:`researchutils.chainer.functions`.

Example:
    >>> from researchutils.chainer.functions.activation import grad_clip_lstm
    >>> grad_clip_lstm.GradClipLSTM.__name__
    'GradClipLSTM'
"""
from researchutils.chainer.functions.activation import grad_clip_lstm

__all__ = ['grad_clip_lstm']
