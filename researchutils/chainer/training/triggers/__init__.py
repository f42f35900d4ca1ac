"""researchutils.chainer.training.triggers: Chainer triggers.

:class:`ResumableEarlyStoppingTrigger` is the stop trigger of a
:class:`~researchutils.chainer.training.ChainerExperiment` with
``early_stopping_patience``. Loaded on first use.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'resumable_early_stopping_trigger': ['ResumableEarlyStoppingTrigger'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.training.triggers.resumable_early_stopping_trigger import (
        ResumableEarlyStoppingTrigger as ResumableEarlyStoppingTrigger,
    )
