"""ChainerPruningExtension on a plain Chainer Trainer, driven by a real Optuna study."""
import chainer
import pytest
from chainer.training import triggers

from researchutils.chainer.training.extensions import ChainerPruningExtension
from tests.support.tiny_training import make_trainer

optuna = pytest.importorskip('optuna')
optuna.logging.set_verbosity(optuna.logging.WARNING)


class Recorder(chainer.training.Extension):
    """Records main/loss at each epoch end, the error handlers and finalize calls."""

    trigger = 1, 'epoch'
    priority = chainer.training.PRIORITY_READER + 1  # before the pruning extension

    def __init__(self):
        self.losses, self.events = {}, []

    def __call__(self, trainer):
        self.losses[trainer.updater.epoch] = float(trainer.observation['main/loss'].array)

    def on_error(self, trainer, exc, tb):
        self.events.append(('on_error', type(exc).__name__))

    def finalize(self):
        self.events.append(('finalize',))


def optimize(tmp_path, pruner, pruner_trigger=(1, 'epoch'), key='main/loss', epochs=3):
    """One trial of a 4-iteration-an-epoch Trainer; the study, the trainer and the recorder."""
    study = optuna.create_study(pruner=pruner)
    seen = {}

    def objective(trial):
        trainer = make_trainer(tmp_path, stop_iteration=4 * epochs)
        seen['trainer'], seen['recorder'] = trainer, Recorder()
        trainer.extend(seen['recorder'])
        trainer.extend(ChainerPruningExtension(trial, key, pruner_trigger))
        try:
            trainer.run(show_loop_exception_msg=False)
        finally:
            seen['events_at_exit'] = list(seen['recorder'].events)
        return 0.0
    study.optimize(objective, n_trials=1)
    return study.trials[0], seen['trainer'], seen['recorder'], seen['events_at_exit']


def test_a_trial_the_pruner_rejects_ends_pruned_after_every_extension_finalized(tmp_path):
    # Every loss is above 0, so the first report prunes.
    trial, trainer, recorder, events = optimize(tmp_path, optuna.pruners.ThresholdPruner(
        upper=0.0))
    assert trial.state == optuna.trial.TrialState.PRUNED
    assert trainer.updater.epoch == 1 and trainer.updater.iteration == 4
    assert trial.intermediate_values == {1: pytest.approx(recorder.losses[1])}
    # TrialPruned left trainer.run only after Chainer's on_error and finalize.
    assert events == [('on_error', 'TrialPruned'), ('finalize',)]


def test_a_trial_not_pruned_reports_each_epoch_and_completes(tmp_path):
    trial, trainer, recorder, events = optimize(tmp_path, optuna.pruners.NopPruner())
    assert trial.state == optuna.trial.TrialState.COMPLETE
    assert trainer.updater.epoch == 3
    assert trial.intermediate_values == pytest.approx(recorder.losses)
    assert events == [('finalize',)]


def test_an_iteration_trigger_reports_at_iteration_steps(tmp_path):
    trial, trainer, _, _ = optimize(tmp_path, optuna.pruners.NopPruner(),
                                    pruner_trigger=(3, 'iteration'))
    assert sorted(trial.intermediate_values) == [3, 6, 9, 12]


def test_a_manual_schedule_trigger_is_accepted(tmp_path):
    trial, _, _, _ = optimize(tmp_path, optuna.pruners.NopPruner(),
                              pruner_trigger=triggers.ManualScheduleTrigger([1, 3], 'epoch'))
    assert sorted(trial.intermediate_values) == [1, 3]


@pytest.mark.parametrize('pruner_trigger', [
    triggers.MinValueTrigger('main/loss'), triggers.EarlyStoppingTrigger(),
    lambda trainer: True])
def test_triggers_that_give_no_step_are_refused(pruner_trigger):
    study = optuna.create_study()
    with pytest.raises(TypeError, match='pruner_trigger must be an IntervalTrigger'):
        ChainerPruningExtension(study.ask(), 'main/loss', pruner_trigger)


def test_a_missing_observation_warns_once_and_reports_nothing(tmp_path):
    with pytest.warns(RuntimeWarning, match=r"'val/MSE' is not observed at epoch 1") as caught:
        trial, _, _, _ = optimize(tmp_path, optuna.pruners.ThresholdPruner(upper=0.0),
                                  key='val/MSE')
    assert len([w for w in caught if 'is not observed' in str(w.message)]) == 1
    assert trial.state == optuna.trial.TrialState.COMPLETE and trial.intermediate_values == {}


@pytest.mark.parametrize('pruner_trigger', [(0, 'epoch'), (-2, 'iteration'),
                                            triggers.IntervalTrigger(0, 'iteration'),
                                            (float('nan'), 'epoch'), (float('inf'), 'epoch')])
def test_a_trigger_that_never_moves_on_is_refused_when_made(pruner_trigger):
    study = optuna.create_study()
    with pytest.raises(ValueError, match=r'pruner_trigger must fire every positive, finite '
                                         r'number of epochs or iterations, got the period'):
        ChainerPruningExtension(study.ask(), 'main/loss', pruner_trigger)


def test_a_fractional_epoch_period_is_accepted():
    extension = ChainerPruningExtension(optuna.create_study().ask(), 'main/loss', (0.5, 'epoch'))
    assert extension._pruner_trigger.period == 0.5


def test_a_resumed_trainer_reports_at_the_epochs_it_ends_not_at_its_first_iteration(tmp_path):
    """A run snapshotted mid-epoch 2 and resumed (a search trial's retry) reports epochs 2
    and 3 only: its trigger's state comes back with the snapshot."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    first, retry = study.ask(), study.ask()
    trainer = make_trainer(tmp_path, stop_iteration=6)
    trainer.extend(ChainerPruningExtension(first, 'main/loss', (1, 'epoch')))
    trainer.run()
    snapshot = str(tmp_path / 'snapshot')
    chainer.serializers.save_npz(snapshot, trainer)
    resumed = make_trainer(tmp_path, stop_iteration=12)
    resumed.extend(ChainerPruningExtension(retry, 'main/loss', (1, 'epoch')))
    chainer.serializers.load_npz(snapshot, resumed)
    resumed.run()
    assert sorted(study.trials[0].intermediate_values) == [1]
    assert sorted(study.trials[1].intermediate_values) == [2, 3]


@pytest.mark.parametrize('kwargs, error, message', [
    ({'pruner_trigger': 5}, TypeError, '^pruner_trigger must be'),
    ({'pruner_trigger': (1, 'epochs')}, ValueError, '^pruner_trigger must be'),
    ({'comm': object()}, TypeError, '^comm must be a ChainerMN communicator'),
])
def test_bad_arguments_are_refused_naming_them(kwargs, error, message):
    arguments = dict(trial=optuna.trial.FixedTrial({}), observation_key='val/loss',
                     pruner_trigger=(1, 'epoch'))
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        ChainerPruningExtension(**arguments)
