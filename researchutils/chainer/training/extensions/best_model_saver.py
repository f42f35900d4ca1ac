"""BestModelSaver: keeps the model of the best validation score in one npz file.

It writes through :func:`researchutils.chainer.serializers.save_model` (atomic, replacing the
older file) and orders scores with ``training/_scores``, as the experiment does; it imports
nothing of the experiment. Tests: ``tests/chainer/training/extensions/test_best_model_saver.py``.
"""
from __future__ import annotations

import math
import os

import chainer

from researchutils._checks import check_path
from researchutils.chainer.serializers import save_model
from researchutils.chainer.training._scores import check_val_score_mode, improves


class BestModelSaver(chainer.training.Extension):
    """Saves the model whenever the monitored value improves (an atomic npz write).

    At each epoch end it reads ``trainer.observation[monitor]`` (reported by
    a validation extension before it runs: its priority is
    ``PRIORITY_EDITOR``) and, when the value beats the best so far, writes
    the model to ``path``, replacing the older file. The file loads with
    :func:`~researchutils.chainer.serializers.load_model`. The best value and
    its epoch are serialized, so a resumed run keeps comparing against them.

    Args:
        model (chainer.Link): The model to save.
        monitor (str): The observation key, e.g. ``"val/MSE"``.
        mode (str): ``"lowest"`` or ``"highest"`` is best.
        path (str or os.PathLike): The npz file.

    Raises:
        TypeError, ValueError: An argument is wrong (an empty ``monitor``, a ``path``
            that is a folder or holds a NUL byte, ...); the first wrong one, in the
            signature's order, is named.

    Attributes:
        best_value (float): The best value seen (NaN before the first).
        best_epoch (int): The epoch it was seen at (0 before the first).

    Example:
        >>> import chainer.links as L
        >>> saver = BestModelSaver(L.Linear(2, 1), 'val/MSE', 'lowest', 'best_model.npz')
        >>> trainer.extend(saver)  # doctest: +SKIP
        >>> saver.best_value, saver.best_epoch
        (nan, 0)
    """

    trigger = (1, 'epoch')
    priority = chainer.training.PRIORITY_EDITOR
    name = 'best_model'

    def __init__(self, model: chainer.Link, monitor: str, mode: str,
                 path: str | os.PathLike[str]) -> None:
        # Checked in the signature's order, so the first wrong argument is the one named.
        if not isinstance(model, chainer.Link):
            raise TypeError('model must be a chainer.Link, got {!r}'.format(
                type(model).__name__))
        if not isinstance(monitor, str) or not monitor:
            raise (ValueError if monitor == '' else TypeError)(
                'monitor must be an observation key such as "val/MSE", got {!r}'.format(monitor))
        self._model = model
        self._monitor = monitor
        self._mode = check_val_score_mode(mode, 'mode')
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError('path must be the npz file to write (str or os.PathLike), got '
                            '{!r}'.format(path))
        self._path = check_path(path, 'path')
        if os.path.isdir(self._path):
            raise ValueError('path must be the npz file to write, got {!r}, a folder'.format(
                self._path))
        self.best_value = float('nan')
        self.best_epoch = 0

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        value = float(trainer.observation[self._monitor])
        if not math.isnan(self.best_value) and not improves(self._mode, value, self.best_value):
            return
        save_model(self._path, self._model, overwrite=True)
        self.best_value = value
        self.best_epoch = trainer.updater.epoch

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        self.best_value = float(serializer('best_value', self.best_value))
        self.best_epoch = int(serializer('best_epoch', self.best_epoch))
