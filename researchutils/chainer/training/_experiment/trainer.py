"""The Trainer of one ChainerExperiment run: optimizers, updater, stop trigger, extensions.

Under ChainerMN each rank trains on its shard with a multi-node optimizer, and only rank 0
writes files and runs the user's extensions (but those with a true ``every_rank``). The Trainer
resumes from the folder's snapshot when there is one. Tests:
``tests/chainer/training/_experiment/test_trainer.py``.
"""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

import chainer
import numpy
from chainer.training import extensions as chainer_extensions

from researchutils.chainer import serializers
from researchutils.chainer.models.multi_node import setup_multi_node_optimizer
from researchutils.chainer.training._experiment import checks, files, progress, tracking
from researchutils.chainer.training._ranks import is_rank_zero
from researchutils.chainer.training._trees import Tree
from researchutils.chainer.training.extensions.best_model_saver import BestModelSaver
from researchutils.chainer.training.extensions.predictor_evaluator import PredictorEvaluator
from researchutils.chainer.training.extensions.preemption_snapshot import PreemptionSnapshot
from researchutils.chainer.training.extensions.stop_on_non_number import StopOnNonNumber
from researchutils.chainer.training.triggers.resumable_early_stopping_trigger import (
    ResumableEarlyStoppingTrigger,
)
from researchutils.chainer.training.updaters.closure_updater import ClosureUpdater

if TYPE_CHECKING:
    from researchutils.chainer.data_loading import DataManager
    from researchutils.chainer.training._experiment.protocol import Experiment
    from researchutils.chainer.training.predictor import Predictor


def shard(manager: DataManager, comm: Any, pad: bool) -> DataManager:
    """This ChainerMN rank's part of ``manager``'s examples."""
    # Every rank builds the same permutation, so the shards are disjoint and,
    # with padding, equally long (the same number of iterations per rank).
    size, rank = comm.size, comm.rank
    order = numpy.random.RandomState(0).permutation(len(manager.dataset))
    if pad:
        per_rank = -(-len(order) // size)
        order = numpy.resize(order, per_rank * size)
    return manager.get_subset(numpy.array_split(order, size)[rank])


def build_trainer(experiment: Experiment, model: chainer.Link, predictor: Predictor,
                  training: Tree, train: DataManager, val: DataManager | None,
                  device: chainer.backend.Device) -> chainer.training.Trainer:
    """A Trainer of ``model`` on ``train`` with every extension ``experiment`` asks for,
    resumed from the newest snapshot of the experiment's folder when there is one."""
    optimizers = experiment.optim_builder(model, training['optimizer_cls'],
                                          **training.get('optimizer_params', {}))
    if not isinstance(optimizers, dict) or 'default' not in optimizers:
        raise TypeError('optim_builder must return a dict with a "default" optimizer, got '
                        '{!r}'.format(optimizers))
    comm = experiment.comm
    if comm is not None:
        # Starts every rank from rank 0's weights, so the first update already trains.
        optimizers['default'] = setup_multi_node_optimizer(optimizers['default'], model, comm)
        train = shard(train, comm, pad=True)
        val = None if val is None else shard(val, comm, pad=False)
    updater = ClosureUpdater(train.get_iterator(repeat=True), model, optimizers,
                             training['losses'], training.get('train_metrics', {}), device)
    trainer = chainer.training.Trainer(updater, _stop_trigger(experiment, training),
                                       out=experiment.output_dir)
    printing = _extend(trainer, experiment, model, predictor, training, val)
    snapshot = files.resume_snapshot(experiment.output_dir, comm)
    if snapshot is not None:
        with files.refused_resume(experiment.output_dir, snapshot):
            serializers.load_snapshot(snapshot, trainer)
        progress.skip_printed(trainer, printing)
        progress.say(comm, '{}: resuming from {} ({} of {} epochs trained)'.format(
            experiment.output_dir, os.path.basename(snapshot), updater.epoch,
            checks.with_epochs(training, experiment.n_epochs)['num_epochs']))
        if comm is not None:
            # Every rank loaded the same weights: record them as known, so the multi-node
            # optimizer does not spend its first update on a broadcast.
            optimizers['default'].is_changed(optimizers['default'].target)
    return trainer


def _stop_trigger(experiment: Experiment, training: Tree
                  ) -> tuple[int, str] | ResumableEarlyStoppingTrigger:
    epochs = (checks.with_epochs(training, experiment.n_epochs)['num_epochs'],
              'epoch')
    patience = training.get('early_stopping_patience')
    if patience is None:
        return epochs
    assert experiment.val_score_key is not None  # check_training refuses patience without it
    return ResumableEarlyStoppingTrigger(
        check_trigger=(1, 'epoch'), monitor='val/' + experiment.val_score_key,
        patience=patience, mode='min' if experiment.val_score_mode == 'lowest' else 'max',
        max_trigger=epochs)


def _extend(trainer: chainer.training.Trainer, experiment: Experiment,
            model: chainer.Link, predictor: Predictor, training: Tree,
            val: DataManager | None) -> list[Any]:
    """Adds the run's extensions to ``trainer``; those that print on rank 0 (the progress
    and the user's, for :func:`progress.skip_printed`)."""
    if experiment.stop_on_non_number:
        trainer.extend(StopOnNonNumber())
    val_metrics = training.get('val_metrics', {})
    if val is not None and val_metrics:
        trainer.extend(PredictorEvaluator(predictor, val, val_metrics,
                                          training.get('val_metric_keys'), experiment.comm))
    if experiment.preemption_snapshot:
        # On every rank: under ChainerMN the ranks agree on stopping, and each writes its
        # own snapshot. The names are those of the epoch-end snapshots, with the epochs
        # finished so far: a signal mid-epoch replaces the last epoch's snapshot by a
        # newer state, and the experiment's resume (files.resume_snapshot) finds it.
        trainer.extend(PreemptionSnapshot(
            filename=(files.SNAPSHOT_NAME if experiment.comm is None
                      else files.RANK_SNAPSHOT_NAME), comm=experiment.comm))
    scheduler = training.get('lr_sched_cls')
    if scheduler is not None:
        extension = scheduler(**training.get('lr_sched_params', {}))
        if not callable(extension):
            raise TypeError('lr_sched_cls(**lr_sched_params) must give a Chainer extension, '
                            'got {!r}'.format(extension))
        trainer.extend(extension, trigger=training.get('lr_sched_trigger', (1, 'epoch')))
    # The user's extensions run on rank 0, but those that talk to the other ranks (every_rank)
    # run on each.
    every_rank = [extension for extension in experiment.extensions if getattr(
        extension[0] if isinstance(extension, tuple) else extension, 'every_rank', False)]
    for extension in every_rank:
        _extend_one(trainer, extension)
    if not is_rank_zero(experiment.comm):
        return []
    if experiment.val_score_key is not None and val is not None:
        trainer.extend(BestModelSaver(
            model, 'val/' + experiment.val_score_key, experiment.val_score_mode,
            os.path.join(experiment.output_dir, files.BEST_MODEL)))
    trainer.extend(chainer_extensions.snapshot(filename=files.SNAPSHOT_NAME, n_retains=2),
                   trigger=(experiment.checkpoint_freq, 'epoch'))
    trainer.extend(chainer_extensions.LogReport(trigger=(1, 'epoch')))
    for tracker in tracking.extensions(experiment):
        trainer.extend(tracker, trigger=(1, 'epoch'))
    _extend_plots(trainer, training, val)
    shown = _reported(training, val)
    printing = [progress.progress_extension(['epoch'] + shown + ['elapsed_time'])]
    trainer.extend(printing[0])
    for extension in experiment.extensions:
        if not any(extension is other for other in every_rank):
            _extend_one(trainer, extension)
    return printing + list(experiment.extensions)


def _reported(training: Tree, val: DataManager | None) -> list[str]:
    """The LogReport keys of the losses and metrics a run reports each epoch."""
    reported = ['main/' + name for name in list(training['losses'])
                + list(training.get('train_metrics', {}))]
    if val is not None:
        reported += ['val/' + name for name in training.get('val_metrics', {})]
    return reported


def _extend_one(trainer: chainer.training.Trainer, extension: Any) -> None:
    if isinstance(extension, tuple):
        trainer.extend(extension[0], trigger=extension[1])
    else:
        trainer.extend(extension)


def _extend_plots(trainer: chainer.training.Trainer, training: Tree,
                  val: DataManager | None) -> None:
    if not chainer_extensions.PlotReport.available():
        warnings.warn('matplotlib is missing, so no loss.png or metrics.png is drawn: '
                      'pip install researchutils[plot]')
        return
    losses = ['main/' + name for name in training['losses']]
    trainer.extend(chainer_extensions.PlotReport(losses, 'epoch', file_name='loss.png'))
    metrics = _reported(training, val)[len(losses):]
    if metrics:
        trainer.extend(chainer_extensions.PlotReport(metrics, 'epoch', file_name='metrics.png'))
