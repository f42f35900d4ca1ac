"""The way into PyTorch: the toolkit's pieces as torch code, equal to their Chainer twins.

The one package of researchutils that imports torch at import time (and never Chainer):
without torch it raises an ImportError that names the extra, ``pip install
researchutils[torch]``. The public names are flat here and load lazily, so importing one
piece loads that piece: :func:`grad_clip_lstm` and :func:`average_k_step_squared_error`
(:mod:`researchutils.pytorch.functions`), the modules :class:`GradClipLSTM`,
:class:`ConvLSTM`, :class:`ActionConditionedLSTM` and :class:`DeconvolutionPS`
(:mod:`researchutils.pytorch.nn`) and the initializer :class:`NormalWithLoc`
(:mod:`researchutils.pytorch.initializers`); the twins of Chainer's own links that torch lacks
(:class:`LSTM`, :class:`EmbedID`, :class:`NStepLSTM`, ..., :mod:`researchutils.pytorch.nn`);
and the way Chainer weights come in, :func:`from_chainer`, :func:`load_chainer_weights` and
:func:`compare` (:mod:`researchutils.pytorch.weights`, which reads Chainer). Their
submodules and parameters carry the Chainer twins' names, so Chainer weights fill them by name
(the toolkit's twins in Chainer's layouts, the others through weights' rules).
Each takes its twin's arguments by the same names, positions and defaults (``in_size`` and
``out_size`` for the LSTMs, not ``torch.nn.LSTMCell``'s ``input_size`` and ``hidden_size``), so
a Chainer script's constructor call ports as it is; in torch's conventions an initializer is
a callable that fills a tensor in place (or a number, or None for Chainer's default), a dtype
is a ``torch.dtype``, and a bad tensor is a TypeError or ValueError naming the argument where
Chainer raises its ``InvalidType``. A Chainer run goes on in torch with
:func:`from_chainer_optimizer` and :func:`from_chainer_schedule`
(:mod:`researchutils.pytorch.optim`, which reads Chainer: its update rules, hooks and
schedules, with their state from a live optimizer or a Trainer snapshot).
:func:`convert` and :func:`write_source` (:mod:`researchutils.pytorch.tracing`, which reads
Chainer) turn any Chainer model into a torch module and its source.

Tests: ``tests/pytorch/`` (one file per module), ``tests/test_imports.py`` (what each piece
loads, and the error without torch).

Example:
    >>> from researchutils.pytorch import GradClipLSTM, grad_clip_lstm
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

try:
    import torch  # noqa: F401 (the package's one requirement, checked once here)
except ImportError as error:
    raise ImportError('researchutils.pytorch needs PyTorch: pip install '
                      'researchutils[torch]') from error

_EXPORTS = {
    'functions': ['grad_clip_lstm', 'average_k_step_squared_error'],
    'nn.grad_clip_lstm': ['GradClipLSTM'],
    'nn.deconvolution_ps': ['DeconvolutionPS'],
    'nn.conv_lstm': ['ConvLSTM'],
    'nn.action_conditioned_lstm': ['ActionConditionedLSTM'],
    'initializers': ['NormalWithLoc'],
    'nn.connection': ['Linear', 'Deconvolution2D', 'DepthwiseConvolution2D', 'EmbedID',
                      'Highway', 'Maxout'],
    'nn.normalization': ['BatchNormalization'],
    'nn.recurrent': ['LSTM', 'StatelessLSTM', 'StatefulGRU', 'StatelessGRU'],
    'nn.n_step_rnn': ['NStepLSTM', 'NStepBiLSTM', 'NStepGRU', 'NStepBiGRU'],
    'nn.containers': ['Sequential', 'Chain'],
    'optim.optimizers': ['ChainerMomentumSGD', 'ChainerAdam', 'ChainerRMSprop'],
    'optim.hooks': ['WeightDecay', 'GradientClipping'],
    'optim.schedules': ['ExponentialShift', 'LinearShift'],
    'optim.conversion': ['from_chainer_optimizer', 'from_chainer_schedule'],
    'weights.conversion': ['from_chainer'],
    'weights.loading': ['load_chainer_weights'],
    'weights.comparison': ['compare'],
    'tracing.converter': ['convert', 'write_source'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.functions import (
        average_k_step_squared_error as average_k_step_squared_error,
    )
    from researchutils.pytorch.functions import grad_clip_lstm as grad_clip_lstm
    from researchutils.pytorch.initializers import NormalWithLoc as NormalWithLoc
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
    from researchutils.pytorch.optim.conversion import (
        from_chainer_optimizer as from_chainer_optimizer,
    )
    from researchutils.pytorch.optim.conversion import (
        from_chainer_schedule as from_chainer_schedule,
    )
    from researchutils.pytorch.optim.hooks import GradientClipping as GradientClipping
    from researchutils.pytorch.optim.hooks import WeightDecay as WeightDecay
    from researchutils.pytorch.optim.optimizers import ChainerAdam as ChainerAdam
    from researchutils.pytorch.optim.optimizers import ChainerMomentumSGD as ChainerMomentumSGD
    from researchutils.pytorch.optim.optimizers import ChainerRMSprop as ChainerRMSprop
    from researchutils.pytorch.optim.schedules import ExponentialShift as ExponentialShift
    from researchutils.pytorch.optim.schedules import LinearShift as LinearShift
    from researchutils.pytorch.tracing.converter import convert as convert
    from researchutils.pytorch.tracing.converter import write_source as write_source
    from researchutils.pytorch.weights.comparison import compare as compare
    from researchutils.pytorch.weights.conversion import from_chainer as from_chainer
    from researchutils.pytorch.weights.loading import load_chainer_weights as load_chainer_weights
