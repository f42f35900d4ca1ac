"""Links (parameterized layers).

Example:
    >>> from researchutils.chainer.links import GradClipLSTM
"""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'connection.action_conditioned_lstm': ['ActionConditionedLSTM'],
    'connection.conv_lstm': ['ConvLSTM'],
    'connection.deconvolution_ps': ['DeconvolutionPS'],
    'connection.grad_clip_lstm': ['GradClipLSTM'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
