"""researchutils.chainer.training.extensions: trainer extensions.

Two kinds live here. :class:`SlackReport` posts a run's progress to Slack
and :class:`PreemptionSnapshot` snapshots and stops a run that a cluster
signals; only the user adds them to a Trainer. :class:`PredictorEvaluator`,
:class:`BestModelSaver` and :class:`StopOnNonNumber` are the extensions a
:class:`~researchutils.chainer.training.ChainerExperiment` puts on its own
Trainer; they work on any Trainer too.

Importing this package loads no optional dependency (so importing
:mod:`researchutils.chainer.training`, which uses the experiment's
extensions, does not either); slack_sdk is imported only when a
:class:`SlackReport` is made from a token, Optuna only when a
:class:`ChainerPruningExtension` is made.
"""
from researchutils.chainer.training.extensions.best_model_saver import BestModelSaver
from researchutils.chainer.training.extensions.chainer_pruning_extension import (
    ChainerPruningExtension,
)
from researchutils.chainer.training.extensions.predictor_evaluator import PredictorEvaluator
from researchutils.chainer.training.extensions.preemption_snapshot import (
    Preempted,
    PreemptionSnapshot,
)
from researchutils.chainer.training.extensions.slack_report import SlackReport  # NOQA
from researchutils.chainer.training.extensions.stop_on_non_number import (
    StopOnNonNumber,
    TrainingDiverged,
)

__all__ = ['BestModelSaver', 'ChainerPruningExtension', 'Preempted', 'PredictorEvaluator',
           'PreemptionSnapshot', 'SlackReport', 'StopOnNonNumber', 'TrainingDiverged']
