"""Importing Optuna, the optional dependency of hyper-parameter search (the ``search`` extra).

Shared by :meth:`ChainerExperiment.search <researchutils.chainer.training.ChainerExperiment.search>`
and :class:`~researchutils.chainer.training.extensions.ChainerPruningExtension`; importing
this module imports nothing.
"""
import importlib
from types import ModuleType

EXTRA = 'pip install researchutils[search]'


def import_optuna(user: str) -> ModuleType:
    """Returns the optuna module, or raises an ImportError saying which extra brings it."""
    try:
        return importlib.import_module('optuna')
    except ImportError as error:
        raise ImportError('{} needs Optuna: {}'.format(user, EXTRA)) from error
