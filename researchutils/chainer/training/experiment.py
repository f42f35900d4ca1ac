"""ChainerExperiment: train, validate, checkpoint, resume and test a model from Parameters."""
import json
import math
import numbers
import os
import re
import stat
import sys
import warnings

import chainer
import numpy
from chainer.serializers import npz as chainer_npz
from chainer.training import extensions as chainer_extensions
from chainer.training import triggers

from researchutils import _files
from researchutils._checks import (
    check_bool,
    check_devices,
    check_int,
    check_positive_int,
    check_probability,
    check_seed,
)
from researchutils.chainer import serializers
from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.models.multi_node import setup_multi_node_optimizer
from researchutils.chainer.training import train_utils
from researchutils.chainer.training.parameters import Parameters, _merge
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
    'batch_size': 'kept for Delira scripts that read it; the managers set the batch size',
}
_SNAPSHOT = re.compile(r'^snapshot_epoch_([0-9]+)$')
_STATE_FILE = 'run_state.json'
_BEST_MODEL = 'best_model.npz'
_FINAL_MODEL = 'final_model.npz'
_SETTINGS_FILE = 'experiment.json'
_DEFAULT_NAME = 'UnnamedExperiment'  # Delira 0.4.1's


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
    check_positive_int(training['num_epochs'], 'training parameter num_epochs')
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
    check_positive_int(training.get('early_stopping_patience'),
                       'training parameter early_stopping_patience', allow_none=True)


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
             for m in [_SNAPSHOT.match(name)]
             if m and stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode)]
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


# kfold's splits -------------------------------------------------------------

_MANAGER_SETTINGS = ('batch_size', 'n_process_augmentation', 'transforms', 'sampler_cls',
                     'sampler_kwargs', 'drop_last', 'seed')
_DELIRA_MANAGER_SETTINGS = {'sampler': 'sampler_cls', 'sampling_kwargs': 'sampler_kwargs'}


def _manager_changes(kwargs, argument):
    """kfold's ``train_kwargs`` / ``test_kwargs`` as DataManager.replace arguments."""
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise TypeError('{} must be None or a dict of DataManager settings, got {!r}'.format(
            argument, kwargs))
    changes = {_DELIRA_MANAGER_SETTINGS.get(key, key): value for key, value in kwargs.items()}
    unknown = sorted(set(changes) - set(_MANAGER_SETTINGS))
    if unknown:
        raise TypeError('{} has the keys {}, which are no DataManager settings; the settings '
                        'are {}'.format(argument, unknown, list(_MANAGER_SETTINGS)))
    return changes


def _labels(dataset, label_key):
    """Every example's ``label_key`` value (each loaded once), as one array."""
    labels = []
    for index in range(len(dataset)):
        example = dataset[index]
        if label_key not in example:
            raise KeyError('split_type="stratified" stratifies on label_key {!r}, but '
                           'dataset[{}] has the keys {}'.format(label_key, index,
                                                                sorted(example)))
        label = numpy.asarray(example[label_key])
        if label.size != 1:
            raise ValueError('split_type="stratified" needs one label per example, but '
                             'dataset[{}][{!r}] has the shape {}'.format(index, label_key,
                                                                        label.shape))
        labels.append(label.reshape(()).item())
    return numpy.asarray(labels)


def _label_grouped(order, labels):
    """``order`` sorted by label, keeping its own order within each label."""
    return order[numpy.argsort(labels[order], kind='stable')]


def _kfold_splits(size, num_splits, shuffle, seed, labels):
    """Yields ``(train_indices, test_indices)``, each sorted, for every fold."""
    order = numpy.arange(size)
    if shuffle:
        order = numpy.random.RandomState(seed).permutation(size)
    if labels is None:
        parts = numpy.array_split(order, num_splits)
    else:
        # Dealt round-robin from the label-grouped order: each label's count in a part
        # is the floor or the ceiling of its share.
        grouped = _label_grouped(order, labels)
        parts = [grouped[i::num_splits] for i in range(num_splits)]
    for i, part in enumerate(parts):
        rest = numpy.concatenate([p for j, p in enumerate(parts) if j != i])
        yield numpy.sort(rest), numpy.sort(part)


def _validation_positions(train_indices, val_split, seed, labels):
    """Positions in ``train_indices`` of the validation part (``ceil(val_split * n)``)."""
    size = len(train_indices)
    n_val = int(math.ceil(val_split * size))
    if not 1 <= n_val < size:
        raise ValueError('val_split={} of a training part of {} examples leaves {} to train '
                         'on: lower val_split or num_splits'.format(val_split, size,
                                                                    size - n_val))
    order = numpy.random.RandomState(seed).permutation(size)
    if labels is None:
        return numpy.sort(order[:n_val])
    # Evenly spaced picks through the label-grouped order: position j is picked when
    # the running quota j * n_val / size passes an integer, n_val picks in all.
    grouped = _label_grouped(order, labels)
    steps = numpy.arange(size)
    picked = (steps + 1) * n_val // size > steps * n_val // size
    return numpy.sort(grouped[picked])


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


class _Diverged(RuntimeError):
    """Training stopped by _StopOnNonNumber (a RuntimeError, as Chainer's FailOnNonNumber)."""


class _StopOnNonNumber(chainer_extensions.FailOnNonNumber):
    """Chainer's FailOnNonNumber, saying where the run diverged and how to train on anyway.

    It runs first at every iteration (before validation, the best-model saver and
    the snapshot), so no file is written from diverged weights. It checks the
    weights, as Chainer's does, not the loss: all ChainerMN ranks hold the same
    weights and so stop together, and an infinite loss that loss scaling skips
    does not stop the run.
    """

    priority = chainer.training.PRIORITY_WRITER + 1

    def __call__(self, trainer):
        try:
            super().__call__(trainer)
        except RuntimeError as error:
            updater = trainer.updater
            # The iteration just done belongs to the epoch it ended, or to the next one.
            epoch = updater.epoch if updater.is_new_epoch else updater.epoch + 1
            losses = ', '.join('{}={}'.format(key, value)
                               for key, value in sorted(trainer.observation.items())
                               if key.startswith('main/'))
            raise _Diverged(
                'training diverged: a weight is NaN or infinite after iteration {} (epoch {}); '
                'this iteration reported {}. The snapshots and best model of earlier epochs '
                'are kept. Pass stop_on_non_number=False to ChainerExperiment to train on. '
                '({})'.format(updater.iteration, epoch, losses or 'nothing', error)) from error


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
    (``early_stopping_patience``) is the Trainer's stop trigger. A weight
    that turns NaN or infinite (a NaN or infinite loss) stops the run with a
    RuntimeError naming the iteration and epoch (Chainer's
    ``FailOnNonNumber``), before any file is written from those weights:
    the earlier snapshots and the best model are kept.

    Everything lives in ``<save_path>/<name>``. Running again in a folder
    with snapshots resumes from the last one (no epoch repeated or lost);
    running a finished experiment again returns its model without training.
    (Delira 0.4.1 wrote each run into a new timestamped folder below
    ``<save_path>/<name>``; the fixed folder is what makes resuming work.)

    The positional order of the arguments is Delira 0.4.1's
    ``BaseExperiment(params, model_cls, n_epochs, name, save_path,
    key_mapping, val_score_key, optim_builder, checkpoint_freq)``; the others
    are keyword-only.

    The "training" parameters: ``num_epochs`` (unless ``n_epochs`` is given),
    ``optimizer_cls``, ``losses`` (required); ``optimizer_params``,
    ``train_metrics``, ``val_metrics``, ``val_metric_keys``, ``lr_sched_cls``,
    ``lr_sched_params``, ``lr_sched_trigger``, ``early_stopping_patience``,
    ``batch_size``.

    Args:
        params (Parameters): The hyper-parameters.
        model_cls (type): An
            :class:`~researchutils.chainer.models.AbstractChainerNetwork`
            subclass (anything with ``closure`` and ``prepare_batch``).
        n_epochs (int or None): Epochs to train, instead of the training
            parameter ``num_epochs`` (which may then be left out).
        name (str or None): The experiment's folder name; None:
            ``"UnnamedExperiment"``.
        save_path (str or None): The folder holding experiments; None: the
            working directory (when the experiment is made).
        key_mapping (dict or None): Model argument to batch key for
            prediction; None maps the first argument of ``forward`` to
            ``"data"``.
        val_score_key (str or None): The validation metric choosing the best
            model and driving early stopping.
        optim_builder (callable): Builds ``{"default": optimizer, ...}``.
        checkpoint_freq (int): Epochs between snapshots.
        gpu_ids (list, int or None): ``None`` or ``[]``: CPU; ``[0]`` or
            ``0``: that GPU (an int is one device); several: a
            DataParallelChainerNetwork over them. Entries may also be device
            names (``'@numpy'``). A bool, float or negative number is refused.
        val_score_mode (str): ``"lowest"`` or ``"highest"`` is best.
        comm: A ChainerMN communicator: each rank trains on its shard with a
            multi-node optimizer, validation metrics are aggregated over
            ranks, and only rank 0 writes files and runs ``extensions``.
        extensions (sequence): Extra Chainer extensions, each an extension or
            an ``(extension, trigger)`` pair.
        seed (int or None): Seeds the model's initial weights; an integer
            in ``[0, 2**32)``.
        stop_on_non_number (bool): Stop training when a weight becomes NaN
            or infinite (default). False trains on whatever the weights become.

    Attributes:
        trainer (chainer.training.Trainer): The Trainer of the last
            :meth:`run` that trained (None before).

    Example:
        >>> experiment = ChainerExperiment(params, SimpleNet, name="example",
        ...                                save_path="./experiments")  # doctest: +SKIP
        >>> model = experiment.run(manager_train, manager_val)  # doctest: +SKIP
    """

    def __init__(self, params, model_cls, n_epochs=None, name=None, save_path=None,
                 key_mapping=None, val_score_key=None,
                 optim_builder=train_utils.create_optims_default_chainer, checkpoint_freq=1, *,
                 gpu_ids=None, val_score_mode='lowest', comm=None, extensions=(), seed=None,
                 stop_on_non_number=True):
        if not isinstance(params, Parameters):
            raise TypeError('params must be a Parameters object, got {!r}'.format(
                type(params).__name__))
        if not (isinstance(model_cls, type) and issubclass(model_cls, chainer.Link)
                and callable(getattr(model_cls, 'closure', None))):
            raise TypeError('model_cls must be an AbstractChainerNetwork subclass (a Chain with '
                            'closure and prepare_batch), got {!r}'.format(model_cls))
        if n_epochs is not None and (not isinstance(n_epochs, numbers.Integral)
                                     or isinstance(n_epochs, bool)):
            raise TypeError('n_epochs must be a positive integer or None, got {!r}: as in Delira '
                            '0.4.1 the third argument is n_epochs, so give name and save_path '
                            'by keyword'.format(n_epochs))
        if n_epochs is not None and n_epochs < 1:
            raise ValueError('n_epochs must be a positive integer or None, got {!r}'.format(
                n_epochs))
        name = _DEFAULT_NAME if name is None else name
        if not isinstance(name, str) or not name:
            raise ValueError('name must be a non-empty string, got {!r}'.format(name))
        if not callable(optim_builder):
            raise TypeError('optim_builder must be callable, got {!r}'.format(optim_builder))
        if key_mapping is not None and (not isinstance(key_mapping, dict) or not key_mapping):
            raise ValueError('key_mapping must be None or a non-empty dict, got {!r}'.format(
                key_mapping))
        checkpoint_freq = check_positive_int(checkpoint_freq, 'checkpoint_freq')
        if val_score_mode not in ('lowest', 'highest'):
            raise ValueError('val_score_mode must be "lowest" or "highest", got {!r}'.format(
                val_score_mode))
        self.params = params
        self.model_cls = model_cls
        self.n_epochs = None if n_epochs is None else int(n_epochs)
        self.name = name
        self.save_path = os.path.abspath('.') if save_path is None else os.fspath(save_path)
        self.optim_builder = optim_builder
        self.key_mapping = None if key_mapping is None else dict(key_mapping)
        self.gpu_ids = check_devices(gpu_ids, 'gpu_ids')
        self.checkpoint_freq = int(checkpoint_freq)
        self.val_score_key = val_score_key
        self.val_score_mode = val_score_mode
        self.comm = comm
        self.extensions = list(extensions)
        self.seed = check_seed(seed)
        self.stop_on_non_number = check_bool(stop_on_non_number, 'stop_on_non_number')
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

    def _with_epochs(self, training):
        """The training parameters with ``n_epochs``, when given, as ``num_epochs``."""
        if self.n_epochs is None:
            return training
        return dict(training, num_epochs=self.n_epochs)

    def _check_training(self, training):
        _check_training(self._with_epochs(training), self.optim_builder)
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
        settings = dict(params=self.params, model_cls=self.model_cls, n_epochs=self.n_epochs,
                        name=self.name,
                        save_path=self.save_path, optim_builder=self.optim_builder,
                        key_mapping=self.key_mapping, gpu_ids=self.gpu_ids,
                        checkpoint_freq=self.checkpoint_freq, val_score_key=self.val_score_key,
                        val_score_mode=self.val_score_mode, comm=self.comm,
                        extensions=self.extensions, seed=self.seed,
                        stop_on_non_number=self.stop_on_non_number)
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
        epochs = (self._with_epochs(training)['num_epochs'], 'epoch')
        patience = training.get('early_stopping_patience')
        if patience is None:
            return epochs
        return _ResumableEarlyStopping(
            check_trigger=(1, 'epoch'), monitor='val/' + self.val_score_key, patience=patience,
            mode='min' if self.val_score_mode == 'lowest' else 'max', max_trigger=epochs)

    def _extend(self, trainer, model, predictor, training, val):
        if self.stop_on_non_number:
            trainer.extend(_StopOnNonNumber())
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

    def _evaluate(self, model, manager, metrics, metric_keys=None):
        """Dataset-level metrics of ``model`` over ``manager``, keeping no prediction."""
        return Predictor(model, self._resolved_key_mapping()).evaluate(manager, metrics,
                                                                       metric_keys)

    def test(self, network, test_data, metrics, metric_keys=None, verbose=False):
        """Predicts over ``test_data`` and returns the predictions and metrics.

        Args:
            network (chainer.Link): A trained model (from :meth:`run`).
            test_data (DataManager): The test batches.
            metrics (dict): Name to NumPy metric function.
            metric_keys (dict or None): Name to argument keys (default
                ``("pred", "label")``).
            verbose (bool): Show the progress (batches done) on stderr.

        Returns:
            tuple: ``(predictions, metrics)``: each output of the model as one
            NumPy array over ``test_data`` in its order, and each metric as a
            float, averaged over batches weighted by their size (Delira gave
            one value per batch).

        Example:
            >>> preds, metrics = experiment.test(model, manager_test,
            ...                                  {"MSE": mse})  # doctest: +SKIP
            >>> preds["pred"].shape, metrics  # doctest: +SKIP
            ((500, 10), {'MSE': 0.01})
        """
        predictor = Predictor(network, self._resolved_key_mapping())
        return predictor.predict_all(test_data, metrics, metric_keys, verbose=verbose)

    def kfold(self, data, metrics, num_epochs=None, num_splits=None, shuffle=False,
              random_seed=None, split_type='random', val_split=0.2, label_key='label',
              train_kwargs=None, metric_keys=None, test_kwargs=None, params=None,
              verbose=False):
        """Trains once per fold and tests each fold's model on its held-out part.

        Fold ``i`` tests on the i-th of ``num_splits`` parts of ``data`` and
        trains on the others, in ``<name>/fold_<i>``. With ``val_split`` that
        fraction of the training part validates (best model by
        ``val_score_key``, early stopping). ``split_type="random"`` cuts the
        (shuffled, with ``shuffle``) indices into contiguous parts;
        ``"stratified"`` reads every example's ``label_key`` once and gives
        each part, and the validation part, the labels in the proportions of
        the whole (within one example per label). Every split depends only on
        ``random_seed``.

        Args:
            data (DataManager): All examples, with the settings of every fold's
                managers.
            metrics (dict): Test metrics, name to NumPy function.
            num_epochs (int or None): Epochs per fold, instead of the
                experiment's.
            num_splits (int or None): Number of folds, from 2 to
                ``len(data.dataset)``; None: 10.
            shuffle (bool): Shuffle the indices before cutting the folds.
            random_seed (int or None): Seed of the shuffles, of the
                validation split and, when the experiment has no ``seed``, of
                the models' initial weights.
            split_type (str): ``"random"`` or ``"stratified"``.
            val_split (float or None): Fraction of each training part used for
                validation; None: no validation.
            label_key (str): The example key stratified on.
            train_kwargs (dict or None): DataManager settings of the training
                managers (``batch_size``, ``n_process_augmentation``,
                ``transforms``, ``sampler_cls`` or Delira's ``sampler``,
                ``sampler_kwargs`` or Delira's ``sampling_kwargs``,
                ``drop_last``, ``seed``).
            metric_keys (dict or None): Name to argument keys of ``metrics``.
            test_kwargs (dict or None): The same for the test and validation
                managers.
            params (Parameters or None): Merged over the experiment's
                parameters for the folds.
            verbose (bool): Show the test progress on stderr.

        Returns:
            tuple: ``(predictions, metrics)``, dicts keyed by the fold number
            as a str (``"0"``, ``"1"``...) holding what :meth:`test` returns
            for that fold.

        Raises:
            ValueError: An unknown ``split_type`` (or another bad argument),
                before any training.

        Example:
            >>> preds, scores = experiment.kfold(manager, {"MSE": mse}, num_splits=5,
            ...                                  split_type="stratified")  # doctest: +SKIP
            >>> scores["0"]  # doctest: +SKIP
            {'MSE': 0.01}
        """
        if not isinstance(data, DataManager):
            raise TypeError('kfold takes the examples as a DataManager (data), got {}'.format(
                type(data).__name__))
        if split_type not in ('random', 'stratified'):
            raise ValueError('split_type must be "random" or "stratified", got {!r}'.format(
                split_type))
        num_splits = 10 if num_splits is None else num_splits
        size = len(data.dataset)
        num_splits = check_int(num_splits, 'num_splits (up to len(data.dataset))', minimum=2,
                               maximum=size)
        val_split = check_probability(val_split, 'val_split', allow_zero=False, allow_one=False,
                                      allow_none=True)
        random_seed = check_seed(random_seed, 'random_seed')
        train_changes = _manager_changes(train_kwargs, 'train_kwargs')
        test_changes = _manager_changes(test_kwargs, 'test_kwargs')
        if params is not None:
            if not isinstance(params, Parameters):
                raise TypeError('params must be None or Parameters, got {!r}'.format(
                    type(params).__name__))
            params = Parameters(_merge(self.params.fixed_params, params.fixed_params),
                                _merge(self.params.variable_params, params.variable_params))
        labels = None
        if split_type == 'stratified':
            labels = _labels(data.dataset, label_key)
        predictions, results = {}, {}
        for i, (train_indices, test_indices) in enumerate(
                _kfold_splits(size, num_splits, shuffle, random_seed, labels)):
            val = None
            if val_split is not None:
                picked = _validation_positions(
                    train_indices, val_split, random_seed,
                    None if labels is None else labels[train_indices])
                val = data.get_subset(train_indices[picked]).replace(**test_changes)
                train_indices = numpy.delete(train_indices, picked)
            train = data.get_subset(train_indices).replace(**train_changes)
            test = data.get_subset(test_indices).replace(**test_changes)
            fold = self._replace(
                params=self.params if params is None else params,
                name=os.path.join(self.name, 'fold_{}'.format(i)),
                n_epochs=self.n_epochs if num_epochs is None else num_epochs,
                val_score_key=self.val_score_key if val else None,
                seed=self.seed if self.seed is not None else random_seed)
            model = fold.run(train, val)
            predictions[str(i)], results[str(i)] = fold.test(model, test, metrics, metric_keys,
                                                             verbose)
        return predictions, results

    def grid_search(self, train, val):
        """Trains one experiment per combination of the variable parameters.

        Combination ``k`` runs in ``<name>/grid_<k>``; each is scored by
        ``val_score_key`` on ``val``. The summary goes to
        ``<name>/grid_search.json``, strict JSON: a NaN score is written
        ``null``. A NaN score never wins; a combination whose training
        diverged (stopped by ``stop_on_non_number``) is scored NaN, with a
        RuntimeWarning, and the search goes on. When no score is a number,
        ``best_params`` is None (``best_choice`` null in the file).

        Args:
            train (DataManager): The training batches.
            val (DataManager): The validation batches.

        Returns:
            dict: ``best_params`` (Parameters or None), ``best_score``
            (float, NaN without a best) and ``results``: ``(choice, score)``
            for every combination.

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
            try:
                model = run.run(train, val)
            except _Diverged as error:
                warnings.warn('grid_search: combination {} ({}) diverged and is scored NaN: {}'
                              .format(k, run.output_dir, error), RuntimeWarning)
                score = float('nan')
            else:
                metrics = combination.training['val_metrics']
                score = run._evaluate(model, val, {self.val_score_key: metrics[self.val_score_key]},
                                      combination.training.get('val_metric_keys'))[
                    self.val_score_key]
            results.append((combination.choice, score))
            if not math.isnan(score) and (
                    best is None or _improves(self.val_score_mode, score, best[1])):
                best = (combination, score)
        best_params, best_score = best if best is not None else (None, float('nan'))
        if self._is_writer:
            def number(score):
                return None if math.isnan(score) else score

            train_utils.atomic_write_text(
                os.path.join(self.output_dir, 'grid_search.json'), train_utils.dumps_json({
                    'val_score_key': self.val_score_key,
                    'results': [{'choice': train_utils.to_json_value(choice, 'choice'),
                                 'score': number(score)} for choice, score in results],
                    'best_choice': None if best_params is None else train_utils.to_json_value(
                        best_params.choice, 'choice'),
                    'best_score': number(best_score)}))
        return {'best_params': best_params, 'best_score': best_score, 'results': results}

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
            'n_epochs': self.n_epochs,
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
            'stop_on_non_number': self.stop_on_non_number,
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

        Loading runs no code the file chooses: ``model_cls`` must be an
        AbstractChainerNetwork-like class (closure and prepare_batch) of a
        module already imported (``__main__`` only as the running script) or
        allowed, and every other reference must be of the kind its key
        expects, from the namespaces that key allows, the model class's
        top-level package or ``allowed_modules`` (see
        :func:`~researchutils.chainer.training.resolve_reference`). The loaded
        experiment writes and resumes in the folder it was loaded from: the
        ``save_path`` and ``name`` in the file are not used (a ``name`` that
        is not a plain folder name is refused).

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
        # The experiment lives where it was loaded from, whatever the file says.
        folder = os.path.dirname(os.path.abspath(path))
        name = data.get('name')
        if not isinstance(name, str) or name in ('', '.', '..') or '/' in name or (
                os.sep in name) or (os.altsep and os.altsep in name):
            raise ValueError('{}: name {!r} is not a folder name'.format(path, name))
        model_cls = train_utils.resolve_reference(data['model_cls'], where + ' model_cls',
                                                  allowed_modules=allowed_modules)
        package = train_utils.model_package(model_cls)
        return cls(Parameters.from_json(data['params'], allowed_modules, model_package=package),
                   model_cls, n_epochs=data.get('n_epochs'), name=os.path.basename(folder),
                   save_path=os.path.dirname(folder),
                   optim_builder=train_utils.resolve_reference(
                       data['optim_builder'], where + ' optim_builder',
                       allowed_modules=allowed_modules, model_package=package),
                   key_mapping=data['key_mapping'], gpu_ids=data['gpu_ids'],
                   checkpoint_freq=data['checkpoint_freq'], val_score_key=data['val_score_key'],
                   val_score_mode=data['val_score_mode'], comm=comm, extensions=extensions,
                   seed=data['seed'], stop_on_non_number=data.get('stop_on_non_number', True))
