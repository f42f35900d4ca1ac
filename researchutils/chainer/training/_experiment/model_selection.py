"""ChainerExperiment.kfold and .grid_search: many experiments, one per fold or combination.

Every fold's split is made before the first fold trains (a ``val_split`` that leaves a fold
nothing to train on is refused at once), and depends only on ``random_seed``. Each fold or
combination is an experiment of its own in a subfolder, so a stopped selection goes on with
the one that was stopped. Tests: ``tests/chainer/training/_experiment/test_model_selection.py``.
"""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import chainer
import numpy
import numpy.typing

from researchutils._checks import check_bool, check_int, check_probability, check_seed
from researchutils.chainer.data_loading import DataManager
from researchutils.chainer.training import _ownership, json_values, train_utils
from researchutils.chainer.training._experiment import settings, tracking
from researchutils.chainer.training._experiment.model import predictor
from researchutils.chainer.training._experiment.protocol import Experiment
from researchutils.chainer.training._ranks import is_rank_zero
from researchutils.chainer.training._scores import improves, score_for_json
from researchutils.chainer.training._trees import Tree, merge
from researchutils.chainer.training.extensions.stop_on_non_number import TrainingDiverged
from researchutils.chainer.training.parameters import Parameters

# Positions of examples in the dataset, and one label per example.
_Indices = numpy.typing.NDArray[numpy.intp]
_Labels = numpy.typing.NDArray[Any]
# What kfold returns: each fold's predictions and metrics, by the fold's number as a str.
_KFoldResult = tuple[dict[str, dict[str, numpy.typing.NDArray[Any]]], dict[str, dict[str, float]]]


class _Examples(Protocol):
    """A manager's dataset as :func:`_labels` reads it: a length, and a dict per index."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> Mapping[str, Any]: ...


_MANAGER_SETTINGS = ('batch_size', 'n_process_augmentation', 'transforms', 'sampler_cls',
                     'sampler_kwargs', 'drop_last', 'seed')
_DELIRA_MANAGER_SETTINGS = {'sampler': 'sampler_cls', 'sampling_kwargs': 'sampler_kwargs'}


def _manager_changes(kwargs: dict[str, Any] | None, argument: str) -> dict[str, Any]:
    """kfold's ``train_kwargs`` / ``test_kwargs`` as DataManager.replace arguments."""
    if not isinstance(kwargs, (dict, type(None))):
        raise TypeError('{} must be None or a dict of DataManager settings, got {!r}'.format(
            argument, kwargs))
    changes = {_DELIRA_MANAGER_SETTINGS.get(key, key): value
               for key, value in (kwargs or {}).items()}
    unknown = sorted(set(changes) - set(_MANAGER_SETTINGS))
    if unknown:
        raise TypeError('{} has the keys {}, which are no DataManager settings; the settings '
                        'are {}'.format(argument, unknown, list(_MANAGER_SETTINGS)))
    return changes


def _labels(dataset: _Examples, label_key: str) -> _Labels:
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


def _label_grouped(order: _Indices, labels: _Labels) -> _Indices:
    """``order`` sorted by label, keeping its own order within each label."""
    return order[numpy.argsort(labels[order], kind='stable')]


def kfold_splits(size: int, num_splits: int, shuffle: bool, seed: int | None,
                 labels: _Labels | None) -> Iterator[tuple[_Indices, _Indices]]:
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


def validation_positions(train_indices: _Indices, val_split: float, seed: int | None,
                         labels: _Labels | None) -> _Indices:
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


def fold_indices(size: int, num_splits: int, shuffle: bool, seed: int | None,
                 labels: _Labels | None, val_split: float | None
                 ) -> list[tuple[_Indices, _Indices | None, _Indices]]:
    """Every fold's ``(train, val, test)`` example indices, each sorted (``val`` None without
    ``val_split``); within a fold the three are disjoint and together all ``size``.

    All folds are split before any trains, so a ``val_split`` that leaves a fold nothing
    to train on is refused before the first training.
    """
    folds: list[tuple[_Indices, _Indices | None, _Indices]] = []
    for train, test in kfold_splits(size, num_splits, shuffle, seed, labels):
        val = None
        if val_split is not None:
            picked = validation_positions(train, val_split, seed,
                                          None if labels is None else labels[train])
            train, val = numpy.delete(train, picked), train[picked]
        folds.append((train, val, test))
    return folds


def _merged_params(base: Parameters, more: Parameters) -> Parameters:
    if not isinstance(more, Parameters):
        raise TypeError('params must be None or Parameters, got {!r}'.format(
            type(more).__name__))
    return Parameters(merge(base.fixed_params, more.fixed_params),
                      merge(base.variable_params, more.variable_params))


def kfold(experiment: Experiment, data: DataManager,
          metrics: dict[str, Callable[..., Any]], *, num_epochs: int | None,
          num_splits: int | None, shuffle: bool, random_seed: int | None, split_type: str,
          val_split: float | None, label_key: str, train_kwargs: dict[str, Any] | None,
          metric_keys: dict[str, Sequence[str]] | None, test_kwargs: dict[str, Any] | None,
          params: Parameters | None, verbose: bool
          ) -> _KFoldResult:
    """:meth:`ChainerExperiment.kfold`, whose docstring says what each argument does."""
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
    shuffle = check_bool(shuffle, 'shuffle')
    verbose = check_bool(verbose, 'verbose')
    train_changes = _manager_changes(train_kwargs, 'train_kwargs')
    test_changes = _manager_changes(test_kwargs, 'test_kwargs')
    params = experiment.params if params is None else _merged_params(experiment.params, params)
    labels = None
    if split_type == 'stratified':
        labels = _labels(data.dataset, label_key)
    splits = list(fold_indices(size, num_splits, shuffle, random_seed, labels, val_split))
    with _ownership.hold(experiment.output_dir, wait=experiment.wait_for_folder,
                         comm=experiment.comm):
        return _run_folds(experiment, data, splits, metrics, metric_keys, train_changes,
                          test_changes, params, num_epochs, random_seed, verbose)


def _run_folds(experiment: Experiment, data: DataManager,
               splits: list[tuple[_Indices, _Indices | None, _Indices]],
               metrics: dict[str, Callable[..., Any]],
               metric_keys: dict[str, Sequence[str]] | None, train_changes: dict[str, Any],
               test_changes: dict[str, Any], params: Parameters, num_epochs: int | None,
               random_seed: int | None, verbose: bool
               ) -> _KFoldResult:
    """Trains and tests each fold of ``splits`` in turn (the folder held)."""
    predictions: dict[str, dict[str, numpy.typing.NDArray[Any]]] = {}
    results: dict[str, dict[str, float]] = {}
    for i, (train_indices, val_indices, test_indices) in enumerate(splits):
        val = None
        if val_indices is not None:
            val = data.get_subset(val_indices).replace(**test_changes)
        train = data.get_subset(train_indices).replace(**train_changes)
        test = data.get_subset(test_indices).replace(**test_changes)
        fold = settings.replace(
            experiment, params=params,
            name=os.path.join(experiment.name, 'fold_{}'.format(i)),
            n_epochs=experiment.n_epochs if num_epochs is None else num_epochs,
            val_score_key=experiment.val_score_key if val else None,
            seed=experiment.seed if experiment.seed is not None else random_seed,
            tracking=tracking.sub_run(experiment, 'fold_{}'.format(i)))
        model = fold.run(train, val)
        predictions[str(i)], results[str(i)] = fold.test(model, test, metrics, metric_keys,
                                                         verbose)
    return predictions, results


def score_model(run: Experiment, model: chainer.Link, val: DataManager,
                training: Tree) -> float:
    """The ``val_score_key`` metric of ``model`` over ``val``, keeping no prediction."""
    key = run.val_score_key
    assert key is not None  # grid_search and the search score only runs with a val_score_key
    return predictor(model, run.model_cls, run.key_mapping).evaluate(
        val, {key: training['val_metrics'][key]}, training.get('val_metric_keys'))[key]


def _write_summary(path: str, val_score_key: str, results: list[tuple[dict[str, Any], float]],
                   best_params: Parameters | None, best_score: float) -> None:
    train_utils.atomic_write_text(path, json_values.dumps_json(json_values._strict_json_value({
        'val_score_key': val_score_key,
        'results': [{'choice': json_values.to_json_value(choice, 'choice'),
                     'score': score_for_json(score)} for choice, score in results],
        'best_choice': None if best_params is None else json_values.to_json_value(
            best_params.choice, 'choice'),
        'best_score': score_for_json(best_score)})))


def grid_search(experiment: Experiment, train: DataManager,
                val: DataManager | None) -> dict[str, Any]:
    """:meth:`ChainerExperiment.grid_search`, whose docstring says what it does."""
    if experiment.val_score_key is None or val is None:
        raise ValueError('grid_search compares the val_score_key metric on val: set '
                         'val_score_key and pass a validation manager')
    with _ownership.hold(experiment.output_dir, wait=experiment.wait_for_folder,
                         comm=experiment.comm):
        return _run_grid(experiment, train, val)


def _run_grid(experiment: Experiment, train: DataManager,
              val: DataManager) -> dict[str, Any]:
    """Trains and scores each combination of the grid in turn (the folder held)."""
    assert experiment.val_score_key is not None  # grid_search refuses a run without one
    results: list[tuple[dict[str, Any], float]] = []
    best: tuple[Parameters, float] | None = None
    for k, combination in enumerate(experiment.params.grid()):
        run = settings.replace(
            experiment, params=combination, name=os.path.join(experiment.name,
                                                              'grid_{}'.format(k)),
            tracking=tracking.sub_run(experiment, 'grid_{}'.format(k)))
        try:
            model = run.run(train, val)
        except TrainingDiverged as error:
            warnings.warn('grid_search: combination {} ({}) diverged and is scored NaN: {}'
                          .format(k, run.output_dir, error), RuntimeWarning)
            score = float('nan')
        else:
            score = score_model(run, model, val, combination.training)
        results.append((combination.choice, score))
        if not math.isnan(score) and (
                best is None or improves(experiment.val_score_mode, score, best[1])):
            best = (combination, score)
    best_params, best_score = best if best is not None else (None, float('nan'))
    if is_rank_zero(experiment.comm):
        _write_summary(os.path.join(experiment.output_dir, 'grid_search.json'),
                       experiment.val_score_key, results, best_params, best_score)
    return {'best_params': best_params, 'best_score': best_score, 'results': results}
