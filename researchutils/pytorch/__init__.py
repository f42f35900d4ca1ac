"""The way into PyTorch: the toolkit's pieces as torch code, and a Chainer run carried on.

The one package of researchutils that imports torch at import time: without torch it raises
an ImportError that names the extra, ``pip install researchutils[torch]``. The public names
are flat here and load lazily: Chainer's optimizers, hooks and schedules in torch
(:mod:`researchutils.pytorch.optim`).

Tests: ``tests/pytorch/``.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

try:
    import torch  # noqa: F401 (the package's one requirement, checked once here)
except ImportError as error:
    raise ImportError('researchutils.pytorch needs PyTorch: pip install '
                      'researchutils[torch]') from error

_EXPORTS = {
    'optim.optimizers': ['ChainerMomentumSGD', 'ChainerAdam', 'ChainerRMSprop'],
    'optim.hooks': ['WeightDecay', 'GradientClipping'],
    'optim.schedules': ['ExponentialShift', 'LinearShift'],
    'optim.conversion': ['from_chainer_optimizer', 'from_chainer_schedule'],
    'weights.conversion': ['from_chainer'],
    'weights.loading': ['load_chainer_weights'],
    'weights.comparison': ['compare'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
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
    from researchutils.pytorch.weights.comparison import compare as compare
    from researchutils.pytorch.weights.conversion import from_chainer as from_chainer
    from researchutils.pytorch.weights.loading import load_chainer_weights as load_chainer_weights
