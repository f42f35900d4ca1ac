"""Chainer's optimizers, hooks and schedules in torch (loaded on first use).

:mod:`~researchutils.pytorch.optim.optimizers` holds the rules torch lacks,
:mod:`~researchutils.pytorch.optim.hooks` Chainer's hooks as step pre-hooks,
:mod:`~researchutils.pytorch.optim.schedules` ExponentialShift and LinearShift, and
:mod:`~researchutils.pytorch.optim.conversion` the carrying over of a Chainer optimizer and
its schedules, state and all. The names are also at :mod:`researchutils.pytorch`.

Tests: ``tests/pytorch/optim/``.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'optimizers': ['ChainerMomentumSGD', 'ChainerAdam', 'ChainerRMSprop'],
    'hooks': ['WeightDecay', 'GradientClipping'],
    'schedules': ['ExponentialShift', 'LinearShift'],
    'conversion': ['from_chainer_optimizer', 'from_chainer_schedule'],
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
