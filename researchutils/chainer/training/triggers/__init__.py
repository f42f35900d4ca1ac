"""researchutils.chainer.training.triggers: Chainer triggers.

:class:`ResumableEarlyStoppingTrigger` is the stop trigger of a
:class:`~researchutils.chainer.training.ChainerExperiment` with
``early_stopping_patience``. Loaded on first use.
"""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'resumable_early_stopping_trigger': ['ResumableEarlyStoppingTrigger'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
