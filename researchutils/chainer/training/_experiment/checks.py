"""The checks of ChainerExperiment's arguments and of its "training" parameters.

Each ``check_<setting>`` takes one constructor argument and returns the value kept, or raises
a TypeError or ValueError naming the argument and the value (``settings.SETTINGS`` says which
check guards which argument). :func:`check_training` checks one combination of the "training"
parameters against the settings, so a bad grid is refused at construction, before any
training. Tests: ``tests/chainer/training/_experiment/test_checks.py``.
"""
from __future__ import annotations

import collections.abc
import functools
import numbers
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import chainer

from researchutils._checks import (
    check_bool,
    check_comm,  # noqa: F401 (the check of the comm setting, settings.SETTINGS)
    check_devices,
    check_file_name,
    check_non_negative_float,
    check_path,
    check_positive_int,
    check_str,
)
from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training import train_utils
from researchutils.chainer.training._trees import Tree
from researchutils.chainer.training.parameters import Parameters

_T = TypeVar('_T')
#: What ``optim_builder`` is: ``optim_builder(model, optimizer_cls, **optimizer_params)``
#: gives ``{"default": optimizer, ...}``.
OptimBuilder = Callable[..., dict[str, Any]]

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


# The checks of single settings: each takes the value and returns it as kept.

def check_params(params: Parameters) -> Parameters:
    if not isinstance(params, Parameters):
        raise TypeError('params must be a Parameters object, got {!r}'.format(
            type(params).__name__))
    return params


def check_model_cls(model_cls: type[chainer.Link]) -> type[chainer.Link]:
    if not (isinstance(model_cls, type) and issubclass(model_cls, chainer.Link)
            and callable(getattr(model_cls, 'closure', None))):
        raise TypeError('model_cls must be an AbstractChainerNetwork subclass (a Chain with '
                        'closure and prepare_batch), got {!r}'.format(model_cls))
    return model_cls


def check_n_epochs(n_epochs: int | None) -> int | None:
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


def check_name(name: str | None) -> str:
    """The experiment's folder name: one name, never a path ('a/b', '..' would put the
    experiment's files somewhere else than ``save_path/name``)."""
    return check_file_name(DEFAULT_NAME if name is None else name, 'name')


def check_save_path(save_path: str | os.PathLike[str] | None) -> str:
    """A folder, or a place where one can be made: not a file, nor below one."""
    if save_path is None:
        return os.path.abspath('.')
    if not isinstance(save_path, (str, os.PathLike)):
        raise TypeError('save_path must be None or a folder path (str or os.PathLike), got '
                        '{!r}'.format(save_path))
    path = check_path(save_path, 'save_path')
    existing = os.path.abspath(path)
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError('save_path must be a folder or a place where one can be made, got '
                         '{!r}: {!r} is a file'.format(path, existing))
    return path


def check_key_mapping(key_mapping: dict[str, str] | None) -> dict[str, str] | None:
    if key_mapping is not None and (not isinstance(key_mapping, dict) or not key_mapping):
        raise ValueError('key_mapping must be None or a non-empty dict, got {!r}'.format(
            key_mapping))
    if key_mapping is None:
        return None
    for argument, batch_key in key_mapping.items():
        if not isinstance(argument, str) or not isinstance(batch_key, str):
            raise TypeError('key_mapping must map names of the model\'s arguments to batch '
                            'keys, both str, got {!r}: {!r} in {!r}'.format(
                                argument, batch_key, key_mapping))
    return dict(key_mapping)


def check_val_score_key(val_score_key: str | None) -> str | None:
    return check_str(val_score_key, 'val_score_key', allow_empty=False, allow_none=True)


def check_optim_builder(optim_builder: OptimBuilder) -> OptimBuilder:
    if not callable(optim_builder):
        raise TypeError('optim_builder must be callable, got {!r}'.format(optim_builder))
    return optim_builder


def check_extensions(extensions: Iterable[Any]) -> list[Any]:
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


check_checkpoint_freq = functools.partial(check_positive_int, name='checkpoint_freq')
check_gpu_ids = functools.partial(check_devices, name='gpu_ids')
check_stop_on_non_number = functools.partial(check_bool, name='stop_on_non_number')
check_preemption_snapshot = functools.partial(check_bool, name='preemption_snapshot')
check_wait_for_folder = functools.partial(check_non_negative_float, name='wait_for_folder')


def kept(value: _T) -> _T:
    """The check of a setting taken as it is (``comm``)."""
    return value


# The "training" parameters, checked against the settings ---------------------------------

def with_epochs(training: Tree, n_epochs: int | None) -> Tree:
    """The training parameters with ``n_epochs``, when given, as ``num_epochs``."""
    return training if n_epochs is None else dict(training, num_epochs=n_epochs)


def _check_functions(training: Tree, key: str) -> dict[str, Callable[..., Any]]:
    functions = training.get(key, {})
    if not isinstance(functions, dict) or not all(callable(f) for f in functions.values()):
        raise TypeError('training parameter {!r} must be a dict from names to functions, got '
                        '{!r}'.format(key, functions))
    return functions


def check_training(training: Tree, n_epochs: int | None, optim_builder: OptimBuilder,
                   val_score_key: str | None) -> None:
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


def check_managers(train: DataManager, val: DataManager | None,
                   val_score_key: str | None) -> list[str]:
    """Checks the managers given to ``run``: DataManagers, ``val`` when there is a score to
    keep, and a "data" entry in the training batches (what the closure feeds the model).

    Returns:
        list: The keys of the training batches.
    """
    if not isinstance(train, DataManager) or not (val is None or isinstance(val, DataManager)):
        raise TypeError('run(train, val) takes DataManagers, got {} and {}'.format(
            type(train).__name__, type(val).__name__))
    if val_score_key is not None and val is None:
        raise ValueError('val_score_key {!r} needs a validation manager: run(train, val)'
                         .format(val_score_key))
    train_keys = train.batch_keys()
    if 'data' not in train_keys:
        raise KeyError('the closure feeds batch["data"] to the model, but the training '
                       'batches have the keys {}: name the input "data"'.format(train_keys))
    return train_keys
