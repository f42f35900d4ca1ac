"""ChainerExperiment's settings, each spelled once, and the checks of its training parameters.

:data:`SETTINGS` is the one table of the constructor's arguments: name,
default, check, whether it is keyword-only and how it is saved. The
constructor's signature, ``replace``, and ``experiment.json`` (save and
load) are all read from it.
"""
import collections
import collections.abc
import functools
import inspect
import numbers
import os

import chainer

from researchutils._checks import (
    check_bool,
    check_devices,
    check_positive_int,
    check_seed,
)
from researchutils.chainer.training import json_values, references, train_utils
from researchutils.chainer.training._scores import check_val_score_mode
from researchutils.chainer.training.parameters import Parameters

FORMAT = 'researchutils.ChainerExperiment/1'
DEFAULT_NAME = 'UnnamedExperiment'  # Delira 0.4.1's
TRAINING_KEYS = {
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
_REQUIRED = inspect.Parameter.empty


# The checks of single settings: each takes the value and returns it as kept.

def _check_params(params):
    if not isinstance(params, Parameters):
        raise TypeError('params must be a Parameters object, got {!r}'.format(
            type(params).__name__))
    return params


def _check_model_cls(model_cls):
    if not (isinstance(model_cls, type) and issubclass(model_cls, chainer.Link)
            and callable(getattr(model_cls, 'closure', None))):
        raise TypeError('model_cls must be an AbstractChainerNetwork subclass (a Chain with '
                        'closure and prepare_batch), got {!r}'.format(model_cls))
    return model_cls


def _check_n_epochs(n_epochs):
    if n_epochs is None:
        return None
    if not isinstance(n_epochs, numbers.Integral) or isinstance(n_epochs, bool):
        raise TypeError('n_epochs must be a positive integer or None, got {!r}: as in Delira '
                        '0.4.1 the third argument is n_epochs, so give name and save_path '
                        'by keyword'.format(n_epochs))
    if n_epochs < 1:
        raise ValueError('n_epochs must be a positive integer or None, got {!r}'.format(
            n_epochs))
    return int(n_epochs)


def _check_name(name):
    name = DEFAULT_NAME if name is None else name
    if not isinstance(name, str) or not name:
        raise ValueError('name must be a non-empty string, got {!r}'.format(name))
    return name


def _check_save_path(save_path):
    if save_path is None:
        return os.path.abspath('.')
    if not isinstance(save_path, (str, os.PathLike)):
        raise TypeError('save_path must be None or a folder path (str or os.PathLike), got '
                        '{!r}'.format(save_path))
    return os.fspath(save_path)


def _check_key_mapping(key_mapping):
    if key_mapping is not None and (not isinstance(key_mapping, dict) or not key_mapping):
        raise ValueError('key_mapping must be None or a non-empty dict, got {!r}'.format(
            key_mapping))
    return None if key_mapping is None else dict(key_mapping)


def _check_optim_builder(optim_builder):
    if not callable(optim_builder):
        raise TypeError('optim_builder must be callable, got {!r}'.format(optim_builder))
    return optim_builder


def _check_extensions(extensions):
    if isinstance(extensions, (str, bytes)) or not isinstance(extensions,
                                                              collections.abc.Iterable):
        raise TypeError('extensions must be a sequence of Chainer extensions or (extension, '
                        'trigger) pairs, got {!r}'.format(extensions))
    extensions = list(extensions)
    for extension in extensions:
        target = extension[0] if isinstance(extension, tuple) else extension
        if not callable(target):
            raise TypeError('extensions must hold Chainer extensions or (extension, trigger) '
                            'pairs, got {!r}'.format(extension))
    return extensions


_check_checkpoint_freq = functools.partial(check_positive_int, name='checkpoint_freq')
_check_gpu_ids = functools.partial(check_devices, name='gpu_ids')
_check_stop_on_non_number = functools.partial(check_bool, name='stop_on_non_number')
_check_preemption_snapshot = functools.partial(check_bool, name='preemption_snapshot')


def _kept(value):
    return value


# How settings are saved in experiment.json: encode(value) gives JSON-ready data,
# decode(data, where, allowed_modules, model_package) the value back. Plain data is kept as
# it is. References resolve by their key's rule (see references.resolve_reference).

def _reference(name):
    def encode(value):
        return references.object_reference(value, name)

    def decode(data, where, allowed_modules, model_package):
        return references.resolve_reference(data, '{}: {}'.format(where, name),
                                             allowed_modules=allowed_modules, key=name,
                                             model_package=model_package)
    return encode, decode


def _plain_data(data, where, allowed_modules, model_package):
    return data


def _decode_params(data, where, allowed_modules, model_package):
    return Parameters.from_json(data, allowed_modules, model_package=model_package,
                                where=where)


_PLAIN = (_kept, _plain_data)
_NOT_SAVED = (None, None)
_PARAMETERS = (Parameters.to_json, _decode_params)

Setting = collections.namedtuple('Setting', 'name default check keyword_only encode decode')
_POSITIONAL, _KEYWORD_ONLY = False, True  # Delira 0.4.1's positional order, then ours

SETTINGS = (
    #       name, default, check (returns the value kept), kind, encode, decode
    Setting('params', _REQUIRED, _check_params, _POSITIONAL, *_PARAMETERS),
    Setting('model_cls', _REQUIRED, _check_model_cls, _POSITIONAL,
            *_reference('model_cls')),
    Setting('n_epochs', None, _check_n_epochs, _POSITIONAL, *_PLAIN),
    Setting('name', None, _check_name, _POSITIONAL, *_PLAIN),
    Setting('save_path', None, _check_save_path, _POSITIONAL, *_PLAIN),
    Setting('key_mapping', None, _check_key_mapping, _POSITIONAL, *_PLAIN),
    Setting('val_score_key', None, _kept, _POSITIONAL, *_PLAIN),
    Setting('optim_builder', train_utils.create_optims_default_chainer, _check_optim_builder,
            _POSITIONAL, *_reference('optim_builder')),
    Setting('checkpoint_freq', 1, _check_checkpoint_freq, _POSITIONAL, *_PLAIN),
    Setting('gpu_ids', None, _check_gpu_ids, _KEYWORD_ONLY, *_PLAIN),
    Setting('val_score_mode', 'lowest', check_val_score_mode, _KEYWORD_ONLY, *_PLAIN),
    Setting('comm', None, _kept, _KEYWORD_ONLY, *_NOT_SAVED),
    Setting('extensions', (), _check_extensions, _KEYWORD_ONLY, *_NOT_SAVED),
    Setting('seed', None, check_seed, _KEYWORD_ONLY, *_PLAIN),
    Setting('stop_on_non_number', True, _check_stop_on_non_number, _KEYWORD_ONLY, *_PLAIN),
    Setting('preemption_snapshot', True, _check_preemption_snapshot, _KEYWORD_ONLY,
            *_PLAIN),
)

SIGNATURE = inspect.Signature(
    [inspect.Parameter('self', inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    + [inspect.Parameter(setting.name, inspect.Parameter.KEYWORD_ONLY if setting.keyword_only
                         else inspect.Parameter.POSITIONAL_OR_KEYWORD, default=setting.default)
       for setting in SETTINGS])


def bind(experiment, args, kwargs):
    """The constructor's arguments as ``{name: checked value}``, in the table's order."""
    bound = SIGNATURE.bind(experiment, *args, **kwargs)
    bound.apply_defaults()
    return {setting.name: setting.check(bound.arguments[setting.name]) for setting in SETTINGS}


def replace(experiment, **changes):
    """A new experiment of ``experiment``'s class, with its settings but ``changes``."""
    settings = {setting.name: getattr(experiment, setting.name) for setting in SETTINGS}
    settings.update(changes)
    return type(experiment)(**settings)


def to_json(experiment):
    """The saved settings of ``experiment``, JSON-ready, with the file format first."""
    data = {'format': FORMAT}
    data.update((setting.name, setting.encode(getattr(experiment, setting.name)))
                for setting in SETTINGS if setting.encode is not None)
    return json_values.to_json_value(data, 'ChainerExperiment')


def from_json(data, where, allowed_modules):
    """The constructor's keyword arguments saved in ``data`` (see :func:`to_json`).

    ``model_cls`` is resolved first (an imported module or ``allowed_modules``); the
    losses, metrics and ``optim_builder`` may also name functions of its top-level
    package. ``name`` and ``save_path`` are left out: a loaded experiment lives where
    it was loaded from, whatever the file says.
    """
    if not isinstance(data, dict) or data.get('format') != FORMAT:
        raise ValueError('{} is not a saved ChainerExperiment (format {!r}, expected {!r})'
                         .format(where, data.get('format') if isinstance(data, dict) else data,
                                 FORMAT))
    by_name = {setting.name: setting for setting in SETTINGS}
    missing = [name for name in ('params', 'model_cls') if name not in data]
    if missing:
        raise ValueError('{} has no {}: a saved ChainerExperiment holds both'.format(
            where, ' and no '.join(repr(name) for name in missing)))
    model_cls = by_name['model_cls'].decode(data['model_cls'], where, allowed_modules, None)
    package = references.model_package(model_cls)
    settings = {'model_cls': model_cls}
    for setting in SETTINGS:
        if (setting.decode is not None and setting.name in data
                and setting.name not in settings and setting.name not in _LOCATION):
            settings[setting.name] = setting.decode(data[setting.name], where, allowed_modules,
                                                    package)
    return settings


# Where an experiment writes; a loaded one takes it from the folder it was loaded from.
_LOCATION = ('name', 'save_path')


# The "training" parameters, checked against the settings ---------------------------------

def with_epochs(training, n_epochs):
    """The training parameters with ``n_epochs``, when given, as ``num_epochs``."""
    return training if n_epochs is None else dict(training, num_epochs=n_epochs)


def _check_functions(training, key):
    functions = training.get(key, {})
    if not isinstance(functions, dict) or not all(callable(f) for f in functions.values()):
        raise TypeError('training parameter {!r} must be a dict from names to functions, got '
                        '{!r}'.format(key, functions))
    return functions


def check_training(training, n_epochs, optim_builder, val_score_key):
    """Checks one combination of "training" parameters; errors say what to fix."""
    checked = with_epochs(training, n_epochs)
    unknown = sorted(set(checked) - set(TRAINING_KEYS))
    if unknown:
        raise ValueError('unknown training parameters {}; the known ones are {}'.format(
            unknown, sorted(TRAINING_KEYS)))
    for key in ('num_epochs', 'optimizer_cls', 'losses'):
        if key not in checked:
            raise KeyError('the "training" parameters need {!r} ({}): add it to '
                           'fixed_params["training"]'.format(key, TRAINING_KEYS[key]))
    check_positive_int(checked['num_epochs'], 'training parameter num_epochs')
    if (optim_builder is train_utils.create_optims_default_chainer
            and not (isinstance(checked['optimizer_cls'], type)
                     and issubclass(checked['optimizer_cls'], chainer.Optimizer))):
        raise TypeError('training parameter optimizer_cls must be a Chainer optimizer class such '
                        'as chainer.optimizers.Adam, got {!r}'.format(checked['optimizer_cls']))
    for key in ('optimizer_params', 'lr_sched_params'):
        if not isinstance(checked.get(key, {}), dict):
            raise TypeError('training parameter {!r} must be a dict, got {!r}'.format(
                key, checked[key]))
    if not _check_functions(checked, 'losses'):
        raise ValueError('training parameter losses must name at least one loss function')
    _check_functions(checked, 'train_metrics')
    val_metrics = _check_functions(checked, 'val_metrics')
    scheduler = checked.get('lr_sched_cls')
    if scheduler is not None and not callable(scheduler):
        raise TypeError('training parameter lr_sched_cls must be an extension class or None, '
                        'got {!r}'.format(scheduler))
    check_positive_int(checked.get('early_stopping_patience'),
                       'training parameter early_stopping_patience', allow_none=True)
    if val_score_key is not None and val_score_key not in val_metrics:
        raise ValueError('val_score_key {!r} is not one of the val_metrics {}: name one of '
                         'them'.format(val_score_key, sorted(val_metrics)))
    if checked.get('early_stopping_patience') is not None and val_score_key is None:
        raise ValueError('early_stopping_patience needs val_score_key, the validation metric '
                         'to watch')


# What the experiment's parts share -------------------------------------------------------

def resolve_device(gpu_id):
    """The Chainer device of one ``gpu_ids`` entry (a GPU number or a device name)."""
    name = '@cupy:{}'.format(gpu_id) if isinstance(gpu_id, numbers.Integral) else gpu_id
    try:
        return chainer.get_device(name)
    except Exception as error:
        raise ValueError('gpu_ids entry {!r} is not a usable device ({}): use [] for the CPU, '
                         'GPU numbers with CuPy installed, or device names such as '
                         "'@numpy'".format(gpu_id, error)) from error


def rank_devices(devices, comm):
    """The devices this process trains on: the CPU without ``gpu_ids``, one per ChainerMN rank."""
    if not devices:
        return [chainer.get_device('@numpy')]
    if comm is not None:
        return [devices[comm.intra_rank % len(devices)]]
    return devices


def is_writer(comm):
    """Whether this process writes files: always without ChainerMN, rank 0 with it."""
    return comm is None or comm.rank == 0


def resolved_key_mapping(model_cls, key_mapping):
    """``key_mapping``, or the first argument of ``model_cls.forward`` mapped to "data"."""
    if key_mapping is not None:
        return key_mapping
    arguments = list(inspect.signature(model_cls.forward).parameters)[1:]
    if not arguments:
        raise ValueError('{}.forward takes no argument to map; pass key_mapping'.format(
            model_cls.__name__))
    return {arguments[0]: 'data'}
