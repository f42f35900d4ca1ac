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
    'conv_lstm': ['ConvLSTM'],
    'action_conditioned_lstm': ['ActionConditionedLSTM'],
    'connection': ['Linear', 'Deconvolution2D', 'DepthwiseConvolution2D', 'EmbedID', 'Highway',
                   'Maxout'],
    'normalization': ['BatchNormalization'],
    'recurrent': ['LSTM', 'StatelessLSTM', 'StatefulGRU', 'StatelessGRU'],
    'n_step_rnn': ['NStepLSTM', 'NStepBiLSTM', 'NStepGRU', 'NStepBiGRU'],
    'containers': ['Sequential', 'Chain'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.nn.action_conditioned_lstm import (
        ActionConditionedLSTM as ActionConditionedLSTM,
    )
    from researchutils.pytorch.nn.connection import Deconvolution2D as Deconvolution2D
    from researchutils.pytorch.nn.connection import (
        DepthwiseConvolution2D as DepthwiseConvolution2D,
    )
    from researchutils.pytorch.nn.connection import EmbedID as EmbedID
    from researchutils.pytorch.nn.connection import Highway as Highway
    from researchutils.pytorch.nn.connection import Linear as Linear
    from researchutils.pytorch.nn.connection import Maxout as Maxout
    from researchutils.pytorch.nn.containers import Chain as Chain
    from researchutils.pytorch.nn.containers import Sequential as Sequential
    from researchutils.pytorch.nn.conv_lstm import ConvLSTM as ConvLSTM
    from researchutils.pytorch.nn.deconvolution_ps import DeconvolutionPS as DeconvolutionPS
    from researchutils.pytorch.nn.grad_clip_lstm import GradClipLSTM as GradClipLSTM
    from researchutils.pytorch.nn.n_step_rnn import NStepBiGRU as NStepBiGRU
    from researchutils.pytorch.nn.n_step_rnn import NStepBiLSTM as NStepBiLSTM
    from researchutils.pytorch.nn.n_step_rnn import NStepGRU as NStepGRU
    from researchutils.pytorch.nn.n_step_rnn import NStepLSTM as NStepLSTM
    from researchutils.pytorch.nn.normalization import BatchNormalization as BatchNormalization
    from researchutils.pytorch.nn.recurrent import LSTM as LSTM
    from researchutils.pytorch.nn.recurrent import StatefulGRU as StatefulGRU
    from researchutils.pytorch.nn.recurrent import StatelessGRU as StatelessGRU
    from researchutils.pytorch.nn.recurrent import StatelessLSTM as StatelessLSTM
