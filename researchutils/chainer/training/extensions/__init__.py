"""researchutils.chainer.training.extensions: trainer extensions.

Two kinds live here. :class:`SlackReport` posts a run's progress to Slack,
:class:`TensorBoardReport` and :class:`MLflowReport` write it for TensorBoard
and MLflow, and :class:`PreemptionSnapshot` snapshots and stops a run that a
cluster signals; the user adds them to a Trainer (the experiment adds the
trackers when asked). :class:`PredictorEvaluator`,
:class:`BestModelSaver` and :class:`StopOnNonNumber` are the extensions a
:class:`~researchutils.chainer.training.ChainerExperiment` puts on its own
Trainer; they work on any Trainer too.

Each name is loaded on first use, and no extension imports the experiment: importing one
loads that extension alone, and no optional dependency (slack_sdk is imported only when a
:class:`SlackReport` is made from a token, Optuna only when a
:class:`ChainerPruningExtension` is made, tensorboardX and mlflow when a run starts).
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'best_model_saver': ['BestModelSaver'],
    'chainer_pruning_extension': ['ChainerPruningExtension'],
    'mlflow_report': ['MLflowReport', 'send_unsent'],
    'predictor_evaluator': ['PredictorEvaluator'],
    'preemption_snapshot': ['Preempted', 'PreemptionSnapshot'],
    'slack_report': ['SlackReport'],
    'stop_on_non_number': ['StopOnNonNumber', 'TrainingDiverged'],
    'tensorboard_report': ['TensorBoardReport'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.training.extensions.best_model_saver import (
        BestModelSaver as BestModelSaver,
    )
    from researchutils.chainer.training.extensions.chainer_pruning_extension import (
        ChainerPruningExtension as ChainerPruningExtension,
    )
    from researchutils.chainer.training.extensions.mlflow_report import (
        MLflowReport as MLflowReport,
    )
    from researchutils.chainer.training.extensions.mlflow_report import (
        send_unsent as send_unsent,
    )
    from researchutils.chainer.training.extensions.predictor_evaluator import (
        PredictorEvaluator as PredictorEvaluator,
    )
    from researchutils.chainer.training.extensions.preemption_snapshot import Preempted as Preempted
    from researchutils.chainer.training.extensions.preemption_snapshot import (
        PreemptionSnapshot as PreemptionSnapshot,
    )
    from researchutils.chainer.training.extensions.slack_report import SlackReport as SlackReport
    from researchutils.chainer.training.extensions.stop_on_non_number import (
        StopOnNonNumber as StopOnNonNumber,
    )
    from researchutils.chainer.training.extensions.stop_on_non_number import (
        TrainingDiverged as TrainingDiverged,
    )
    from researchutils.chainer.training.extensions.tensorboard_report import (
        TensorBoardReport as TensorBoardReport,
    )
