"""ChainerExperiment.search: hyper-parameter search on Optuna, one experiment per trial.

The space is the experiment's variable parameters (lists are categorical choices, FloatRange
and IntRange are ranges). Trials live in an Optuna study named after the experiment, by
default in ``<name>/search.db`` (SQLite); each trains in ``<name>/trial_<number>``. Several
processes may search one study: ``n_trials`` counts the study's finished trials, whoever ran
them. Optuna is imported when a search starts. Its tests are in
``tests/chainer/training/test_search.py``.
"""
import json
import math
import os
import socket
import time
import warnings

from researchutils import _figures
from researchutils._checks import check_positive_float, check_positive_int
from researchutils._files import write_atomically
from researchutils._optuna import import_optuna
from researchutils.chainer.training import json_values, train_utils
from researchutils.chainer.training._experiment import settings as _experiment_settings
from researchutils.chainer.training._experiment.model_selection import score_model
from researchutils.chainer.training._scores import improves
from researchutils.chainer.training._trees import leaves
from researchutils.chainer.training.extensions.chainer_pruning_extension import (
    ChainerPruningExtension,
)
from researchutils.chainer.training.extensions.stop_on_non_number import TrainingDiverged
from researchutils.chainer.training.search_space import FloatRange, IntRange

STUDY_FILE = 'search.db'
SUMMARY_FILE = 'search.json'
HISTORY_FIGURE = 'search_history.png'
IMPORTANCE_FIGURE = 'search_importances.png'
# The heartbeat of storages built from a URL: a trial whose process stopped beating for
# GRACE_PERIOD seconds (a machine lost) is failed by the next trial that starts.
HEARTBEAT_INTERVAL = 60
GRACE_PERIOD = 180
_PLAIN = (type(None), bool, int, float, str)


class _SurplusTrial(Exception):
    """A trial asked for when the study already had n_trials finished or running."""


def _labels(candidates):
    """The Optuna choices standing for a list's candidates: the values themselves when Optuna
    can store and tell them apart, else the JSON text of each (a class, a tuple; or values
    Optuna finds equal, as 1, 1.0 and True, which it stores by their position found with
    ``==``)."""
    plain = all(isinstance(candidate, _PLAIN) and not (
        isinstance(candidate, float) and math.isnan(candidate)) for candidate in candidates)
    if plain and all(first != second for i, first in enumerate(candidates)
                     for second in candidates[i + 1:]):
        return list(candidates)
    return [json.dumps(json_values.to_json_value(candidate), sort_keys=True)
            for candidate in candidates]


def _index(labels, raw):
    """Where ``raw`` is among ``labels``, by type and value (1, 1.0 and True are three), or
    None."""
    return next((i for i, label in enumerate(labels)
                 if type(label) is type(raw) and label == raw), None)


class _Space(object):
    """The experiment's variable parameters as Optuna suggestions, and back."""

    def __init__(self, params):
        self.params = params
        self.dimensions = [('/'.join(path), value) for path, value in leaves(
            params.variable_params)]
        if not self.dimensions:
            raise ValueError('search needs variable parameters to search over: give '
                             'Parameters variable_params (lists, FloatRange, IntRange)')
        self.labels = {name: _labels(value) for name, value in self.dimensions
                       if isinstance(value, list)}

    def suggest(self, trial):
        choice = {}
        for name, value in self.dimensions:
            if isinstance(value, FloatRange):
                choice[name] = trial.suggest_float(name, value.low, value.high, step=value.step,
                                                   log=value.log)
            elif isinstance(value, IntRange):
                choice[name] = trial.suggest_int(name, value.low, value.high, step=value.step,
                                                 log=value.log)
            else:
                label = trial.suggest_categorical(name, self.labels[name])
                choice[name] = value[_index(self.labels[name], label)]
        return choice

    def read(self, trial):
        """The choice of a trial read back from the study (run by anyone), by the rules of
        experiment.json: a list's value only by its label, a range's only a number in it."""
        if any(name not in trial.params for name, _ in self.dimensions):
            return None  # stopped before all its values were drawn
        choice = {}
        for name, value in self.dimensions:
            raw = trial.params[name]
            if isinstance(value, list):
                index = _index(self.labels[name], raw)
                if index is None:
                    raise ValueError('trial {} of the study has {}={!r}, which is none of its '
                                     'candidates {}'.format(trial.number, name, raw,
                                                            self.labels[name]))
                raw = value[index]
            choice[name] = raw
        try:
            self.params.choose(choice)
        except ValueError as error:
            raise ValueError('trial {} of the study: {}'.format(trial.number, error)) from None
        return choice


def _storage(optuna, storage, folder):
    if storage is None:
        os.makedirs(folder, exist_ok=True)
        storage = 'sqlite:///' + os.path.join(os.path.abspath(folder), STUDY_FILE)
    if isinstance(storage, str):
        engine_kwargs = {}
        if storage.startswith('sqlite'):
            # Processes sharing the file wait for each other's writes, not 5 s only.
            engine_kwargs = {'connect_args': {'timeout': 300}}
        return _rdb_storage(optuna, storage, engine_kwargs)
    if not isinstance(storage, optuna.storages.BaseStorage):
        raise TypeError('storage must be None (an SQLite file in the experiment folder), an '
                        'Optuna storage URL or an optuna.storages storage, got {!r}'.format(
                            storage))
    return storage


def _rdb_storage(optuna, url, engine_kwargs, attempts=5):
    import sqlalchemy.exc
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                                  heartbeat_interval=HEARTBEAT_INTERVAL,
                                                  grace_period=GRACE_PERIOD)
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError):
            # Processes starting together race to create the tables ("already exists") and
            # to record the schema version (a UNIQUE constraint): the loser finds both made
            # when it tries again.
            if attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))


def _worker():
    return {'host': socket.gethostname(), 'pid': os.getpid(), 'started': _start_time(
        os.getpid())}


def _start_time(pid):
    """When process ``pid`` started (clock ticks since boot, Linux), or None: with the pid,
    it tells a process from a later one given the same pid."""
    try:
        with open('/proc/{}/stat'.format(pid)) as stream:
            return int(stream.read().rsplit(')', 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _dead(worker):
    """Whether the process recorded in a trial's ``worker`` attribute is gone (this host)."""
    if not (isinstance(worker, dict) and worker.get('host') == socket.gethostname()
            and isinstance(worker.get('pid'), int) and not isinstance(worker['pid'], bool)):
        return False
    try:
        os.kill(worker['pid'], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    started = worker.get('started')
    return started is not None and _start_time(worker['pid']) not in (None, started)


def fail_dead_trials(study, optuna):
    """Marks FAIL the RUNNING trials whose process, on this host, is gone (killed)."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if _dead(trial.user_attrs.get('worker')):
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)


def _taken(study, optuna, before):
    """How many trials numbered below ``before`` finished or run (surplus ones left out)."""
    states = optuna.trial.TrialState
    return sum(1 for trial in study.get_trials(deepcopy=False, states=(
        states.COMPLETE, states.PRUNED, states.RUNNING))
        if trial.number < before and not _surplus(trial))


def _surplus(trial):
    # User attributes come from whoever shares the study: only a plain True counts.
    return trial.user_attrs.get('surplus') is True


def _diverged(trial):
    reason = trial.user_attrs.get('diverged')
    return reason if isinstance(reason, str) else None


def _finished(study, optuna):
    states = optuna.trial.TrialState
    return len(study.get_trials(deepcopy=False, states=(states.COMPLETE, states.PRUNED)))


def _trial_run(experiment, params, number, trial):
    """The experiment of trial ``number``: its folder, its parameters, the pruning extension
    (on every ChainerMN rank, which it keeps in step; only rank 0 holds the trial)."""
    pruning = ChainerPruningExtension(trial, 'val/' + experiment.val_score_key, (1, 'epoch'),
                                      comm=experiment.comm)
    return _experiment_settings.replace(
        experiment, params=params, extensions=list(experiment.extensions) + [pruning],
        name=os.path.join(experiment.name, 'trial_{}'.format(number)))


def _objective(experiment, space, train, val, n_trials, optuna):
    key = experiment.val_score_key

    def objective(trial):
        trial.set_user_attr('worker', _worker())
        fail_dead_trials(trial.study, optuna)
        if n_trials is not None and _taken(trial.study, optuna, trial.number) >= n_trials:
            # Another process took the last trial between our count and our ask.
            trial.set_user_attr('surplus', True)
            trial.study.stop()
            raise _SurplusTrial('the study has its n_trials={} trials already'.format(
                n_trials))
        params = experiment.params.choose(space.suggest(trial))
        if experiment.comm is not None:
            experiment.comm.bcast_obj(('trial', trial.number, params.choice), root=0)
        run = _trial_run(experiment, params, trial.number, trial)
        try:
            model = run.run(train, val)
        except TrainingDiverged as error:
            trial.set_user_attr('diverged', str(error))
            raise optuna.TrialPruned('trial {} diverged: {}'.format(trial.number, error)
                                     ) from error
        score = score_model(run, model, val, params.training)
        if math.isnan(score):
            trial.set_user_attr('diverged', '{} is NaN'.format(key))
            raise optuna.TrialPruned('trial {}: {} is NaN'.format(trial.number, key))
        return score
    return objective


def _follow(experiment, train, val, optuna):
    """A ChainerMN rank other than 0: runs the trials rank 0 sends, until it sends the end."""
    comm = experiment.comm
    while True:
        message = comm.bcast_obj(None, root=0)
        if message[0] == 'end':
            if message[1] is None:
                raise RuntimeError('search: rank 0 stopped the search with an error (its '
                                   'traceback says which); rank {} stops too'.format(comm.rank))
            return message[1]
        _, number, choice = message
        try:
            _trial_run(experiment, experiment.params.choose(choice), number, None).run(
                train, val)
        except (TrainingDiverged, optuna.TrialPruned):
            pass  # rank 0 records it; every rank stopped at the same iteration


def _number(value):
    """A score for strict JSON: NaN and infinities (no JSON numbers) as None."""
    return None if value is None or not math.isfinite(value) else value


def _summary(experiment, study, space, optuna):
    states = optuna.trial.TrialState
    trials, results, best = [], [], None
    for trial in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if _surplus(trial):
            continue
        choice = space.read(trial)
        score = trial.value if trial.state == states.COMPLETE else float('nan')
        steps = sorted(trial.intermediate_values)
        trials.append({
            'number': trial.number, 'state': trial.state.name,
            'score': _number(score), 'choice': json_values.to_json_value(choice, 'choice'),
            'last_reported': _number(trial.intermediate_values[steps[-1]]) if steps else None,
            'epochs_reported': len(steps),
            'diverged': _diverged(trial)})
        if trial.state in (states.COMPLETE, states.PRUNED):
            results.append((choice, score))
        if trial.state == states.COMPLETE and (
                best is None or improves(experiment.val_score_mode, score, best[1])):
            best = (trial.number, score, choice)
    best_params = None if best is None else experiment.params.choose(best[2])
    return {'best_params': best_params, 'best_score': float('nan') if best is None else best[1],
            'best_trial': None if best is None else best[0], 'results': results,
            'trials': trials}


def _write_summary(experiment, study, summary):
    best_params = summary['best_params']
    train_utils.atomic_write_text(
        os.path.join(experiment.output_dir, SUMMARY_FILE), json_values.dumps_json({
            'study_name': study.study_name, 'direction': study.direction.name.lower(),
            'val_score_key': experiment.val_score_key,
            'best_trial': summary['best_trial'], 'best_score': _number(summary['best_score']),
            'best_choice': None if best_params is None else json_values.to_json_value(
                best_params.choice, 'best_choice'),
            'best_params': None if best_params is None else best_params.to_json(),
            'trials': summary['trials']}))


def _save_figure(axes, path, plt):
    figure = axes.figure
    try:
        # Optuna's long parameter names (paths) would be cut at the figure's edge.
        write_atomically(path, lambda stream: figure.savefig(stream, format='png',
                                                             bbox_inches='tight'))
    finally:
        plt.close(figure)


def _write_figures(experiment, study, optuna):
    """The optimization history and the parameter importances, as PNG beside search.json."""
    try:
        _figures.import_matplotlib('search figures')
    except ImportError as error:
        warnings.warn('{}; search.json is written, the figures are not'.format(error))
        return
    plt = _figures.pyplot()
    from optuna.visualization import matplotlib as optuna_plots
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        if complete:
            _save_figure(optuna_plots.plot_optimization_history(study),
                         os.path.join(experiment.output_dir, HISTORY_FIGURE), plt)
        if len(complete) >= 2:
            _save_figure(optuna_plots.plot_param_importances(study),
                         os.path.join(experiment.output_dir, IMPORTANCE_FIGURE), plt)
        else:
            warnings.warn('search: {} is drawn from 2 finished trials or more; the study has '
                          '{}'.format(IMPORTANCE_FIGURE, len(complete)), RuntimeWarning)


def search(experiment, train, val, n_trials, timeout, sampler, pruner, storage):
    """:meth:`ChainerExperiment.search`, whose docstring says what each argument does."""
    optuna = import_optuna('ChainerExperiment.search')
    if experiment.val_score_key is None or val is None:
        raise ValueError('search scores each trial by the val_score_key metric on val: set '
                         'val_score_key and pass a validation manager')
    n_trials = check_positive_int(n_trials, 'n_trials', allow_none=True)
    timeout = check_positive_float(timeout, 'timeout', allow_none=True)
    if n_trials is None and timeout is None:
        raise ValueError('search needs n_trials or timeout (or both), or it would never end')
    if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
        raise TypeError('sampler must be None (TPE) or an optuna.samplers sampler, got '
                        '{!r}'.format(sampler))
    if pruner is not None and not isinstance(pruner, optuna.pruners.BasePruner):
        raise TypeError('pruner must be None (median pruning) or an optuna.pruners pruner, '
                        'got {!r}'.format(pruner))
    space = _Space(experiment.params)
    if experiment.comm is not None and experiment.comm.rank != 0:
        return _follow(experiment, train, val, optuna)
    if experiment.comm is None:
        return _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner, storage,
                     optuna)
    summary = None
    try:
        summary = _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner,
                        storage, optuna)
    finally:
        # The other ranks wait for a trial or the end; the summary, without the study.
        experiment.comm.bcast_obj(('end', None if summary is None else dict(
            summary, study=None)), root=0)
    return summary


def _lead(experiment, space, train, val, n_trials, timeout, sampler, pruner, storage, optuna):
    """The search in one process, or on ChainerMN rank 0, which asks Optuna."""
    direction = 'minimize' if experiment.val_score_mode == 'lowest' else 'maximize'
    study = optuna.create_study(
        storage=_storage(optuna, storage, experiment.output_dir),
        sampler=sampler if sampler is not None else optuna.samplers.TPESampler(),
        pruner=pruner if pruner is not None else optuna.pruners.MedianPruner(),
        study_name=experiment.name, direction=direction, load_if_exists=True)
    if study.direction.name.lower() != direction:
        raise ValueError('the study {!r} in the storage is to {}, but val_score_mode={!r} '
                         'asks to {}'.format(experiment.name, study.direction.name.lower(),
                                             experiment.val_score_mode, direction))
    fail_dead_trials(study, optuna)
    remaining = None if n_trials is None else n_trials - _finished(study, optuna)
    if remaining is None or remaining > 0:
        callbacks = [] if n_trials is None else [optuna.study.MaxTrialsCallback(
            n_trials, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))]
        study.optimize(_objective(experiment, space, train, val, n_trials, optuna),
                       n_trials=remaining, timeout=timeout, catch=(_SurplusTrial,),
                       callbacks=callbacks)
    summary = _summary(experiment, study, space, optuna)
    _write_summary(experiment, study, summary)
    _write_figures(experiment, study, optuna)
    summary['study'] = study
    return summary
