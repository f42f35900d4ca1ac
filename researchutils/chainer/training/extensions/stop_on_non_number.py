"""StopOnNonNumber: Chainer's FailOnNonNumber, saying where training diverged."""
from __future__ import annotations

import chainer
from chainer.training import extensions as chainer_extensions


class TrainingDiverged(RuntimeError):
    """Training stopped by :class:`StopOnNonNumber`: a weight became NaN or infinite.

    A RuntimeError, as Chainer's ``FailOnNonNumber`` raises; Chainer's error
    is its ``__cause__``.

    Example:
        >>> issubclass(TrainingDiverged, RuntimeError)
        True
    """


class StopOnNonNumber(chainer_extensions.FailOnNonNumber):
    """Chainer's FailOnNonNumber, saying where the run diverged and how to train on anyway.

    It runs first at every iteration (its priority is above
    ``PRIORITY_WRITER``), before any validation, best-model saver or
    snapshot of that iteration, so no file is written from diverged weights.
    It checks the weights, as Chainer's does, not the loss: all ChainerMN
    ranks hold the same weights and so stop together, and an infinite loss
    that loss scaling skips does not stop the run.

    Raises:
        TrainingDiverged: From the Trainer's ``run``, naming the iteration,
            its epoch and the ``main/`` values it reported.

    Example:
        >>> trainer.extend(StopOnNonNumber())  # doctest: +SKIP
        >>> StopOnNonNumber.priority > chainer.training.PRIORITY_WRITER
        True
    """

    priority = chainer.training.PRIORITY_WRITER + 1

    def __call__(self, trainer: chainer.training.Trainer) -> None:
        try:
            super().__call__(trainer)
        except RuntimeError as error:
            updater = trainer.updater
            # The iteration just done belongs to the epoch it ended, or to the next one.
            epoch = updater.epoch if updater.is_new_epoch else updater.epoch + 1
            losses = ', '.join('{}={}'.format(key, value)
                               for key, value in sorted(trainer.observation.items())
                               if key.startswith('main/'))
            raise TrainingDiverged(
                'training diverged: a weight is NaN or infinite after iteration {} (epoch {}); '
                'this iteration reported {}. The snapshots and best model of earlier epochs '
                'are kept. Pass stop_on_non_number=False to ChainerExperiment to train on. '
                '({})'.format(updater.iteration, epoch, losses or 'nothing', error)) from error
