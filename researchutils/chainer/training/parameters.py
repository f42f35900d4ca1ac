"""Parameters: nested hyper-parameters with a "model" and a "training" part."""
from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from researchutils.chainer.training import json_values
from researchutils.chainer.training._trees import (
    Path,
    Tree,
    copy_tree,
    leaves,
    merge,
    set_path,
    walk,
)
from researchutils.chainer.training.search_space import RANGES, FloatRange, IntRange

_PARTS = ('model', 'training')
_MISSING = object()


def _check_tree(tree: Tree | None, argument: str) -> Tree:
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise TypeError('{} must be a dict with "model" and "training" parts, got {!r}'.format(
            argument, tree))
    unknown = [key for key in tree if key not in _PARTS]
    if unknown:
        raise ValueError('{} has the top-level keys {}; only "model" and "training" are '
                         'allowed: move them into one of those parts'.format(argument, unknown))
    for part in tree:
        if not isinstance(tree[part], dict):
            raise TypeError('{}[{!r}] must be a dict, got {!r}'.format(argument, part, tree[part]))
    return copy_tree(tree)


def _nested_range(value: object, where: str) -> tuple[str, FloatRange | IntRange] | None:
    """``(where, range)`` of the first range inside ``value`` (lists, tuples, dicts), or None."""
    if isinstance(value, RANGES):
        return where, value
    if isinstance(value, dict):
        items = (('{}/{}'.format(where, key), item) for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        items = (('{}[{}]'.format(where, i), item) for i, item in enumerate(value))
    else:
        return None
    return next(filter(None, (_nested_range(item, inner) for inner, item in items)), None)


def _check_variable_leaf(path: Path, value: object) -> None:
    where = 'variable_params/' + '/'.join(path)
    if isinstance(value, RANGES):
        return
    if not isinstance(value, list) or not value:
        raise ValueError('{} must be a non-empty list of candidate values or a FloatRange or '
                         'IntRange, got {!r}'.format(where, value))
    nested = _nested_range(value, where)
    if nested is not None:
        raise ValueError('{} is {!r}, a range among candidates: a variable parameter is '
                         'either a list of candidates or one range, which is then the value '
                         'of its key'.format(*nested))
    # Refused now, not when experiment.json is written or a search stores the choice.
    json_values.to_json_value(value, where)


def _same_value(first: object, second: object) -> bool:
    """Whether two parameter values are the same, by their JSON form (arrays, classes too)."""
    if first is second:
        return True
    try:
        return json_values.to_json_value(first) == json_values.to_json_value(second)
    except ValueError:  # not a value JSON can hold, so none of the candidates
        return False


class Parameters(object):
    """Hyper-parameters of an experiment: fixed values and values to search over.

    Both trees have a ``"model"`` part (the model's constructor arguments) and
    a ``"training"`` part (``num_epochs``, ``optimizer_cls``, ``losses``...).
    ``variable_params`` has the same shape, with a list of candidate values at
    each leaf; :meth:`grid` gives one :class:`Parameters` per combination,
    which :meth:`ChainerExperiment.grid_search` trains and compares. A leaf
    may also be a range,
    :class:`~researchutils.chainer.training.search_space.FloatRange` or
    :class:`~researchutils.chainer.training.search_space.IntRange`, which
    :meth:`ChainerExperiment.search` samples (a list is then a categorical
    choice); such parameters are no grid.

    Args:
        fixed_params (dict or None): ``{"model": {...}, "training": {...}}``.
        variable_params (dict or None): The same shape; every leaf a non-empty
            list of values that can be saved as JSON, or a range.

    Raises:
        ValueError: A variable leaf is an empty list, not a list or range, or
            holds a value JSON cannot hold (a lambda) or a range (a range is a
            leaf of its own); a range in ``fixed_params``. The message names
            the key's path.

    Example:
        >>> params = Parameters(
        ...     fixed_params={"model": {"num_hidden": 20},
        ...                   "training": {"batch_size": 64, "optimizer_params": {"lr": 0.1}}},
        ...     variable_params={"model": {"num_layers": [1, 2]}})
        >>> params.nested_get("batch_size")
        64
        >>> params.nested_get("lr")
        0.1
        >>> [p.model for p in params.grid()]
        [{'num_hidden': 20, 'num_layers': 1}, {'num_hidden': 20, 'num_layers': 2}]
    """

    def __init__(self, fixed_params: Tree | None = None,
                 variable_params: Tree | None = None) -> None:
        self.fixed_params = _check_tree(fixed_params, 'fixed_params')
        self.variable_params = _check_tree(variable_params, 'variable_params')
        for path, value in leaves(self.variable_params):
            _check_variable_leaf(path, value)
        for path, value in leaves(self.fixed_params):
            nested = _nested_range(value, 'fixed_params/' + '/'.join(path))
            if nested is not None:
                raise ValueError('{} is {!r}, a search range: put it in variable_params, as '
                                 'the value of its key'.format(*nested))
        self.choice: dict[str, Any] = {}

    def _trees(self) -> tuple[tuple[str, Tree], tuple[str, Tree]]:
        return (('fixed_params', self.fixed_params), ('variable_params', self.variable_params))

    def nested_get(self, key: str, default: Any = _MISSING) -> Any:
        """Finds a key anywhere in the parameters.

        ``key`` is a name (``"batch_size"``) or the end of a path with ``/``
        between names (``"training/batch_size"``), which tells apart a name
        used in several places.

        Args:
            key (str): The name or path end to look up.
            default: Returned when nothing matches; without it a missing key
                is a KeyError.

        Returns:
            The value (for a variable parameter, its list of candidates).

        Raises:
            KeyError: Nothing matches (the message lists the available keys),
                or several places match (it lists their paths).

        Example:
            >>> params = Parameters({"model": {"n": 1}, "training": {"n": 2, "lr": 3}})
            >>> params.nested_get("training/n"), params.nested_get("lr")
            (2, 3)
            >>> params.nested_get("momentum", default=0.9)
            0.9
        """
        wanted = tuple(key.split('/'))
        matches: list[tuple[str, Any]] = []
        for name, tree in self._trees():
            for path, value in walk(tree, (name,)):
                if path[-len(wanted):] == wanted:
                    matches.append(('/'.join(path), value))
        if len(matches) == 1:
            return matches[0][1]
        if matches:
            raise KeyError('{!r} is ambiguous, it is at {}: ask for one of them by a longer path '
                           'such as {!r}'.format(key, [p for p, _ in matches],
                                                 matches[0][0].split('/', 1)[1]))
        if default is not _MISSING:
            return default
        available = sorted({path[-1] for _, tree in self._trees()
                            for path, _ in walk(tree, ())})
        raise KeyError('{!r} is not in the parameters; the keys are {}'.format(key, available))

    def _part(self, part: str) -> Tree:
        if self.variable_params:
            raise ValueError('the parameters still hold variable_params {}: pick one combination '
                             'with grid() (or ChainerExperiment.grid_search) first'.format(
                                 sorted('/'.join(p) for p, _ in leaves(self.variable_params))))
        return copy_tree(self.fixed_params.get(part, {}))

    @property
    def model(self) -> Tree:
        """dict: The ``"model"`` part, the model's constructor arguments (a copy)."""
        return self._part('model')

    @property
    def training(self) -> Tree:
        """dict: The ``"training"`` part (a copy)."""
        return self._part('training')

    def grid(self) -> Iterator[Parameters]:
        """Yields one fixed :class:`Parameters` per combination of the variable values.

        Each result has no variable parameters; its :attr:`choice` says which
        values were picked (path to value).

        Yields:
            Parameters: The combinations, in ``itertools.product`` order.

        Example:
            >>> params = Parameters({"training": {"lr": 1}},
            ...                     {"training": {"lr": [1, 2], "momentum": [0, 0.9]}})
            >>> [p.choice for p in params.grid()][1]
            {'training/lr': 1, 'training/momentum': 0.9}

        Raises:
            ValueError: A variable parameter is a range (only
                :meth:`ChainerExperiment.search` samples ranges); the message
                names it.
        """
        variable = list(leaves(self.variable_params))
        for path, value in variable:
            if isinstance(value, RANGES):
                raise ValueError('variable_params/{} is {!r}, a range, not a list of '
                                 'candidates: these parameters are no grid, so grid() and '
                                 'grid_search cannot enumerate them; use '
                                 'ChainerExperiment.search'.format('/'.join(path), value))
        return self._combinations(variable)

    def _combinations(self, variable: Sequence[tuple[Path, Sequence[Any]]]
                      ) -> Iterator[Parameters]:
        for values in itertools.product(*[candidates for _, candidates in variable]):
            yield self.choose({'/'.join(path): value
                               for (path, _), value in zip(variable, values)})

    def _examples(self) -> Iterator[Parameters]:
        """Every combination of the lists, each range at its low end: what the experiment
        checks when it is made."""
        return self._combinations([(path, [value.low] if isinstance(value, RANGES) else value)
                                   for path, value in leaves(self.variable_params)])

    def choose(self, choice: dict[str, Any]) -> Parameters:
        """Returns the fixed :class:`Parameters` with the variable parameters set as chosen.

        The values may come from elsewhere (a study others share), so each
        must be one of its list's candidates or a number its range can give.

        Args:
            choice (dict): Every variable parameter's path (``"training/lr"``)
                to its value.

        Returns:
            Parameters: No variable parameters; :attr:`choice` is ``choice``.

        Raises:
            ValueError: A path is missing or unknown, or a value is not one
                its key allows; the message names the key and the value.

        Example:
            >>> params = Parameters({"training": {"lr": 1}}, {"training": {"momentum": [0, 0.9]}})
            >>> params.choose({"training/momentum": 0.9}).training
            {'lr': 1, 'momentum': 0.9}
        """
        variable = {'/'.join(path): (path, allowed) for path, allowed in leaves(
            self.variable_params)}
        if not isinstance(choice, dict) or set(choice) != set(variable):
            raise ValueError('a choice gives a value to each variable parameter {}, got {!r}'
                             .format(sorted(variable), choice))
        update: Tree = {}
        for key, value in choice.items():
            path, allowed = variable[key]
            fits = (allowed.contains(value)
                    if isinstance(allowed, RANGES)
                    else any(_same_value(value, candidate) for candidate in allowed))
            if not fits:
                raise ValueError('variable_params/{}: {!r} is not one of the values it allows '
                                 '({!r})'.format(key, value, allowed))
            set_path(update, path, value)
        combination = Parameters(merge(self.fixed_params, update))
        combination.choice = dict(choice)
        return combination

    def to_json(self) -> dict[str, json_values.JSONData]:
        """Returns the parameters as JSON-ready data (classes and functions by reference).

        Returns:
            dict: ``{"fixed_params": ..., "variable_params": ...}``.

        Raises:
            ValueError: A value cannot be saved (a lambda, a local function);
                the message names its path.

        Example:
            >>> Parameters({"training": {"num_epochs": 3}}).to_json()["fixed_params"]
            {'training': {'num_epochs': 3}}
        """
        return {name: json_values.to_json_value(tree, name) for name, tree in self._trees()}

    @classmethod
    def from_json(cls, data: object, allowed_modules: Sequence[str] = (),
                  model_package: str | None = None, where: str = '') -> Parameters:
        """Rebuilds parameters from :meth:`to_json`'s data.

        The data may come from a file someone else wrote, so a reference to a
        class or function resolves only to the kind its key expects, from the
        namespaces that key allows (``optimizer_cls``: ``chainer.optimizers``;
        ``lr_sched_cls``: Chainer's ``*Shift`` schedulers; losses, metrics and
        other callables: ``chainer.functions``,
        ``researchutils.chainer.functions``, ``model_package``), or from
        ``allowed_modules``; keyword arguments and triggers hold plain values
        only. No other module is imported (see
        :func:`~researchutils.chainer.training.resolve_reference`).

        Args:
            data (dict): As returned by :meth:`to_json` (and read back from JSON).
            allowed_modules (list of str): Further modules (with their
                submodules) references may name, such as your own package;
                only modules you trust.
            model_package (str or None): The model class's top-level package,
                whose functions losses and metrics may name.
            where (str): Where the data came from, such as the file (read
                it with
                :func:`~researchutils.chainer.training.json_values.load_json`):
                error messages then begin ``"<where>: fixed_params/..."``.

        Returns:
            Parameters: Equal to the saved ones.

        Raises:
            ValueError: ``data`` is not such a dict, or a reference is not
                allowed or not of the kind its key expects; the message names
                ``where``, the key and the reference.

        Example:
            >>> Parameters.from_json(Parameters({"model": {"n": 2}}).to_json()).model
            {'n': 2}
        """
        names = ('fixed_params', 'variable_params')
        if not isinstance(data, dict) or set(data) != set(names):
            raise ValueError('{}: saved parameters are a dict with the keys {}, got {!r}'.format(
                where or 'data', list(names), sorted(data) if isinstance(data, dict) else data))
        prefix = where + ': ' if where else ''
        trees = [json_values.from_json_value(data[name], prefix + name, allowed_modules,
                                             model_package=model_package) for name in names]
        return cls(*trees)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Parameters) and self.fixed_params == other.fixed_params
                and self.variable_params == other.variable_params)

    def __repr__(self) -> str:
        return 'Parameters(fixed_params={!r}, variable_params={!r})'.format(
            self.fixed_params, self.variable_params)
