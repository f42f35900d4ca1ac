"""A search's MLflow runs: the study's parent run, each trial's tracking and the mark of its
end, on a real MLflow file store in the test's folder (read back with MLflow's client)."""
import logging
import re
import sys

import pytest

from researchutils.chainer.training._experiment.search import folders, tracking
from tests.chainer.training import search_tasks, tasks

optuna = pytest.importorskip('optuna')
mlflow = pytest.importorskip('mlflow')
optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDY_ID = '0123456789abcdef' * 2
LOGGER = 'researchutils.chainer.training.experiment'


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The URI of an MLflow file store of the test's own (MLflow 3 asks to be let use one)."""
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')
    return (tmp_path / 'mlruns').as_uri()


@pytest.fixture
def broken_store(tmp_path, monkeypatch):
    """The URI of an MLflow file store that cannot be made: its folder is below a file."""
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')
    (tmp_path / 'a_file').write_text('')
    return (tmp_path / 'a_file' / 'mlruns').as_uri()


def _experiment(tmp_path, tracking_setting):
    return tasks.experiment(tmp_path, search_tasks.search_params(), val_score_key='MSE',
                            tracking=tracking_setting)


def _study(name='exp'):
    return optuna.create_study(study_name=name)


def _runs(store, experiment_name):
    client = mlflow.MlflowClient(store)
    found = client.get_experiment_by_name(experiment_name)
    return [] if found is None else client.search_runs([found.experiment_id])


def _trial_run(store, experiment, study, folder):
    """The run of a new trial of ``study`` trained in ``folder``, made with the tracking the
    search gives it (as its MLflowReport makes it); returns the run's id."""
    trial = study.ask()
    trial_tracking = tracking.trial_tracking(experiment, trial, folder)
    client = mlflow.MlflowClient(store)
    found = client.get_experiment_by_name(trial_tracking['mlflow_experiment'])
    experiment_id = (client.create_experiment(trial_tracking['mlflow_experiment'])
                     if found is None else found.experiment_id)
    return client.create_run(experiment_id, tags=trial_tracking['tags'],
                             run_name=trial_tracking['run_name']).info.run_id


@pytest.mark.parametrize('mlflow_experiment', [None, 'searches'])
def test_a_study_has_one_parent_run_found_again_by_the_study_s_id(
        tmp_path, store, mlflow_experiment):
    setting = {'mlflow': store, 'mlflow_experiment': mlflow_experiment}
    experiment = _experiment(tmp_path, setting)
    study = _study('the-study')
    first = tracking.with_parent_run(experiment, study, STUDY_ID)
    name = mlflow_experiment or 'exp'  # else the experiment's name
    assert first.tracking == dict(experiment.tracking, mlflow_experiment=name,
                                  parent_run_id=first.tracking['parent_run_id'])
    assert first.output_dir == experiment.output_dir and first.params is experiment.params
    assert experiment.tracking['mlflow_experiment'] == mlflow_experiment  # left as it was
    run, = _runs(store, name)
    assert run.info.run_id == first.tracking['parent_run_id']
    assert run.info.run_name == 'the-study' and run.info.status == 'RUNNING'
    assert run.data.tags[tracking.STUDY_TAG] == STUDY_ID
    assert run.data.tags['study'] == 'the-study'
    # The key MLflow keeps, by which every search of the study finds the run, whichever
    # process or release made it.
    assert run.data.tags['researchutils.run_key'] == 'study-' + STUDY_ID
    # A second process of the search (or a later search) of the study finds it.
    again = tracking.with_parent_run(experiment, study, STUDY_ID)
    assert again.tracking == first.tracking
    # Another study of the same name (made anew) has a run of its own.
    other = tracking.with_parent_run(experiment, study, 'f' * 32)
    assert other.tracking['parent_run_id'] != first.tracking['parent_run_id']
    assert len(_runs(store, name)) == 2


def test_mlflow_true_makes_the_parent_run_at_mlflow_s_default_tracking_uri(
        tmp_path, store, monkeypatch):
    monkeypatch.setenv('MLFLOW_TRACKING_URI', store)
    experiment = tracking.with_parent_run(_experiment(tmp_path, {'mlflow': True}), _study(),
                                          STUDY_ID)
    run, = _runs(store, 'exp')
    assert experiment.tracking['parent_run_id'] == run.info.run_id


def test_a_parent_run_that_cannot_be_made_is_a_warning_and_the_trials_log_alone(
        tmp_path, broken_store, caplog):
    experiment = _experiment(tmp_path, {'mlflow': broken_store})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        changed = tracking.with_parent_run(experiment, _study('the-study'), STUDY_ID)
    assert changed.tracking == dict(experiment.tracking, mlflow_experiment='exp')
    record, = caplog.records
    assert record.levelno == logging.WARNING and record.name == LOGGER
    # The study, and what went wrong: the error's type and its text (the store's path).
    assert 'the-study' in record.getMessage()
    assert 'NotADirectoryError' in record.getMessage() and 'a_file' in record.getMessage()


def test_without_mlflow_installed_the_warning_names_the_extra(tmp_path, store, monkeypatch,
                                                              caplog):
    monkeypatch.setitem(sys.modules, 'mlflow', None)  # as where it is not installed
    experiment = _experiment(tmp_path, {'mlflow': store})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        changed = tracking.with_parent_run(experiment, _study(), STUDY_ID)
        tracking.mark_trial(changed, folders.relative_folder(STUDY_ID, 0), 'PRUNED')
    assert changed.tracking == dict(experiment.tracking, mlflow_experiment='exp')
    assert len(caplog.records) == 2
    for record in caplog.records:
        message = record.getMessage()
        assert 'ImportError' in message and 'researchutils[mlflow]' in message
        assert re.search(r'\bsearch with mlflow tracking\b', message.lower())


@pytest.mark.parametrize('setting', [None, {'tensorboard': True}])
def test_without_mlflow_the_search_makes_no_run(tmp_path, store, monkeypatch, setting):
    # Were it to ask MLflow, MLflow's default tracking URI would be this store.
    monkeypatch.setenv('MLFLOW_TRACKING_URI', store)
    experiment = _experiment(tmp_path, setting)
    study = _study()
    assert tracking.with_parent_run(experiment, study, STUDY_ID) is experiment
    assert tracking.mark_trial(experiment, folders.relative_folder(STUDY_ID, 0), 'PRUNED') \
        is None
    assert not (tmp_path / 'mlruns').exists()


def test_a_trial_s_run_is_a_child_of_the_study_s_run_named_and_tagged_after_the_trial(
        tmp_path, store):
    experiment = _experiment(tmp_path, {'mlflow': store, 'tensorboard': True})
    study = _study('the-study')
    with_parent = tracking.with_parent_run(experiment, study, STUDY_ID)
    study.ask()
    trial = study.ask()
    folder = folders.relative_folder(STUDY_ID, 1)
    assert tracking.trial_tracking(with_parent, trial, folder) == dict(
        with_parent.tracking, run_name='trial_1', tags={
            'study': 'the-study', 'trial': '1', tracking.FOLDER_TAG: folder,
            'mlflow.parentRunId': with_parent.tracking['parent_run_id']})
    # Without a parent run (none could be made), the trial's run is tagged all the same.
    assert tracking.trial_tracking(experiment, trial, folder) == dict(
        experiment.tracking, mlflow_experiment='exp', run_name='trial_1', tags={
            'study': 'the-study', 'trial': '1', tracking.FOLDER_TAG: folder})


def test_a_trial_tracked_by_tensorboard_alone_has_its_run_name_and_no_parent(tmp_path):
    experiment = _experiment(tmp_path, {'tensorboard': True})
    trial = _study().ask()
    trial_tracking = tracking.trial_tracking(experiment, trial, 'study_01234567/trial_0')
    assert trial_tracking['tensorboard'] is True and trial_tracking['run_name'] == 'trial_0'
    assert 'mlflow.parentRunId' not in trial_tracking['tags']


def test_a_trial_of_an_experiment_without_tracking_has_none(tmp_path):
    trial = _study().ask()
    assert tracking.trial_tracking(_experiment(tmp_path, None), trial,
                                   'study_01234567/trial_0') is None


@pytest.mark.parametrize('state, status', [('PRUNED', 'KILLED'), ('COMPLETE', 'RUNNING'),
                                           ('FAIL', 'RUNNING')])
def test_a_trial_s_run_is_marked_with_its_state_and_a_pruned_one_ended_killed(
        tmp_path, store, state, status):
    # A complete or failed trial's run is ended by its MLflowReport, as the training ends.
    experiment = tracking.with_parent_run(_experiment(tmp_path, {'mlflow': store}), _study(),
                                          STUDY_ID)
    study = _study()
    marked = _trial_run(store, experiment, study, folders.relative_folder(STUDY_ID, 0))
    other = _trial_run(store, experiment, study, folders.relative_folder(STUDY_ID, 1))
    # A run of the same folder in another MLflow experiment is another search's.
    elsewhere = _trial_run(store, _experiment(tmp_path / 'b', {'mlflow': store,
                                                               'mlflow_experiment': 'b'}),
                           study, folders.relative_folder(STUDY_ID, 0))
    tracking.mark_trial(experiment, folders.relative_folder(STUDY_ID, 0), state)
    runs = {run.info.run_id: run for run in _runs(store, 'exp') + _runs(store, 'b')}
    assert runs[marked].data.tags[tracking.STATE_TAG] == state
    assert runs[marked].info.status == status
    for untouched in (other, elsewhere):
        assert tracking.STATE_TAG not in runs[untouched].data.tags
        assert runs[untouched].info.status == 'RUNNING'


def test_marking_a_trial_of_an_mlflow_experiment_not_made_yet_does_nothing(
        tmp_path, store, caplog):
    experiment = _experiment(tmp_path, {'mlflow': store})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        tracking.mark_trial(experiment, folders.relative_folder(STUDY_ID, 0), 'PRUNED')
    assert caplog.records == []
    assert _runs(store, 'exp') == []
    assert mlflow.MlflowClient(store).get_experiment_by_name('exp') is None


def test_a_run_that_cannot_be_marked_is_a_warning_naming_the_folder_and_state(
        tmp_path, broken_store, caplog):
    experiment = _experiment(tmp_path, {'mlflow': broken_store})
    folder = folders.relative_folder(STUDY_ID, 3)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        tracking.mark_trial(experiment, folder, 'PRUNED')
    record, = caplog.records
    assert record.levelno == logging.WARNING and record.name == LOGGER
    assert folder in record.getMessage() and 'PRUNED' in record.getMessage()
    assert 'NotADirectoryError' in record.getMessage() and 'a_file' in record.getMessage()
