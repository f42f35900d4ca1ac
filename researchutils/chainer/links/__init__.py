"""Links (parameterized layers).

Example:
    >>> from researchutils.chainer.links import GradClipLSTM
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'connection.action_conditioned_lstm': ['ActionConditionedLSTM'],
    'connection.conv_lstm': ['ConvLSTM'],
    'connection.deconvolution_ps': ['DeconvolutionPS'],
    'connection.grad_clip_lstm': ['GradClipLSTM'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.links.connection.action_conditioned_lstm import (
        ActionConditionedLSTM as ActionConditionedLSTM,
    )
    from researchutils.chainer.links.connection.conv_lstm import ConvLSTM as ConvLSTM
    from researchutils.chainer.links.connection.deconvolution_ps import (
        DeconvolutionPS as DeconvolutionPS,
    )
    from researchutils.chainer.links.connection.grad_clip_lstm import GradClipLSTM as GradClipLSTM
