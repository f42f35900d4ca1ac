"""The way into PyTorch: the toolkit's pieces as torch code, equal to their Chainer twins.

The one package of researchutils that imports torch at import time (and never Chainer):
without torch it raises an ImportError that names the extra, ``pip install
researchutils[torch]``. The public names are flat here and load lazily, so importing one
piece loads that piece: :func:`grad_clip_lstm` and :func:`average_k_step_squared_error`
(:mod:`researchutils.pytorch.functions`), the modules :class:`GradClipLSTM`,
:class:`ConvLSTM`, :class:`ActionConditionedLSTM` and :class:`DeconvolutionPS`
(:mod:`researchutils.pytorch.nn`) and the initializer :class:`NormalWithLoc`
(:mod:`researchutils.pytorch.initializers`), and :func:`convert` and :func:`write_source`
(:mod:`researchutils.pytorch.tracing`), which turn any Chainer model into a torch module and
its source. Their submodules and parameters carry the Chainer
twins' names, in Chainer's layouts, so a Chainer link's arrays copy into them unchanged.

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
    'tracing.converter': ['convert', 'write_source'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.pytorch.functions import (
        average_k_step_squared_error as average_k_step_squared_error,
    )
    from researchutils.pytorch.functions import grad_clip_lstm as grad_clip_lstm
    from researchutils.pytorch.tracing.converter import convert as convert
    from researchutils.pytorch.tracing.converter import write_source as write_source
