"""researchutils.chainer.training.triggers: Chainer triggers.

:class:`ResumableEarlyStoppingTrigger` is the stop trigger of a
:class:`~researchutils.chainer.training.ChainerExperiment` with
``early_stopping_patience``.
"""
from researchutils.chainer.training.triggers.resumable_early_stopping_trigger import (
    ResumableEarlyStoppingTrigger,
)

__all__ = ['ResumableEarlyStoppingTrigger']
