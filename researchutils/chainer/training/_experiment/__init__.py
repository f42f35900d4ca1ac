"""ChainerExperiment's private machinery, one job per module (imports nothing itself).

* ``checks``: the checks of each constructor argument and of the "training" parameters;
* ``protocol``: ``Experiment``, what the machinery reads of a ChainerExperiment (by which it
  types the experiments it is given, with no import of the class's module);
* ``settings``: the one table of the constructor's arguments, read by the constructor's
  binding, ``replace`` and ``experiment.json`` (save and load);
* ``model``: the model of a run on its devices, and the Predictor of a model;
* ``trainer``: the Trainer of a run (optimizers, ChainerMN shards, extensions, resume);
* ``files``: the names of the folder's files, and which snapshot or model file to take;
* ``run_state``: ``run_state.json``, written when a run finishes and checked when read;
* ``model_selection``: ``kfold`` and ``grid_search``, one experiment per fold or combination;
* ``search``: ``ChainerExperiment.search`` with Optuna, a package of its own, imported only
  when a search starts (it imports Optuna at its top); it builds on ``settings`` and
  ``model_selection``, which is why it lives here.

The experiment's plug-ins live in Chainer's rooms (``training/updaters``, ``extensions``,
``triggers``) and import nothing from here; what the experiment shares with them lives one
level up (``training/_scores.py``). Tests mirror this package in
``tests/chainer/training/_experiment/``.
"""
