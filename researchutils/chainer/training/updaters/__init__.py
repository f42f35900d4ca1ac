"""researchutils.chainer.training.updaters: Chainer updaters.

:class:`ClosureUpdater` trains an
:class:`~researchutils.chainer.models.AbstractChainerNetwork` through its
one-step ``closure``; :class:`~researchutils.chainer.training.ChainerExperiment`
runs its Trainer with it.
"""
from researchutils.chainer.training.updaters.closure_updater import ClosureUpdater

__all__ = ['ClosureUpdater']
