"""What TensorBoardReport and MLflowReport take from a run: LogReport rows, hyper-parameters.

Both report what a :class:`~chainer.training.extensions.LogReport` observes, as
PrintReport does: :class:`LogRows` keeps a cursor into its log (serialized, so a resumed run
goes on after the last row reported) and gives the new rows as ``(step, {name: value})``
with only the numbers of each row. :func:`flat_hyperparameters` turns a run's
hyper-parameters (a ``Parameters``, a dict or None) into ``{"model/n_units": 20, ...}``.
:class:`DistinctNames` gives each name the form a tracker takes, and keeps two names apart
that this form would merge. Tests: tests/chainer/training/extensions/test_tracking.py.
"""
from __future__ import annotations

import hashlib
import logging
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import chainer
from chainer.training.extensions import log_report as log_report_module

__all__ = ['DistinctNames', 'LogRows', 'check_entries', 'check_log_report', 'check_step',
           'flat_hyperparameters']

Scalar = int | float | str | bool
STEPS = ('iteration', 'epoch')


def check_entries(entries: object) -> list[str] | None:
    """``entries`` as a list of str, or None (every key)."""
    if entries is None:
        return None
    if isinstance(entries, str) or not isinstance(entries, Sequence) or not all(
            isinstance(entry, str) for entry in entries):
        raise TypeError('entries must be a list of str or None, got {!r}'.format(entries))
    return list(entries)


def check_log_report(log_report: object) -> str | log_report_module.LogReport:
    if not isinstance(log_report, (str, log_report_module.LogReport)):
        raise TypeError('log_report must be the name of a LogReport or a LogReport, got '
                        '{!r}'.format(log_report))
    return log_report


def check_step(step: object) -> str:
    if step not in STEPS:
        raise ValueError('step must be one of {}, got {!r}'.format(STEPS, step))
    return str(step)


def _leaves(tree: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in tree.items():
        name = prefix + str(key)
        if isinstance(value, Mapping):
            found.update(_leaves(value, name + '/'))
        else:
            found[name] = value
    return found


def _scalar(value: object) -> Scalar:
    """A value as a tracker shows it: a number or bool as it is, a class or function by its
    dotted name, anything else as its repr."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, type) or callable(value):
        qualified = getattr(value, '__qualname__', None)
        module = getattr(value, '__module__', None)
        if qualified and module:
            return '{}.{}'.format(module, qualified)
    return repr(value)


def flat_hyperparameters(parameters: object) -> dict[str, Scalar]:
    """``{path: value}`` of a run's hyper-parameters.

    A ``Parameters`` gives its fixed tree (``"model/n_units"``,
    ``"training/optimizer_params/lr"``) and, under their own names, the
    values a search chose for it (``"lr"``); a dict is flattened the same
    way; None gives nothing.

    Raises:
        TypeError: ``parameters`` is neither of those.

    Example:
        >>> flat_hyperparameters({'model': {'n_units': 20}, 'lr': 0.1})
        {'model/n_units': 20, 'lr': 0.1}
    """
    if parameters is None:
        return {}
    # A Parameters is known by its trees: this module must not import the experiment's.
    fixed = getattr(parameters, 'fixed_params', None)
    if isinstance(fixed, Mapping):
        flat = _leaves(fixed, '')
        flat.update(getattr(parameters, 'choice', None) or {})
    elif isinstance(parameters, Mapping):
        flat = _leaves(parameters, '')
    else:
        raise TypeError('parameters must be a Parameters, a dict or None, got {!r}'.format(
            parameters))
    return {name: _scalar(value) for name, value in flat.items()}


def _number(value: object) -> float | None:
    """A reported value as a float (NaN and infinities kept), or None when it is no number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    array = getattr(value, 'array', value)  # a chainer.Variable
    try:
        if getattr(array, 'size', None) == 1:
            return float(chainer.backend.CpuDevice().send(array).reshape(()))
    except (TypeError, ValueError):
        pass
    return None


class LogRows(object):
    """The rows a LogReport added since the last call, as ``(step, {name: number})``.

    Args:
        log_report: Name of the trainer's LogReport, or a LogReport to drive.
        entries: The keys to take (None: every key but ``epoch``,
            ``iteration`` and ``elapsed_time``, which are the step).
        step (str): ``'iteration'`` or ``'epoch'``: the row's key used as its step.

    Example:
        >>> rows = LogRows('LogReport', None, 'iteration')
        >>> rows.new(trainer)  # doctest: +SKIP
        [(100, {'main/loss': 0.5})]
    """

    def __init__(self, log_report: str | log_report_module.LogReport,
                 entries: list[str] | None, step: str) -> None:
        self.log_report = log_report
        self.entries = entries
        self.step = step
        self.taken = 0

    def check(self, trainer: chainer.training.Trainer, who: str) -> None:
        """Raises a ValueError when the LogReport named is not on ``trainer``."""
        if isinstance(self.log_report, str):
            try:
                trainer.get_extension(self.log_report)
            except ValueError:
                raise ValueError('{}: log_report {!r} names no extension of the trainer; '
                                 'extend the trainer with a LogReport first'.format(
                                     who, self.log_report)) from None

    def new(self, trainer: chainer.training.Trainer
            ) -> list[tuple[int, dict[str, float]]]:
        log_report = self.log_report
        if isinstance(log_report, str):
            log_report = trainer.get_extension(log_report)
        else:
            log_report(trainer)
        rows = log_report.log[self.taken:]
        self.taken += len(rows)
        return [(int(row[self.step]), self._numbers(row)) for row in rows]

    def last_step_taken(self, trainer: chainer.training.Trainer) -> int:
        """The step of the last row taken; -1 when none was."""
        log_report = self.log_report
        if isinstance(log_report, str):
            log_report = trainer.get_extension(log_report)
        log = log_report.log
        if self.taken == 0 or len(log) < self.taken:
            return -1
        return int(log[self.taken - 1][self.step])

    def _numbers(self, row: Mapping[str, object]) -> dict[str, float]:
        keys = self.entries if self.entries is not None else [
            key for key in row if key not in ('epoch', 'iteration', 'elapsed_time')]
        numbers_of_row = {}
        for key in keys:
            if key in row:
                value = _number(row[key])
                if value is not None:
                    numbers_of_row[key] = value
        return numbers_of_row

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        self.taken = int(serializer('_rows_taken', self.taken))
        if isinstance(self.log_report, log_report_module.LogReport):
            self.log_report.serialize(serializer['_log_report'])


class DistinctNames(object):
    """Each key's name as a tracker takes it, two keys never sharing one.

    ``clean`` makes a key a name the tracker takes (MLflow's ``acc@1`` is
    ``acc_1``; a name over ``max_length`` is cut). A key whose name another key
    has already gets a stable suffix, ``_`` and the first hex digits of its
    SHA-1 (the same in every process, so a resumed run names it the same),
    with one logged warning that says which key became which name.

    Args:
        clean: The tracker's form of a name.
        max_length (int): The longest name the tracker takes, or None.
        logger (logging.Logger): Where the warnings go.
        who (str): The extension (starts each warning).
        what (str): The tracker and the kind of name, as in "MLflow refuses the
            metric name": ``('MLflow', 'metric')``.

    Example:
        >>> names = DistinctNames(lambda key: key.replace('@', '_').replace('#', '_'), None,
        ...                       logging.getLogger('doc'), 'Doc', ('MLflow', 'metric'))
        >>> names('acc@1'), names('acc#1'), names('acc@1')
        ('acc_1', 'acc_1_9eb97df2', 'acc_1')
    """

    def __init__(self, clean: Callable[[str], str], max_length: int | None,
                 logger: logging.Logger, who: str, what: tuple[str, str]) -> None:
        self._clean = clean
        self._max_length = max_length
        self._logger = logger
        self._who = who
        self._tracker, self._kind = what
        self._names: dict[str, str] = {}  # key -> name
        self._keys: dict[str, str] = {}  # name -> key

    def __call__(self, key: str) -> str:
        name = self._names.get(key)
        if name is not None:
            return name
        name = self._clean(key)
        if name in self._keys:
            other = self._keys[name]
            name = self._suffixed(name, key)
            self._logger.warning(
                '%s: the %s names %r and %r would both be logged as %r; %r is logged as %r '
                'and %r as %r', self._who, self._kind, other, key, self._clean(key), other,
                self._names[other], key, name)
        elif name != key:
            self._logger.warning('%s: %s refuses the %s name %r; it is logged as %r',
                                 self._who, self._tracker, self._kind, key, name)
        self._names[key] = name
        self._keys[name] = key
        return name

    def _suffixed(self, name: str, key: str) -> str:
        digest = hashlib.sha1(key.encode('utf-8')).hexdigest()
        for length in range(8, len(digest) + 1):
            suffix = '_' + digest[:length]
            base = name if self._max_length is None else name[:self._max_length - len(suffix)]
            candidate = self._clean(base + suffix)
            if candidate not in self._keys:
                return candidate
        raise ValueError('{}: no distinct name for {!r}'.format(self._who, key))
