"""ChainerExperiment: train, validate, checkpoint, resume and test a model from Parameters.

Its machinery lives in the private package ``_experiment``, one job per module, and its
Trainer's plug-ins in ``updaters``, ``extensions`` and ``triggers``. Tests:
``tests/chainer/training/test_experiment.py`` and ``tests/chainer/training/_experiment/``.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self

import chainer

from researchutils._errors import add_note
from researchutils.chainer import serializers
from researchutils.chainer.training import _ownership, json_values, train_utils
from researchutils.chainer.training._experiment import (
    checks,
    files,
    model_selection,
    progress,
    protocol,
    run_state,
    saving,
    settings,
)
from researchutils.chainer.training._experiment import model as _model
from researchutils.chainer.training._experiment import trainer as _trainer
from researchutils.chainer.training._ranks import is_rank_zero

if TYPE_CHECKING:
    import optuna
    from numpy.typing import NDArray

    from researchutils.chainer.data_loading import DataManager
    from researchutils.chainer.training.parameters import Parameters


class ChainerExperiment(protocol.Experiment):
    """Trains a model described by :class:`Parameters` with a Chainer Trainer.

    :meth:`run` trains ``model_cls(**params.model)`` on a
    ``chainer.training.Trainer`` in ``<save_path>/<name>``, and resumes there
    when run again. The tutorial :doc:`../tutorials/experiment` says what a
    run writes, and when it resumes, refuses or stops; :doc:`../porting`
    says how the arguments differ from Delira 0.4.1's ``BaseExperiment``,
    whose positional order the first nine keep.

    Args:
        params (Parameters): The hyper-parameters: "model" (the keyword
            arguments of ``model_cls``) and "training" (its keys are listed
            in the tutorial's "More training parameters").
        model_cls (type): An
            :class:`~researchutils.chainer.models.AbstractChainerNetwork`
            subclass (anything with ``closure`` and ``prepare_batch``).
        n_epochs (int or None): Epochs to train, instead of the training
            parameter ``num_epochs`` (which may then be left out).
        name (str or None): The experiment's folder name, one name (not
            ``'..'``, ``'.'`` or ``'a/b'``); None: ``"UnnamedExperiment"``.
        save_path (str or None): The folder holding experiments, or where one can
            be made (not a file); None: the working directory (when the
            experiment is made).
        key_mapping (dict or None): Model argument to batch key for
            prediction; None: the first argument of ``forward`` to ``"data"``.
        val_score_key (str or None): The validation metric choosing the best
            model and driving early stopping.
        optim_builder (callable): Builds ``{"default": optimizer, ...}``.
        checkpoint_freq (int): Epochs between snapshots.
        gpu_ids (list, int or None): ``None`` or ``[]``: CPU; ``0`` or ``[0]``:
            that GPU; several: a DataParallelChainerNetwork over them. Entries
            may be device names (``'@numpy'``).
        val_score_mode (str): ``"lowest"`` or ``"highest"`` is best.
        comm: A ChainerMN communicator: each rank trains on its shard; rank 0
            writes files and runs ``extensions`` (all ranks: ``every_rank``).
        extensions (sequence): Extra Chainer extensions, each an extension or
            an ``(extension, trigger)`` pair.
        seed (int or None): Seeds the model's initial weights; an integer
            in ``[0, 2**32)``.
        stop_on_non_number (bool): Stop training when a weight becomes NaN
            or infinite (default).
        preemption_snapshot (bool): Snapshot and stop on SIGTERM and SIGUSR1
            (default), so that running again resumes exactly; False adds no
            PreemptionSnapshot.
        tracking (str, list or dict): ``'tensorboard'``, ``'mlflow'`` or both
            in a list: each run (each fold, each trial of a search) reports
            its epochs to TensorBoard (``tensorboard/`` in its folder) or to
            an MLflow run (MLflow's default tracking URI); a dict sets
            ``'tensorboard'`` (bool), ``'mlflow'`` (True or a tracking URI)
            and ``'mlflow_experiment'`` (None: the experiment's name). None:
            no tracking. :doc:`../tutorials/tracking` says more.
        wait_for_folder (float): Seconds a run waits for another run that
            holds its folder to end; 0 (default): refused at once. One run owns
            an experiment folder (the tutorial's "One run, one folder").

    Raises:
        TypeError, ValueError: An argument or a "training" parameter (of any
            combination of a grid) is wrong; the message names it.
        KeyError: A required "training" parameter is missing.

    Attributes:
        trainer (chainer.training.Trainer): The Trainer of the last
            :meth:`run` that trained (None before).

    Example:
        >>> experiment = ChainerExperiment(params, SimpleNet, name="example",
        ...                                save_path="./experiments")  # doctest: +SKIP
        >>> model = experiment.run(manager_train, manager_val)  # doctest: +SKIP
    """

    # The settings (as their checks keep them) are declared once, by protocol.Experiment,
    # which this class is: the constructor sets them.
    trainer: chainer.training.Trainer | None
    devices: list[chainer.backend.Device]

    def __init__(self, params: Parameters, model_cls: type[chainer.Link],
                 n_epochs: int | None = None, name: str | None = None,
                 save_path: str | os.PathLike[str] | None = None,
                 key_mapping: dict[str, str] | None = None, val_score_key: str | None = None,
                 optim_builder: checks.OptimBuilder = train_utils.create_optims_default_chainer,
                 checkpoint_freq: int = 1, *,
                 gpu_ids: int | str | Sequence[int | str] | None = None,
                 val_score_mode: str = 'lowest', comm: Any = None,
                 extensions: Iterable[Any] = (), seed: int | None = None,
                 stop_on_non_number: bool = True, preemption_snapshot: bool = True,
                 tracking: str | Sequence[str] | dict[str, Any] | None = None,
                 wait_for_folder: float = 0.0) -> None:
        # Each argument is a row of settings.SETTINGS, which checks it (a test holds the
        # names, kinds and defaults here to the table's); locals() are exactly the arguments.
        for setting, value in settings.checked(locals()).items():
            setattr(self, setting, value)
        self.trainer = None
        self.devices = [_model.resolve_device(gpu_id) for gpu_id in self.gpu_ids]
        # Check each combination of a grid (ranges at their low end) at once, not after the
        # first trainings.
        for combination in self.params._examples():
            checks.check_training(combination.training, self.n_epochs, self.optim_builder,
                                  self.val_score_key)

    @property
    def output_dir(self) -> str:
        """str: ``<save_path>/<name>``, where this experiment writes."""
        return os.path.join(self.save_path, self.name)

    def build_model(self) -> chainer.Link:
        """Builds an untrained model from the "model" parameters, on the experiment's devices.

        Returns:
            chainer.Link: ``model_cls(**params.model)`` (wrapped in a
            DataParallelChainerNetwork for several devices).

        Raises:
            TypeError: The "model" parameters do not fit ``model_cls``.

        Example:
            >>> model = experiment.build_model()  # doctest: +SKIP
        """
        return _model.build_model(self.model_cls, self.params.model, self.seed,
                                  _model.rank_devices(self.devices, self.comm))

    def run(self, train: DataManager, val: DataManager | None = None) -> chainer.Link:
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
                training step, with what to fix; a ``run_state.json`` not trusted,
                or of a run given another ``num_epochs`` (a ValueError naming it).
            FileNotFoundError: ``run_state.json`` says the run finished, but
                its model file is missing (the message names it).
            RuntimeError: Another run holds the experiment's folder (a
                ``FolderInUseError`` naming the folder, the owner's host and pid
                and since when), and did not end within ``wait_for_folder``.

        Example:
            >>> model = experiment.run(manager_train, manager_val)  # doctest: +SKIP
        """
        training = self.params.training
        checks.check_training(training, self.n_epochs, self.optim_builder, self.val_score_key)
        train_keys = checks.check_managers(train, val, self.val_score_key)
        model = self.build_model()
        predictor = _model.predictor(model, self.model_cls, self.key_mapping)
        predictor.check_batch_keys(train_keys if val is None else val.batch_keys())
        # Held before anything is read or written there (run_state.json included).
        with _ownership.hold(self.output_dir, wait=self.wait_for_folder, comm=self.comm):
            scored = self.val_score_key is not None and val is not None
            state = run_state.read_run_state(self.output_dir)
            num_epochs = checks.with_epochs(training, self.n_epochs)['num_epochs']
            if state is not None and state['finished']:
                run_state.check_num_epochs(self.output_dir, state, num_epochs)
                path = files.model_path(self.output_dir, scored, state)
                with files.refused_resume(self.output_dir, path):
                    model = serializers.load_model(path, model, strict=True)
                progress.say(self.comm, '{}: the run there finished at epoch {}; returning '
                             'its {} without training'.format(
                                 self.output_dir, state['epoch'], os.path.basename(path)))
                return model
            devices = _model.rank_devices(self.devices, self.comm)
            trainer = _trainer.build_trainer(self, model, predictor, training, train, val,
                                             devices[0])
            self.trainer = trainer
            trainer.run()
            if is_rank_zero(self.comm):
                serializers.save_model(os.path.join(self.output_dir, files.FINAL_MODEL), model,
                                       overwrite=True)
                run_state.write_run_state(self.output_dir, trainer.updater.epoch, num_epochs)
            if self.comm is not None:
                self.comm.mpi_comm.barrier()
            return serializers.load_model(files.model_path(self.output_dir, scored), model,
                                          strict=True)

    def test(self, network: chainer.Link, test_data: DataManager,
             metrics: dict[str, Callable[..., Any]],
             metric_keys: dict[str, Sequence[str]] | None = None, verbose: bool = False
             ) -> tuple[dict[str, NDArray[Any]], dict[str, float]]:
        """Predicts over ``test_data`` and returns the predictions and metrics.

        Args:
            network (chainer.Link): A trained model (from :meth:`run`).
            test_data (DataManager): The test batches.
            metrics (dict): Name to NumPy metric function.
            metric_keys (dict or None): Name to argument keys (default
                ``("pred", "label")``).
            verbose (bool): Show the progress (batches done) on stderr.

        Returns:
            tuple: ``(predictions, metrics)``: each model output as one array over
            ``test_data`` in order; each metric averaged over batches by size.

        Example:
            >>> preds, metrics = experiment.test(model, manager_test,
            ...                                  {"MSE": mse})  # doctest: +SKIP
        """
        predictor = _model.predictor(network, self.model_cls, self.key_mapping)
        return predictor.predict_all(test_data, metrics, metric_keys, verbose=verbose)

    def kfold(self, data: DataManager, metrics: dict[str, Callable[..., Any]],
              num_epochs: int | None = None, num_splits: int | None = None,
              shuffle: bool = False, random_seed: int | None = None,
              split_type: str = 'random', val_split: float | None = 0.2,
              label_key: str = 'label', *, train_kwargs: dict[str, Any] | None = None,
              metric_keys: dict[str, Sequence[str]] | None = None,
              test_kwargs: dict[str, Any] | None = None, params: Parameters | None = None,
              verbose: bool = False
              ) -> tuple[dict[str, dict[str, NDArray[Any]]], dict[str, dict[str, float]]]:
        """Trains once per fold and tests each fold's model on its held-out part.

        Fold ``i`` tests on the i-th of ``num_splits`` parts of ``data`` and trains
        on the others, in ``<name>/fold_<i>`` (:doc:`../tutorials/experiment`).

        Args:
            data (DataManager): All examples, with the settings of every fold's
                managers.
            metrics (dict): Test metrics, name to NumPy function.
            num_epochs (int or None): Epochs per fold, instead of the experiment's.
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
                managers (Delira's ``sampler`` and ``sampling_kwargs`` too).
            metric_keys (dict or None): Name to argument keys of ``metrics``.
            test_kwargs (dict or None): The same for the test and validation managers.
            params (Parameters or None): Merged over the experiment's parameters.
            verbose (bool): Show the test progress on stderr.

        Returns:
            tuple: ``(predictions, metrics)``, dicts keyed by the fold number as a
            str (``"0"``, ``"1"``...) holding what :meth:`test` returns for it.

        Raises:
            ValueError: A bad argument (``split_type``...), before any training.

        Example:
            >>> preds, scores = experiment.kfold(manager, {"MSE": mse}, num_splits=5,
            ...                                  split_type="stratified")  # doctest: +SKIP
            >>> scores["0"]  # doctest: +SKIP
            {'MSE': 0.01}
        """
        return model_selection.kfold(
            self, data, metrics, num_epochs=num_epochs, num_splits=num_splits, shuffle=shuffle,
            random_seed=random_seed, split_type=split_type, val_split=val_split,
            label_key=label_key, train_kwargs=train_kwargs, metric_keys=metric_keys,
            test_kwargs=test_kwargs, params=params, verbose=verbose)

    def grid_search(self, train: DataManager, val: DataManager) -> dict[str, Any]:
        """Trains one experiment per combination of the variable parameters.

        Combination ``k`` runs in ``<name>/grid_<k>``, scored by
        ``val_score_key`` on ``val``; the summary goes to
        ``<name>/grid_search.json``. A NaN score (a diverged training) never
        wins (tutorial: :doc:`../tutorials/experiment`).

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
        return model_selection.grid_search(self, train, val)

    def search(self, train: DataManager, val: DataManager, *, n_trials: int | None = None,
               timeout: float | None = None, sampler: optuna.samplers.BaseSampler | None = None,
               pruner: optuna.pruners.BasePruner | None = None,
               storage: str | optuna.storages.BaseStorage | None = None,
               heartbeat_interval: int | None = 60,
               grace_period: int | None = None) -> dict[str, Any]:
        """Searches the variable parameters with Optuna, one experiment per trial.

        Each trial trains in a folder of its own below ``<name>``, scored by
        ``val_score_key`` on ``val``; the summary goes to ``<name>/search.json``.
        The tutorial :doc:`/tutorials/search` tells how trials are run, pruned,
        counted, shared between machines, retried and resumed.

        Args:
            train (DataManager): The training batches.
            val (DataManager): The validation batches.
            n_trials (int or None): Finished (COMPLETE or PRUNED) trials the
                study should hold, whoever ran them (None: no bound, then
                ``timeout`` ends the search).
            timeout (float or None): Seconds after which this process starts
                no new trial.
            sampler (optuna.samplers.BaseSampler or None): None: ``TPESampler()``.
            pruner (optuna.pruners.BasePruner or None): None: ``MedianPruner()``.
            storage (str, optuna.storages.BaseStorage or None): An Optuna
                storage URL, a storage object (left open), or None for the
                SQLite file ``<name>/search.db``.
            heartbeat_interval (int or None): For a storage built from a URL
                (or the default file): seconds between a running trial's
                heartbeats; None: no heartbeat.
            grace_period (int or None): Seconds without a heartbeat after
                which a trial is failed and retried; None: three intervals.

        Returns:
            dict: ``best_params``, ``best_score``, ``best_trial``, ``results``,
            ``trials`` (as in ``search.json``, which the tutorial describes) and
            ``study`` (the ``optuna.Study``; None on ChainerMN ranks but 0).

        Raises:
            ImportError: Optuna (``researchutils[search]``) or a storage URL's
                database driver is missing.
            TypeError, ValueError: A bad argument, parameter or study (the
                tutorial lists them), before any trial trains.
            OSError: The study cannot be opened, or a trial's folder is
                another owner's.

        Example:
            >>> summary = experiment.search(manager_train, manager_val,
            ...                             n_trials=20)  # doctest: +SKIP
            >>> summary["best_params"].choice  # doctest: +SKIP
            {'training/optimizer_params/alpha': 0.0123}
        """
        from researchutils._optuna import import_optuna
        import_optuna('ChainerExperiment.search')  # an ImportError naming the extra
        # The search's machinery imports Optuna at its top: loaded now, not with this module.
        from researchutils.chainer.training._experiment import search as _search
        return _search.search(self, train, val, n_trials=n_trials, timeout=timeout,
                              sampler=sampler, pruner=pruner, storage=storage,
                              heartbeat_interval=heartbeat_interval, grace_period=grace_period)

    def save(self) -> str:
        """Writes ``<name>/experiment.json``: the parameters, settings and model class.

        Classes and functions are written as ``"module:qualname"`` references
        (JSON, readable and editable); ``comm`` and ``extensions`` are not
        saved. :meth:`load` reads the file back. The file of a run that has
        started is not rewritten with other settings (:doc:`../tutorials/experiment`).

        Returns:
            str: The path of the file (only rank 0 writes under ChainerMN).

        Raises:
            ValueError: A parameter cannot be saved (a lambda, a local function),
                or the folder's run has other settings (the message names them).
            RuntimeError: Another run holds the folder (a ``FolderInUseError``).

        Example:
            >>> path = experiment.save()  # doctest: +SKIP
        """
        return saving.save(self)

    @classmethod
    def load(cls, path: str | os.PathLike[str], comm: Any = None,
             extensions: Iterable[Any] = (),
             allowed_modules: Sequence[str] = ()) -> Self:
        """Restores an experiment written by :meth:`save`.

        Loading runs no code the file chooses: every reference must be of the
        kind its key expects, from the modules that key trusts (the tutorial's
        "Trust" section, :doc:`../tutorials/experiment`). The loaded experiment
        writes and resumes in the folder it was loaded from.

        Args:
            path (str or os.PathLike): The ``experiment.json`` file or the folder
                holding it.
            comm: A ChainerMN communicator, as for the constructor.
            extensions (sequence): Extra extensions, as for the constructor.
            allowed_modules (list of str): Further modules the file may name
                (and import); only modules you trust.

        Returns:
            ChainerExperiment: Equal settings and parameters; its
            :meth:`run` resumes or returns the trained model.

        Raises:
            json.JSONDecodeError, ValueError: The file is not strict JSON, or a
                setting or reference in it is refused (naming the file and key).

        Example:
            >>> experiment = ChainerExperiment.load("./tmp/experiments/example")  # doctest: +SKIP
        """
        # A str from here on: it also prefixes the locations in error messages.
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, files.SETTINGS_FILE)
        data = json_values.load_json(path)
        # The experiment lives where it was loaded from, whatever the file says.
        folder = os.path.dirname(os.path.abspath(path))
        try:
            saved = settings.from_json(data, path, allowed_modules)
            return cls(name=os.path.basename(folder), save_path=os.path.dirname(folder),
                       comm=comm, extensions=extensions, **saved)
        except (KeyError, TypeError, ValueError) as error:
            add_note(error, 'while loading the experiment file {!r}'.format(path))
            raise
