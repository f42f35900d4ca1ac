"""The toolkit's links as torch modules, one module each, equal to their Chainer twins.

The classes are also at :mod:`researchutils.pytorch`; each module's docstring maps the Chainer
twin's parameter names to the torch ones.

Example:
    >>> from researchutils.pytorch.nn import GradClipLSTM
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'grad_clip_lstm': ['GradClipLSTM'],
    'deconvolution_ps': ['DeconvolutionPS'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.nn.deconvolution_ps import DeconvolutionPS as DeconvolutionPS
    from researchutils.pytorch.nn.grad_clip_lstm import GradClipLSTM as GradClipLSTM
