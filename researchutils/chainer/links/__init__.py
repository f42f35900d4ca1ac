"""Links (parameterized layers).

Example:
    >>> from researchutils.chainer.links import GradClipLSTM
"""
from researchutils.chainer.links.connection.deconvolution_ps import (  # noqa: F401
    DeconvolutionPS,
)
from researchutils.chainer.links.connection.grad_clip_lstm import GradClipLSTM  # noqa: F401

__all__ = ['DeconvolutionPS', 'GradClipLSTM']
