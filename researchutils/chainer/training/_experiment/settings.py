"""ChainerExperiment's settings, each spelled once in one table.

:data:`SETTINGS` is the one table of the constructor's arguments: name, default, check,
whether it is keyword-only and how it is saved. The constructor's checks, ``replace``, and
``experiment.json`` (save and load) are all read from it; the constructor spells the same
arguments out (for readers, IDEs and type checkers), and a test holds its signature to the
table's names, kinds and defaults. Tests: ``tests/chainer/training/_experiment/test_settings.py``.
"""
from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from researchutils._checks import check_seed
from researchutils.chainer.training import json_values, references, train_utils
from researchutils.chainer.training._experiment import checks, tracking
from researchutils.chainer.training._scores import check_val_score_mode
from researchutils.chainer.training.parameters import Parameters

if TYPE_CHECKING:
    from researchutils.chainer.training._experiment.protocol import Experiment

FORMAT = 'researchutils.ChainerExperiment/1'
_REQUIRED = inspect.Parameter.empty


# How settings are saved in experiment.json: encode(value) gives JSON-ready data,
# decode(data, where, allowed_modules, model_package) the value back. Plain data is kept as
# it is. References resolve by their key's rule (see references.resolve_reference).
_Encode = Callable[[Any], json_values.JSONData]
_Decode = Callable[[Any, str, Sequence[str], 'str | None'], Any]


def _reference(name: str) -> tuple[_Encode, _Decode]:
    def encode(value: object) -> str:
        return references.object_reference(value, name)

    def decode(data: str, where: str, allowed_modules: Sequence[str],
               model_package: str | None) -> Any:
        return references.resolve_reference(data, '{}: {}'.format(where, name),
                                             allowed_modules=allowed_modules, key=name,
                                             model_package=model_package)
    return encode, decode


def _as_is(value: json_values.JSONData) -> json_values.JSONData:
    return value


def _plain_data(data: json_values.JSONData, where: str, allowed_modules: Sequence[str],
                model_package: str | None) -> json_values.JSONData:
    return data


def _decode_params(data: object, where: str, allowed_modules: Sequence[str],
                   model_package: str | None) -> Parameters:
    return Parameters.from_json(data, allowed_modules, model_package=model_package,
                                where=where)


_PLAIN: tuple[_Encode, _Decode] = (_as_is, _plain_data)
_NOT_SAVED = (None, None)
_PARAMETERS: tuple[_Encode, _Decode] = (Parameters.to_json, _decode_params)


class Setting(NamedTuple):
    """One argument of the constructor (a row of :data:`SETTINGS`)."""

    name: str
    default: Any  # inspect.Parameter.empty for a required argument
    check: Callable[[Any], Any]  # returns the value kept
    keyword_only: bool
    encode: _Encode | None  # None: not saved
    decode: _Decode | None


_POSITIONAL, _KEYWORD_ONLY = False, True  # Delira 0.4.1's positional order, then ours

SETTINGS = (
    #       name, default, check (returns the value kept), kind, encode, decode
    Setting('params', _REQUIRED, checks.check_params, _POSITIONAL, *_PARAMETERS),
    Setting('model_cls', _REQUIRED, checks.check_model_cls, _POSITIONAL,
            *_reference('model_cls')),
    Setting('n_epochs', None, checks.check_n_epochs, _POSITIONAL, *_PLAIN),
    Setting('name', None, checks.check_name, _POSITIONAL, *_PLAIN),
    Setting('save_path', None, checks.check_save_path, _POSITIONAL, *_PLAIN),
    Setting('key_mapping', None, checks.check_key_mapping, _POSITIONAL, *_PLAIN),
    Setting('val_score_key', None, checks.check_val_score_key, _POSITIONAL, *_PLAIN),
    Setting('optim_builder', train_utils.create_optims_default_chainer,
            checks.check_optim_builder, _POSITIONAL, *_reference('optim_builder')),
    Setting('checkpoint_freq', 1, checks.check_checkpoint_freq, _POSITIONAL, *_PLAIN),
    Setting('gpu_ids', None, checks.check_gpu_ids, _KEYWORD_ONLY, *_PLAIN),
    Setting('val_score_mode', 'lowest', check_val_score_mode, _KEYWORD_ONLY, *_PLAIN),
    Setting('comm', None, checks.check_comm, _KEYWORD_ONLY, *_NOT_SAVED),
    Setting('extensions', (), checks.check_extensions, _KEYWORD_ONLY, *_NOT_SAVED),
    Setting('seed', None, check_seed, _KEYWORD_ONLY, *_PLAIN),
    Setting('stop_on_non_number', True, checks.check_stop_on_non_number, _KEYWORD_ONLY,
            *_PLAIN),
    Setting('preemption_snapshot', True, checks.check_preemption_snapshot, _KEYWORD_ONLY,
            *_PLAIN),
    Setting('tracking', None, tracking.check_tracking, _KEYWORD_ONLY, *_PLAIN),
    Setting('wait_for_folder', 0.0, checks.check_wait_for_folder, _KEYWORD_ONLY, *_PLAIN),
)


def checked(arguments: dict[str, Any]) -> dict[str, Any]:
    """The constructor's ``arguments`` (its ``locals()``) as ``{name: checked value}``, checked
    in the table's order (the signature's), so the first wrong one is named."""
    return {setting.name: setting.check(arguments[setting.name]) for setting in SETTINGS}


def replace(experiment: Experiment, **changes: Any) -> Experiment:
    """A new experiment of ``experiment``'s class, with its settings but ``changes``.

    A ``name`` that is a path below the experiment's folder (a fold, a grid point or a
    trial: ``'exp/fold_0'``) gives the run the last part as its name and the folder
    above it as its save path, so it lives in the same folder while a name stays one
    folder name.
    """
    settings = {setting.name: getattr(experiment, setting.name) for setting in SETTINGS}
    settings.update(changes)
    parent, name = os.path.split(settings['name'])
    if parent:
        settings['name'] = name
        settings['save_path'] = os.path.join(settings['save_path'], parent)
    return type(experiment)(**settings)


def to_json(experiment: Experiment) -> json_values.JSONData:
    """The saved settings of ``experiment``, JSON-ready, with the file format first."""
    data: dict[str, json_values.JSONData] = {'format': FORMAT}
    data.update((setting.name, setting.encode(getattr(experiment, setting.name)))
                for setting in SETTINGS if setting.encode is not None)
    # Strict JSON: a NaN or infinite parameter (clip_max=inf) as {"__float__": "inf"}.
    return json_values._strict_json_value(json_values.to_json_value(data, 'ChainerExperiment'))


def from_json(data: object, where: str, allowed_modules: Sequence[str]) -> dict[str, Any]:
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
    decode_model_cls = by_name['model_cls'].decode
    assert decode_model_cls is not None  # the table saves model_cls, as a reference
    model_cls = decode_model_cls(data['model_cls'], where, allowed_modules, None)
    package = references.model_package(model_cls)
    settings: dict[str, Any] = {'model_cls': model_cls}
    for setting in SETTINGS:
        if (setting.decode is not None and setting.name in data
                and setting.name not in settings and setting.name not in _LOCATION):
            settings[setting.name] = setting.decode(data[setting.name], where, allowed_modules,
                                                    package)
    return settings


# Where an experiment writes; a loaded one takes it from the folder it was loaded from.
_LOCATION = ('name', 'save_path')
