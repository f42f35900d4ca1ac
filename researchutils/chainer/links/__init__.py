"""Links (parameterized layers).

Example:
    >>> from researchutils.chainer.links import GradClipLSTM
"""
from researchutils.chainer.links.connection.action_conditioned_lstm import (  # noqa: F401
    ActionConditionedLSTM,
)
from researchutils.chainer.links.connection.conv_lstm import ConvLSTM  # noqa: F401
from researchutils.chainer.links.connection.deconvolution_ps import (  # noqa: F401
    DeconvolutionPS,
)
from researchutils.chainer.links.connection.grad_clip_lstm import GradClipLSTM  # noqa: F401

__all__ = ['ActionConditionedLSTM', 'ConvLSTM', 'DeconvolutionPS', 'GradClipLSTM']
