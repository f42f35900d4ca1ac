"""researchutils.chainer.training.updaters: Chainer updaters.

:class:`ClosureUpdater` trains an
:class:`~researchutils.chainer.models.AbstractChainerNetwork` through its
one-step ``closure``; :class:`~researchutils.chainer.training.ChainerExperiment`
runs its Trainer with it. Loaded on first use.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'closure_updater': ['ClosureUpdater'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.training.updaters.closure_updater import (
        ClosureUpdater as ClosureUpdater,
    )
