"""ChainerExperiment: train, validate, checkpoint, resume and test a model from Parameters."""
import json
import math
import numbers
import os
import re
import sys
import warnings

import chainer
import numpy
from chainer.serializers import npz as chainer_npz
from chainer.training import extensions as chainer_extensions
from chainer.training import triggers

from researchutils import _files
from researchutils.chainer import serializers
from researchutils.chainer.data_loading import DataManager, RandomSampler, SequentialSampler
from researchutils.chainer.models.multi_node import setup_multi_node_optimizer
from researchutils.chainer.training import train_utils
from researchutils.chainer.training.parameters import Parameters
from researchutils.chainer.training.predictor import Predictor

_TRAINING_KEYS = {
    'num_epochs': 'number of epochs to train (required)',
    'optimizer_cls': 'a chainer.Optimizer subclass (required)',
    'optimizer_params': 'keyword arguments of optimizer_cls',
    'losses': 'name -> loss function on backend arrays (required)',
    'train_metrics': 'name -> metric function run in the closure',
    'val_metrics': 'name -> NumPy metric function for validation',
    'val_metric_keys': 'name -> keys of the metric arguments',
    'lr_sched_cls': 'a Chainer extension class, e.g. ExponentialShift',
    'lr_sched_params': 'keyword arguments of lr_sched_cls',
    'lr_sched_trigger': 'when the scheduler runs, default (1, "epoch")',
    'early_stopping_patience': 'epochs without improvement of val_score_key',
    'batch_size': 'batch size used by kfold',
}
_SNAPSHOT = re.compile(r'^snapshot_epoch_(\d+)$')
_STATE_FILE = 'run_state.json'
_BEST_MODEL = 'best_model.npz'
_FINAL_MODEL = 'final_model.npz'
_SETTINGS_FILE = 'experiment.json'


def _check_functions(training, key):
    functions = training.get(key, {})
    if not isinstance(functions, dict) or not all(callable(f) for f in functions.values()):
        raise TypeError('training parameter {!r} must be a dict from names to functions, got '
                        '{!r}'.format(key, functions))
    return functions


def _check_training(training, optim_builder):
    unknown = sorted(set(training) - set(_TRAINING_KEYS))
    if unknown:
        raise ValueError('unknown training parameters {}; the known ones are {}'.format(
            unknown, sorted(_TRAINING_KEYS)))
    for key in ('num_epochs', 'optimizer_cls', 'losses'):
        if key not in training:
            raise KeyError('the "training" parameters need {!r} ({}): add it to '
                           'fixed_params["training"]'.format(key, _TRAINING_KEYS[key]))
    epochs = training['num_epochs']
    if not isinstance(epochs, numbers.Integral) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError('training parameter num_epochs must be a positive integer, got '
                         '{!r}'.format(epochs))
    if (optim_builder is train_utils.create_optims_default_chainer
            and not (isinstance(training['optimizer_cls'], type)
                     and issubclass(training['optimizer_cls'], chainer.Optimizer))):
        raise TypeError('training parameter optimizer_cls must be a Chainer optimizer class such '
                        'as chainer.optimizers.Adam, got {!r}'.format(training['optimizer_cls']))
    for key in ('optimizer_params', 'lr_sched_params'):
        if not isinstance(training.get(key, {}), dict):
            raise TypeError('training parameter {!r} must be a dict, got {!r}'.format(
                key, training[key]))
    if not _check_functions(training, 'losses'):
        raise ValueError('training parameter losses must name at least one loss function')
    _check_functions(training, 'train_metrics')
    _check_functions(training, 'val_metrics')
    scheduler = training.get('lr_sched_cls')
    if scheduler is not None and not callable(scheduler):
        raise TypeError('training parameter lr_sched_cls must be an extension class or None, '
                        'got {!r}'.format(scheduler))
    patience = training.get('early_stopping_patience')
    if patience is not None and (not isinstance(patience, numbers.Integral) or patience < 1):
        raise ValueError('training parameter early_stopping_patience must be a positive integer '
                         'or None, got {!r}'.format(patience))


def _resolve_device(gpu_id):
    name = '@cupy:{}'.format(gpu_id) if isinstance(gpu_id, numbers.Integral) else gpu_id
    try:
        return chainer.get_device(name)
    except Exception as error:
        raise ValueError('gpu_ids entry {!r} is not a usable device ({}): use [] for the CPU, '
                         'GPU numbers with CuPy installed, or device names such as '
                         "'@numpy'".format(gpu_id, error)) from error


def _latest_snapshot(folder):
    if not os.path.isdir(folder):
        return None
    found = [(int(m.group(1)), name) for name in os.listdir(folder)
             for m in [_SNAPSHOT.match(name)] if m]
    return os.path.join(folder, max(found)[1]) if found else None


def _read_json(path):
    with open(path, encoding='utf-8') as stream:
        return json.load(stream)


def _improves(mode, new, old):
    """Whether ``new`` beats ``old`` for a val_score_mode ("lowest" or "highest")."""
    return new < old if mode == 'lowest' else new > old


def _replace_model(path, model):
    # The same npz file as save_model's, through the same atomic writer; but the best and
    # final models are meant to be replaced, which save_model never does.
    _files.write_atomically(path, lambda file: chainer_npz.save_npz(file, model))


class _ClosureUpdater(chainer.training.updaters.StandardUpdater):
    """Runs one ``model.closure`` step per iteration and reports its losses and metrics."""

    def __init__(self, iterator, model, optimizers, losses, metrics, prepare_batch):
        named = {'main': optimizers['default']}
        named.update((name, optimizer) for name, optimizer in optimizers.items()
                     if name != 'default')
        super().__init__(iterator, named)
        self._model = model
        self._closure_optimizers = optimizers
        self._losses = losses
        self._metrics = metrics
        self._prepare_batch = prepare_batch

    def update_core(self):
        iterator = self._iterators['main']
        batch = self._prepare_batch(iterator.next())
        metric_vals, loss_vals, _ = self._model.closure(
            self._model, batch, self._closure_optimizers, self._losses, self._metrics)
        observation = {'main/' + name: value for name, value in loss_vals.items()}
        observation.update(('main/' + name, value) for name, value in metric_vals.items())
        chainer.reporter.report(observation)
        if iterator.is_new_epoch:
            for optimizer in self._optimizers.values():
                optimizer.new_epoch(auto=True)


class _Validation(chainer.training.Extension):
    """Reports the validation metrics (``val/<name>``), aggregated over ChainerMN ranks."""

    trigger = (1, 'epoch')
    priority = chainer.training.PRIORITY_WRITER
    name = 'validation'

    def __init__(self, predictor, manager, metrics, metric_keys, comm):
        self._predictor = predictor
        self._manager = manager
        self._metrics = metrics
        self._metric_keys = metric_keys
        self._comm = comm

    def __call__(self, trainer):
        sums, count = self._predictor.metric_sums(self._manager, self._metrics,
                                                  self._metric_keys)
        names = sorted(sums)
        totals = numpy.array([sums[name] for name in names] + [count], dtype=numpy.float64)
        if self._comm is not None:
            totals = self._comm.mpi_comm.allreduce(totals)
        chainer.reporter.report({'val/' + name: float(totals[i] / totals[-1])
                                 for i, name in enumerate(names)})


class _BestModelSaver(chainer.training.Extension):
    """Saves the model whenever the monitored validation value improves (atomic npz)."""

    trigger = (1, 'epoch')
    priority = chainer.training.PRIORITY_EDITOR
    name = 'best_model'

    def __init__(self, model, monitor, mode, path):
        self._model = model
        self._monitor = monitor
        self._mode = mode
        self._path = path
        self.best_value = float('nan')
        self.best_epoch = 0

    def __call__(self, trainer):
        value = float(trainer.observation[self._monitor])
        if not math.isnan(self.best_value) and not _improves(self._mode, value, self.best_value):
            return
        _replace_model(self._path, self._model)
        self.best_value = value
        self.best_epoch = trainer.updater.epoch

    def serialize(self, serializer):
        self.best_value = float(serializer('best_value', self.best_value))
        self.best_epoch = int(serializer('best_epoch', self.best_epoch))


class _ResumableEarlyStopping(triggers.EarlyStoppingTrigger):
    """Chainer's EarlyStoppingTrigger whose counters survive a snapshot.

    A snapshot is taken at an epoch's end, after that epoch's validation but
    before this trigger has seen it (it looks at the next iteration's start),
    so the value still to be checked is saved too and checked on resume.
    """

    _trainer = None
    _pending = float('nan')

    def __call__(self, trainer):
        self._trainer = trainer
        if not math.isnan(self._pending) and self.monitor not in trainer.observation:
            trainer.observation[self.monitor] = self._pending
        self._pending = float('nan')
        return super().__call__(trainer)

    def serialize(self, serializer):
        pending = float('nan')
        if self._trainer is not None:
            pending = float(self._trainer.observation.get(self.monitor, pending))
        self._pending = float(serializer('pending', pending))
        self.best = float(serializer('best', self.best))
        self.count = int(serializer('count', self.count))
        self._interval_trigger.serialize(serializer['interval_trigger'])
        self._max_trigger.serialize(serializer['max_trigger'])


class ChainerExperiment(object):
    """Trains a model described by :class:`Parameters` with a Chainer Trainer.

    :meth:`run` builds the model (``model_cls(**params.model)``), its
    optimizers (``optim_builder(model, optimizer_cls, **optimizer_params)``)
    and a ``chainer.training.Trainer`` whose updater calls ``model.closure``
    once per batch; losses and training metrics are reported as
    ``main/<name>``. At each epoch end a :class:`Predictor` computes the NumPy
    ``val_metrics`` over the validation manager, reported as ``val/<name>``.
    Chainer extensions do the rest: a snapshot every ``checkpoint_freq``
    epochs, the best model by ``val_score_key`` (``best_model.npz``),
    LogReport, PlotReport (``loss.png``, ``metrics.png``; needs matplotlib),
    a ProgressBar when stdout is a terminal, the learning-rate scheduler
    ``lr_sched_cls(**lr_sched_params)``, and ``extensions``. Early stopping
    (``early_stopping_patience``) is the Trainer's stop trigger.

    Everything lives in ``<save_path>/<name>``. Running again in a folder
    with snapshots resumes from the last one (no epoch repeated or lost);
    running a finished experiment again returns its model without training.

    The "training" parameters: ``num_epochs``, ``optimizer_cls``, ``losses``
    (required); ``optimizer_params``, ``train_metrics``, ``val_metrics``,
    ``val_metric_keys``, ``lr_sched_cls``, ``lr_sched_params``,
    ``lr_sched_trigger``, ``early_stopping_patience``, ``batch_size``.

    Args:
        params (Parameters): The hyper-parameters.
        model_cls (type): An
            :class:`~researchutils.chainer.models.AbstractChainerNetwork`
            subclass (anything with ``closure`` and ``prepare_batch``).
        name (str): The experiment's folder name.
        save_path (str): The folder holding experiments.
        optim_builder (callable): Builds ``{"default": optimizer, ...}``.
        key_mapping (dict or None): Model argument to batch key for
            prediction; None maps the first argument of ``forward`` to
            ``"data"``.
        gpu_ids (list or None): ``None`` or ``[]``: CPU; ``[0]``: that GPU;
            several: a DataParallelChainerNetwork over them. Entries may also
            be device names (``'@numpy'``).
        checkpoint_freq (int): Epochs between snapshots.
        val_score_key (str or None): The validation metric choosing the best
            model and driving early stopping.
        val_score_mode (str): ``"lowest"`` or ``"highest"`` is best.
        comm: A ChainerMN communicator: each rank trains on its shard with a
            multi-node optimizer, validation metrics are aggregated over
            ranks, and only rank 0 writes files and runs ``extensions``.
        extensions (sequence): Extra Chainer extensions, each an extension or
            an ``(extension, trigger)`` pair.
        seed (int or None): Seeds the model's initial weights.

    Attributes:
        trainer (chainer.training.Trainer): The Trainer of the last
            :meth:`run` that trained (None before).

    Example:
        >>> experiment = ChainerExperiment(params, SimpleNet, name="example",
        ...                                save_path="./experiments")  # doctest: +SKIP
        >>> model = experiment.run(manager_train, manager_val)  # doctest: +SKIP
    """

    def __init__(self, params, model_cls, name, save_path,
                 optim_builder=train_utils.create_optims_default_chainer, key_mapping=None,
                 gpu_ids=None, checkpoint_freq=1, val_score_key=None, val_score_mode='lowest',
                 comm=None, extensions=(), seed=None):
        if not isinstance(params, Parameters):
            raise TypeError('params must be a Parameters object, got {!r}'.format(
                type(params).__name__))
        if not (isinstance(model_cls, type) and issubclass(model_cls, chainer.Link)
                and callable(getattr(model_cls, 'closure', None))):
            raise TypeError('model_cls must be an AbstractChainerNetwork subclass (a Chain with '
                            'closure and prepare_batch), got {!r}'.format(model_cls))
        if not isinstance(name, str) or not name:
            raise ValueError('name must be a non-empty string, got {!r}'.format(name))
        if not callable(optim_builder):
            raise TypeError('optim_builder must be callable, got {!r}'.format(optim_builder))
        if key_mapping is not None and (not isinstance(key_mapping, dict) or not key_mapping):
            raise ValueError('key_mapping must be None or a non-empty dict, got {!r}'.format(
                key_mapping))
        if (not isinstance(checkpoint_freq, numbers.Integral) or isinstance(checkpoint_freq, bool)
                or checkpoint_freq < 1):
            raise ValueError('checkpoint_freq must be a positive integer, got {!r}'.format(
                checkpoint_freq))
        if val_score_mode not in ('lowest', 'highest'):
            raise ValueError('val_score_mode must be "lowest" or "highest", got {!r}'.format(
                val_score_mode))
        self.params = params
        self.model_cls = model_cls
        self.name = name
        self.save_path = os.fspath(save_path)
        self.optim_builder = optim_builder
        self.key_mapping = None if key_mapping is None else dict(key_mapping)
        self.gpu_ids = list(gpu_ids or [])
        self.checkpoint_freq = int(checkpoint_freq)
        self.val_score_key = val_score_key
        self.val_score_mode = val_score_mode
        self.comm = comm
        self.extensions = list(extensions)
        self.seed = seed
        self.trainer = None
        for extension in self.extensions:
            target = extension[0] if isinstance(extension, tuple) else extension
            if not callable(target):
                raise TypeError('extensions must hold Chainer extensions or (extension, trigger) '
                                'pairs, got {!r}'.format(extension))
        self.devices = [_resolve_device(gpu_id) for gpu_id in self.gpu_ids]
        # Check each combination of a grid at once, not after the first trainings.
        for combination in params.grid():
            self._check_training(combination.training)

    def _check_training(self, training):
        _check_training(training, self.optim_builder)
        if self.val_score_key is not None and self.val_score_key not in training.get(
                'val_metrics', {}):
            raise ValueError('val_score_key {!r} is not one of the val_metrics {}: name one of '
                             'them'.format(self.val_score_key,
                                           sorted(training.get('val_metrics', {}))))
        if training.get('early_stopping_patience') is not None and self.val_score_key is None:
            raise ValueError('early_stopping_patience needs val_score_key, the validation metric '
                             'to watch')

    @property
    def output_dir(self):
        """str: ``<save_path>/<name>``, where this experiment writes."""
        return os.path.join(self.save_path, self.name)

    @property
    def _is_writer(self):
        return self.comm is None or self.comm.rank == 0

    def _replace(self, **changes):
        settings = dict(params=self.params, model_cls=self.model_cls, name=self.name,
                        save_path=self.save_path, optim_builder=self.optim_builder,
                        key_mapping=self.key_mapping, gpu_ids=self.gpu_ids,
                        checkpoint_freq=self.checkpoint_freq, val_score_key=self.val_score_key,
                        val_score_mode=self.val_score_mode, comm=self.comm,
                        extensions=self.extensions, seed=self.seed)
        settings.update(changes)
        return ChainerExperiment(**settings)

    def build_model(self):
        """Builds an untrained model from the "model" parameters, on the experiment's devices.

        Returns:
            chainer.Link: ``model_cls(**params.model)`` (wrapped in a
            DataParallelChainerNetwork for several devices).

        Raises:
            TypeError: The "model" parameters do not fit ``model_cls``.

        Example:
            >>> model = experiment.build_model()  # doctest: +SKIP
        """
        kwargs = self.params.model
        state = numpy.random.get_state()
        if self.seed is not None:
            numpy.random.seed(self.seed)
        try:
            model = self.model_cls(**kwargs)
        except TypeError as error:
            raise TypeError('the "model" parameters {!r} do not fit {}: {}'.format(
                kwargs, self.model_cls.__name__, error)) from error
        finally:
            numpy.random.set_state(state)
        devices = self._rank_devices()
        if len(devices) > 1:
            from researchutils.chainer.models import DataParallelChainerNetwork
            return DataParallelChainerNetwork(model, devices)
        model.to_device(devices[0])
        return model

    def _rank_devices(self):
        if not self.devices:
            return [chainer.get_device('@numpy')]
        if self.comm is not None:
            return [self.devices[self.comm.intra_rank % len(self.devices)]]
        return self.devices

    def _resolved_key_mapping(self):
        if self.key_mapping is not None:
            return self.key_mapping
        import inspect
        arguments = list(inspect.signature(self.model_cls.forward).parameters)[1:]
        if not arguments:
            raise ValueError('{}.forward takes no argument to map; pass key_mapping'.format(
                self.model_cls.__name__))
        return {arguments[0]: 'data'}

    def _shard(self, manager, pad):
        # Every rank builds the same permutation, so the shards are disjoint and,
        # with padding, equally long (the same number of iterations per rank).
        size, rank = self.comm.size, self.comm.rank
        order = numpy.random.RandomState(0).permutation(len(manager.dataset))
        if pad:
            per_rank = -(-len(order) // size)
            order = numpy.resize(order, per_rank * size)
        return manager.get_subset(numpy.array_split(order, size)[rank])

    def run(self, train, val=None):
        """Trains (or resumes) and returns the best model.

        Args:
            train (DataManager): The training batches.
            val (DataManager or None): The validation batches; without them
                no validation metrics, best model or early stopping.

        Returns:
            chainer.Link: The model with the best ``val_score_key`` weights
            (the final weights without validation scoring).

        Raises:
            KeyError, TypeError, ValueError: Bad configuration, before any
                training step, with what to fix.

        Example:
            >>> model = experiment.run(manager_train, manager_val)  # doctest: +SKIP
        """
        training = self.params.training
        self._check_training(training)
        if not isinstance(train, DataManager) or not (val is None or isinstance(val,
                                                                             DataManager)):
            raise TypeError('run(train, val) takes DataManagers, got {} and {}'.format(
                type(train).__name__, type(val).__name__))
        if self.val_score_key is not None and val is None:
            raise ValueError('val_score_key {!r} needs a validation manager: run(train, val)'
                             .format(self.val_score_key))
        train_keys = train.batch_keys()
        if 'data' not in train_keys:
            raise KeyError('the closure feeds batch["data"] to the model, but the training '
                           'batches have the keys {}: name the input "data"'.format(train_keys))
        model = self.build_model()
        predictor = Predictor(model, self._resolved_key_mapping())
        predictor.check_batch_keys(train_keys if val is None else val.batch_keys())
        state_path = os.path.join(self.output_dir, _STATE_FILE)
        if os.path.exists(state_path):
            return self._finished_model(model, val)
        devices = self._rank_devices()
        optimizers = self.optim_builder(model, training['optimizer_cls'],
                                        **training.get('optimizer_params', {}))
        if not isinstance(optimizers, dict) or 'default' not in optimizers:
            raise TypeError('optim_builder must return a dict with a "default" optimizer, got '
                            '{!r}'.format(optimizers))
        if self.comm is not None:
            # Starts every rank from rank 0's weights, so the first update already trains.
            optimizers['default'] = setup_multi_node_optimizer(optimizers['default'], model,
                                                               self.comm)
            train = self._shard(train, pad=True)
            val = None if val is None else self._shard(val, pad=False)

        def prepare(batch):
            return model.prepare_batch(batch, devices[0], devices[0])

        updater = _ClosureUpdater(train.get_iterator(repeat=True), model, optimizers,
                                  training['losses'], training.get('train_metrics', {}), prepare)
        trainer = chainer.training.Trainer(updater, self._stop_trigger(training),
                                           out=self.output_dir)
        self._extend(trainer, model, predictor, training, val)
        snapshot = _latest_snapshot(self.output_dir)
        if snapshot is not None:
            serializers.load_snapshot(snapshot, trainer)
            if self.comm is not None:
                # Every rank loaded the same weights: record them as known, so the
                # multi-node optimizer does not spend its first update on a broadcast.
                optimizers['default'].is_changed(optimizers['default'].target)
        self.trainer = trainer
        trainer.run()
        if self._is_writer:
            _replace_model(os.path.join(self.output_dir, _FINAL_MODEL), model)
            train_utils.atomic_write_text(state_path, train_utils.dumps_json(
                {'finished': True, 'epoch': updater.epoch}))
        if self.comm is not None:
            self.comm.mpi_comm.barrier()
        return self._finished_model(model, val)

    def _finished_model(self, model, val):
        best = os.path.join(self.output_dir, _BEST_MODEL)
        if self.val_score_key is not None and val is not None and os.path.exists(best):
            return serializers.load_model(best, model)
        return serializers.load_model(os.path.join(self.output_dir, _FINAL_MODEL), model)

    def _stop_trigger(self, training):
        epochs = (training['num_epochs'], 'epoch')
        patience = training.get('early_stopping_patience')
        if patience is None:
            return epochs
        return _ResumableEarlyStopping(
            check_trigger=(1, 'epoch'), monitor='val/' + self.val_score_key, patience=patience,
            mode='min' if self.val_score_mode == 'lowest' else 'max', max_trigger=epochs)

    def _extend(self, trainer, model, predictor, training, val):
        val_metrics = training.get('val_metrics', {})
        if val is not None and val_metrics:
            trainer.extend(_Validation(predictor, val, val_metrics,
                                       training.get('val_metric_keys'), self.comm))
        scheduler = training.get('lr_sched_cls')
        if scheduler is not None:
            extension = scheduler(**training.get('lr_sched_params', {}))
            if not callable(extension):
                raise TypeError('lr_sched_cls(**lr_sched_params) must give a Chainer extension, '
                                'got {!r}'.format(extension))
            trainer.extend(extension, trigger=training.get('lr_sched_trigger', (1, 'epoch')))
        if not self._is_writer:
            return
        if self.val_score_key is not None and val is not None:
            trainer.extend(_BestModelSaver(model, 'val/' + self.val_score_key,
                                           self.val_score_mode,
                                           os.path.join(self.output_dir, _BEST_MODEL)))
        trainer.extend(chainer_extensions.snapshot(filename='snapshot_epoch_{.updater.epoch}',
                                                  n_retains=2),
                       trigger=(self.checkpoint_freq, 'epoch'))
        trainer.extend(chainer_extensions.LogReport(trigger=(1, 'epoch')))
        self._extend_plots(trainer, training, val)
        if sys.stdout.isatty():
            trainer.extend(chainer_extensions.ProgressBar())
        for extension in self.extensions:
            if isinstance(extension, tuple):
                trainer.extend(extension[0], trigger=extension[1])
            else:
                trainer.extend(extension)

    def _extend_plots(self, trainer, training, val):
        if not chainer_extensions.PlotReport.available():
            warnings.warn('matplotlib is missing, so no loss.png or metrics.png is drawn: '
                          'pip install researchutils[plot]')
            return
        losses = ['main/' + name for name in training['losses']]
        trainer.extend(chainer_extensions.PlotReport(losses, 'epoch', file_name='loss.png'))
        metrics = ['main/' + name for name in training.get('train_metrics', {})]
        if val is not None:
            metrics += ['val/' + name for name in training.get('val_metrics', {})]
        if metrics:
            trainer.extend(chainer_extensions.PlotReport(metrics, 'epoch',
                                                         file_name='metrics.png'))

    def test(self, model, manager, metrics, metric_keys=None):
        """Returns dataset-level metrics of ``model`` over ``manager``.

        Args:
            model (chainer.Link): A trained model (from :meth:`run`).
            manager (DataManager): The test batches.
            metrics (dict): Name to NumPy metric function.
            metric_keys (dict or None): Name to argument keys (default
                ``("pred", "label")``).

        Returns:
            dict: Metric name to float (batch-size weighted mean).

        Example:
            >>> experiment.test(model, manager_test, {"MSE": mse})  # doctest: +SKIP
            {'MSE': 0.01}
        """
        predictor = Predictor(model, self._resolved_key_mapping())
        return predictor.evaluate(manager, metrics, metric_keys)

    def kfold(self, dataset, num_splits, metrics=None, shuffle=True, random_seed=0,
              val_split=None, sampler_cls=RandomSampler, n_process_augmentation=0):
        """Trains once per fold and returns each fold's test metrics.

        Fold ``i`` tests on the i-th of ``num_splits`` parts and trains on the
        others, in ``<name>/fold_<i>``; with ``val_split`` a fraction of the
        training part validates (best model, early stopping).

        Args:
            dataset (AbstractDataset): All examples.
            num_splits (int): Number of folds, at least 2.
            metrics (dict or None): Test metrics; default the val_metrics.
            shuffle (bool): Shuffle before splitting.
            random_seed (int): Seed of that shuffle.
            val_split (float or None): Fraction of each training part used for
                validation.
            sampler_cls (type): Sampler of the training batches.
            n_process_augmentation (int): Workers of the data managers.

        Returns:
            list of dict: The test metrics of each fold.

        Example:
            >>> scores = experiment.kfold(dataset, num_splits=5)  # doctest: +SKIP
        """
        training = self.params.training
        batch_size = training.get('batch_size')
        if batch_size is None:
            raise KeyError('kfold needs the training parameter "batch_size"')
        if not isinstance(num_splits, numbers.Integral) or not 2 <= num_splits <= len(dataset):
            raise ValueError('num_splits must be an integer from 2 to len(dataset) = {}, got '
                             '{!r}'.format(len(dataset), num_splits))
        if val_split is not None and not 0 < val_split < 1:
            raise ValueError('val_split must be None or in (0, 1), got {!r}'.format(val_split))
        metrics = training.get('val_metrics', {}) if metrics is None else metrics
        if not metrics:
            raise ValueError('kfold needs test metrics: pass metrics or set val_metrics')
        indices = numpy.arange(len(dataset))
        if shuffle:
            indices = numpy.random.RandomState(random_seed).permutation(indices)
        folds = numpy.array_split(indices, num_splits)
        results = []
        for i, test_indices in enumerate(folds):
            train_indices = numpy.concatenate([f for j, f in enumerate(folds) if j != i])
            val = None
            if val_split is not None:
                n_val = max(1, int(round(len(train_indices) * val_split)))
                val = DataManager(dataset.get_subset(train_indices[:n_val]), batch_size,
                                  n_process_augmentation=n_process_augmentation)
                train_indices = train_indices[n_val:]
            train = DataManager(dataset.get_subset(train_indices), batch_size,
                                sampler_cls=sampler_cls,
                                n_process_augmentation=n_process_augmentation)
            test = DataManager(dataset.get_subset(test_indices), batch_size,
                               sampler_cls=SequentialSampler,
                               n_process_augmentation=n_process_augmentation)
            fold = self._replace(name=os.path.join(self.name, 'fold_{}'.format(i)),
                                 val_score_key=self.val_score_key if val else None)
            model = fold.run(train, val)
            results.append(fold.test(model, test, metrics))
        return results

    def grid_search(self, train, val):
        """Trains one experiment per combination of the variable parameters.

        Combination ``k`` runs in ``<name>/grid_<k>``; each is scored by
        ``val_score_key`` on ``val``. The summary goes to
        ``<name>/grid_search.json``.

        Args:
            train (DataManager): The training batches.
            val (DataManager): The validation batches.

        Returns:
            dict: ``best_params`` (Parameters), ``best_score`` (float) and
            ``results``: ``(choice, score)`` for every combination.

        Example:
            >>> summary = experiment.grid_search(manager_train, manager_val)  # doctest: +SKIP
            >>> summary["best_params"].choice  # doctest: +SKIP
            {'training/optimizer_params/alpha': 0.01}
        """
        if self.val_score_key is None or val is None:
            raise ValueError('grid_search compares the val_score_key metric on val: set '
                             'val_score_key and pass a validation manager')
        results = []
        best = None
        for k, combination in enumerate(self.params.grid()):
            run = self._replace(params=combination,
                                name=os.path.join(self.name, 'grid_{}'.format(k)))
            model = run.run(train, val)
            metrics = combination.training['val_metrics']
            score = run.test(model, val, {self.val_score_key: metrics[self.val_score_key]},
                             combination.training.get('val_metric_keys'))[self.val_score_key]
            results.append((combination.choice, score))
            if best is None or _improves(self.val_score_mode, score, best[1]):
                best = (combination, score)
        if self._is_writer:
            train_utils.atomic_write_text(
                os.path.join(self.output_dir, 'grid_search.json'), train_utils.dumps_json({
                    'val_score_key': self.val_score_key,
                    'results': [{'choice': train_utils.to_json_value(choice, 'choice'),
                                 'score': score} for choice, score in results],
                    'best_choice': train_utils.to_json_value(best[0].choice, 'choice'),
                    'best_score': best[1]}))
        return {'best_params': best[0], 'best_score': best[1], 'results': results}

    def save(self):
        """Writes ``<name>/experiment.json``: the parameters, settings and model class.

        Classes and functions are written as ``"module:qualname"`` references
        (JSON, readable and editable); ``comm`` and ``extensions`` are not
        saved. :meth:`load` reads the file back.

        Returns:
            str: The path of the file (only rank 0 writes under ChainerMN).

        Raises:
            ValueError: A parameter cannot be saved (a lambda, a local
                function); the message names it.

        Example:
            >>> path = experiment.save()  # doctest: +SKIP
        """
        where = 'ChainerExperiment'
        settings = {
            'format': 'researchutils.ChainerExperiment/1',
            'name': self.name,
            'save_path': self.save_path,
            'model_cls': train_utils.object_reference(self.model_cls, 'model_cls'),
            'optim_builder': train_utils.object_reference(self.optim_builder, 'optim_builder'),
            'key_mapping': self.key_mapping,
            'gpu_ids': self.gpu_ids,
            'checkpoint_freq': self.checkpoint_freq,
            'val_score_key': self.val_score_key,
            'val_score_mode': self.val_score_mode,
            'seed': self.seed,
            'params': self.params.to_json(),
        }
        path = os.path.join(self.output_dir, _SETTINGS_FILE)
        if self._is_writer:
            train_utils.atomic_write_text(path, train_utils.dumps_json(
                train_utils.to_json_value(settings, where)))
        return path

    @classmethod
    def load(cls, path, comm=None, extensions=(), allowed_modules=()):
        """Restores an experiment written by :meth:`save`.

        Loading runs no code the file chooses: ``model_cls`` must be a Link
        class of a module already imported (or allowed), and every other
        reference must be of the kind its key expects, from Chainer, NumPy,
        researchutils, the model class's top-level package or
        ``allowed_modules`` (see
        :func:`~researchutils.chainer.training.resolve_reference`).

        Args:
            path (str): The ``experiment.json`` file or the folder holding it.
            comm: A ChainerMN communicator, as for the constructor.
            extensions (sequence): Extra extensions, as for the constructor.
            allowed_modules (list of str): Further modules the file may name
                (and import); only modules you trust.

        Returns:
            ChainerExperiment: Equal settings and parameters; its
            :meth:`run` resumes or returns the trained model.

        Example:
            >>> experiment = ChainerExperiment.load("./tmp/experiments/example")  # doctest: +SKIP
        """
        if os.path.isdir(path):
            path = os.path.join(path, _SETTINGS_FILE)
        data = _read_json(path)
        if data.get('format') != 'researchutils.ChainerExperiment/1':
            raise ValueError('{} is not a saved ChainerExperiment (format {!r})'.format(
                path, data.get('format')))
        where = os.path.basename(path)
        model_cls = train_utils.resolve_reference(data['model_cls'], where + ' model_cls',
                                                  base=chainer.Link,
                                                  allowed_modules=allowed_modules)
        allowed_modules = list(allowed_modules) + [model_cls.__module__.split('.')[0]]
        return cls(Parameters.from_json(data['params'], allowed_modules), model_cls,
                   data['name'], data['save_path'],
                   optim_builder=train_utils.resolve_reference(
                       data['optim_builder'], where + ' optim_builder',
                       allowed_modules=allowed_modules),
                   key_mapping=data['key_mapping'], gpu_ids=data['gpu_ids'],
                   checkpoint_freq=data['checkpoint_freq'], val_score_key=data['val_score_key'],
                   val_score_mode=data['val_score_mode'], comm=comm, extensions=extensions,
                   seed=data['seed'])
