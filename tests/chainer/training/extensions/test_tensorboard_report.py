"""TensorBoardReport: real event files, read back with TensorBoard's own EventAccumulator;
the reference for every value is the LogReport's log file of the same run."""
import os
import subprocess
import sys

import chainer
import pytest
from chainer.training import extensions

from researchutils.chainer.training.extensions import Preempted, TensorBoardReport
from tests.support.tiny_training import Crash, crash_at, make_trainer
from tests.support.tracking_runs import logged_rows, tracked_trainer

pytest.importorskip('tensorboardX')
event_accumulator = pytest.importorskip('tensorboard.backend.event_processing.event_accumulator')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
pytestmark = pytest.mark.timeout(60)


def _scalars(folder):
    """{tag: [(step, value)]} as TensorBoard shows the folder (purged events left out)."""
    accumulator = event_accumulator.EventAccumulator(str(folder))
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()['scalars']}


def _expected(out, key):
    return [(row['iteration'], pytest.approx(row[key], rel=1e-6)) for row in logged_rows(out)]


def test_every_number_of_every_row_is_written_at_its_iteration(tmp_path):
    trainer = tracked_trainer(tmp_path, TensorBoardReport())
    trainer.run()
    scalars = _scalars(tmp_path / 'tensorboard')
    assert sorted(scalars) == ['main/accuracy', 'main/loss']
    for key in scalars:
        assert scalars[key] == _expected(tmp_path, key)
    assert [step for step, _ in scalars['main/loss']] == [2, 4, 6, 8]


def _report_values(values):
    """An extension reporting ``values`` before LogReport reads the observation."""
    @chainer.training.make_extension(trigger=(1, 'iteration'),
                                     priority=chainer.training.PRIORITY_WRITER + 1)
    def report(trainer):
        chainer.reporter.report(values)
    return report


def test_keys_that_tensorboard_would_write_as_one_tag_stay_apart(tmp_path, caplog):
    import hashlib
    trainer = tracked_trainer(tmp_path, TensorBoardReport(), stop_iteration=4)
    trainer.extend(_report_values({'acc@1': 1.0, 'acc#1': 2.0}))
    trainer.run()
    suffixed = 'acc_1_' + hashlib.sha1(b'acc#1').hexdigest()[:8]
    scalars = _scalars(tmp_path / 'tensorboard')
    assert scalars['acc_1'] == [(2, 1.0), (4, 1.0)]
    assert scalars[suffixed] == [(2, 2.0), (4, 2.0)]
    assert caplog.text.count('would both be logged as') == 1
    assert repr(suffixed) in caplog.text


def test_entries_choose_the_keys_and_epoch_steps_count_epochs(tmp_path):
    report = TensorBoardReport('events', entries=['main/loss'], step='epoch')
    trainer = tracked_trainer(tmp_path, report, log_every=4)  # 4 iterations an epoch
    trainer.run()
    scalars = _scalars(tmp_path / 'events')
    assert list(scalars) == ['main/loss']
    assert [step for step, _ in scalars['main/loss']] == [1, 2]
    assert report.logdir == str(tmp_path / 'events')


def test_hyperparameters_are_written_once_for_the_hparams_page(tmp_path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2
    parameters = {'model': {'n_units': 20}, 'lr': 0.1, 'optimizer': chainer.optimizers.Adam,
                  'augment': True}
    with pytest.raises(Preempted):
        tracked_trainer(tmp_path, TensorBoardReport(parameters=parameters), signal_at=4).run()
    tracked_trainer(tmp_path, TensorBoardReport(parameters=parameters)).run()
    accumulator = event_accumulator.EventAccumulator(str(tmp_path / 'tensorboard'))
    accumulator.Reload()
    contents = accumulator.PluginTagToContent('hparams')
    start = plugin_data_pb2.HParamsPluginData.FromString(
        contents['_hparams_/session_start_info']).session_start_info
    values = {key: getattr(value, value.WhichOneof('kind'))
              for key, value in start.hparams.items()}
    assert values == {'model/n_units': 20.0, 'lr': 0.1,
                      'optimizer': 'chainer.optimizers.adam.Adam', 'augment': True}
    assert start.hparams['augment'].WhichOneof('kind') == 'bool_value'  # a bool, not 1.0
    # Written once, by the run that started: not again by the resumed one.
    written = [value.tag for name in os.listdir(tmp_path / 'tensorboard')
               for event in EventFileLoader(str(tmp_path / 'tensorboard' / name)).Load()
               for value in event.summary.value]
    assert written.count('_hparams_/session_start_info') == 1


def test_a_run_preempted_and_resumed_shows_each_step_once(tmp_path):
    with pytest.raises(Preempted):
        tracked_trainer(tmp_path, TensorBoardReport(), signal_at=4).run()
    tracked_trainer(tmp_path, TensorBoardReport()).run()
    scalars = _scalars(tmp_path / 'tensorboard')
    assert scalars['main/loss'] == _expected(tmp_path, 'main/loss')
    assert [step for step, _ in scalars['main/loss']] == [2, 4, 6, 8]
    assert len(os.listdir(tmp_path / 'tensorboard')) == 2  # one event file a try


def test_steps_written_past_the_snapshot_resumed_from_are_purged(tmp_path):
    # The first try snapshots at iteration 4, writes rows 6 and then crashes at 7: the run
    # resumed from the snapshot writes 6 and 8 again, and TensorBoard shows each once.
    first = tracked_trainer(tmp_path, TensorBoardReport())
    first.extend(extensions.snapshot(filename='snapshot_iter_{.updater.iteration}'),
                 trigger=(4, 'iteration'))
    first.extend(crash_at(7))
    with pytest.raises(Crash):
        first.run()
    assert [step for step, _ in _scalars(tmp_path / 'tensorboard')['main/loss']] == [2, 4, 6]
    tracked_trainer(tmp_path, TensorBoardReport()).run()
    steps = [step for step, _ in _scalars(tmp_path / 'tensorboard')['main/loss']]
    assert steps == [2, 4, 6, 8]


def test_a_fresh_run_in_a_folder_of_an_earlier_run_hides_the_earlier_run(tmp_path):
    tracked_trainer(tmp_path, TensorBoardReport(), stop_iteration=8).run()
    for name in os.listdir(tmp_path):
        if name.startswith('snapshot'):
            os.remove(tmp_path / name)
    tracked_trainer(tmp_path, TensorBoardReport(), stop_iteration=4).run()
    assert [step for step, _ in _scalars(tmp_path / 'tensorboard')['main/loss']] == [2, 4]


def test_what_was_queued_is_written_when_the_run_crashes(tmp_path):
    trainer = tracked_trainer(tmp_path, TensorBoardReport())
    trainer.extend(crash_at(5))
    with pytest.raises(Crash):
        trainer.run()
    assert _scalars(tmp_path / 'tensorboard')['main/loss'] == _expected(tmp_path, 'main/loss')


def test_a_folder_that_cannot_be_made_is_an_error_at_the_first_report_naming_it(tmp_path):
    (tmp_path / 'taken').write_text('a file where the folder should be')
    trainer = tracked_trainer(tmp_path, TensorBoardReport('taken/events'))
    finalized = []

    class After(chainer.training.Extension):
        def __call__(self, trainer):
            pass

        def finalize(self):
            finalized.append(True)

    trainer.extend(After())
    with pytest.warns(RuntimeWarning, match='taken/events'):  # from finalize, not raised
        with pytest.raises(OSError, match='TensorBoardReport cannot write its event files in '
                                          '.*taken/events'):
            trainer.run()
    assert trainer.updater.iteration == 2  # the first report
    assert finalized == [True]  # the other extensions' finalize still ran


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes in a read-only folder')
def test_a_read_only_folder_is_an_error_naming_it(tmp_path):
    (tmp_path / 'events').mkdir(mode=0o500)
    with pytest.raises(OSError, match='events'):
        tracked_trainer(tmp_path, TensorBoardReport('events')).run()


def test_only_rank_zero_writes(tmp_path):
    class Rank1(object):
        rank, size = 1, 2

    tracked_trainer(tmp_path, TensorBoardReport(comm=Rank1())).run()
    assert not os.path.exists(tmp_path / 'tensorboard')


def test_a_report_reused_for_a_second_run_starts_afresh(tmp_path):
    report = TensorBoardReport()
    tracked_trainer(tmp_path / 'one', report).run()
    tracked_trainer(tmp_path / 'two', report, stop_iteration=4).run()
    assert [step for step, _ in _scalars(tmp_path / 'two' / 'tensorboard')['main/loss']] == [
        2, 4]


@pytest.mark.parametrize('arguments, error, message', [
    ({'logdir': 3}, TypeError, r'logdir must be a path \(a str or an os.PathLike\), got 3'),
    ({'entries': 'main/loss'}, TypeError, "entries must be a list of str or None, got "
                                          "'main/loss'"),
    ({'step': 'batch'}, ValueError, "step must be one of .*got 'batch'"),
    ({'parameters': 3}, TypeError, 'parameters must be a Parameters, a dict or None, got 3'),
    ({'queue_size': 0}, ValueError, 'queue_size'),
])
def test_bad_arguments_are_refused_by_name(arguments, error, message):
    with pytest.raises(error, match=message):
        TensorBoardReport(**arguments)


def test_without_tensorboardx_the_run_names_the_extra(tmp_path):
    code = ('import sys\n'
            'sys.modules["tensorboardX"] = None\n'
            'from researchutils.chainer.training.extensions import TensorBoardReport\n'
            'from tests.support.tracking_runs import tracked_trainer\n'
            'try:\n'
            '    tracked_trainer(sys.argv[1], TensorBoardReport()).run()\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n')
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    assert 'ImportError: TensorBoardReport needs tensorboardX: pip install ' \
           'researchutils[tensorboard]' in out


def test_training_without_a_log_report_is_refused_naming_it(tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.extend(TensorBoardReport())
    with pytest.raises(ValueError, match="log_report 'LogReport' names no extension"):
        trainer.run()
