"""What the trackers take from a run (_tracking): hyper-parameters and LogReport rows."""
import chainer
import numpy
import pytest
from chainer.training import extensions

from researchutils.chainer.training import Parameters
from researchutils.chainer.training.extensions._tracking import LogRows, flat_hyperparameters
from tests.support.tiny_training import make_trainer


def test_parameters_give_their_fixed_tree_by_path_and_a_search_choice_by_its_names():
    params = Parameters({'model': {'n_units': 20}, 'training': {
        'optimizer_cls': chainer.optimizers.SGD, 'optimizer_params': {'lr': 0.1}}})
    params.choice = {'training/optimizer_params/lr': 0.1}
    assert flat_hyperparameters(params) == {
        'model/n_units': 20, 'training/optimizer_cls': 'chainer.optimizers.sgd.SGD',
        'training/optimizer_params/lr': 0.1}


def test_numpy_scalars_become_numbers_and_other_objects_their_repr():
    assert flat_hyperparameters({'a': numpy.int64(3), 'b': numpy.float32(0.5), 'c': [1, 2],
                                 'd': True, 'e': None}) == {
        'a': 3, 'b': 0.5, 'c': '[1, 2]', 'd': True, 'e': 'None'}
    assert type(flat_hyperparameters({'a': numpy.int64(3)})['a']) is int


def _rows(tmp_path, entries, step):
    trainer = make_trainer(tmp_path, stop_iteration=8)
    trainer.extend(extensions.LogReport(trigger=(4, 'iteration')))
    rows = LogRows('LogReport', entries, step)
    taken = []

    @chainer.training.make_extension(trigger=(4, 'iteration'))
    def take(trainer):
        taken.append(rows.new(trainer))

    trainer.extend(take)
    trainer.run()
    return taken


def test_each_call_gives_the_new_rows_numbers_at_their_step(tmp_path):
    taken = _rows(tmp_path, None, 'iteration')
    assert [[step for step, _ in rows] for rows in taken] == [[4], [8]]
    assert sorted(taken[0][0][1]) == ['main/accuracy', 'main/loss']


def test_entries_choose_the_keys_and_epoch_is_the_step_when_asked(tmp_path):
    taken = _rows(tmp_path, ['main/loss', 'missing'], 'epoch')
    assert [(step, sorted(values)) for rows in taken for step, values in rows] == [
        (1, ['main/loss']), (2, ['main/loss'])]


def test_a_value_that_is_no_number_is_left_out(tmp_path):
    trainer = make_trainer(tmp_path, stop_iteration=2)
    log_report = extensions.LogReport(trigger=(2, 'iteration'))
    trainer.extend(log_report)
    trainer.run()
    log_report._log.append({'epoch': 1, 'iteration': 3, 'text': 'no number', 'x': 2})
    rows = LogRows(log_report, None, 'iteration')
    rows.taken = 1
    assert rows.new(trainer)[-1] == (3, {'x': 2.0})


def test_an_unknown_step_is_refused_naming_step():
    from researchutils.chainer.training.extensions._tracking import check_step
    with pytest.raises(ValueError, match="step must be one of .*got 'batch'"):
        check_step('batch')


def test_a_bool_stays_a_bool():
    # True == 1 in Python: the type is what tells "True" from "1" in a tracker.
    flat = flat_hyperparameters({'augment': True, 'count': 1, 'off': False})
    assert [type(flat[name]) for name in ('augment', 'count', 'off')] == [bool, int, bool]


def _distinct(logger_name='test_tracking'):
    import logging

    from researchutils.chainer.training.extensions._mlflow_names import MAX_NAME, mlflow_name
    from researchutils.chainer.training.extensions._tracking import DistinctNames
    return DistinctNames(mlflow_name, MAX_NAME, logging.getLogger(logger_name), 'Test',
                         ('MLflow', 'metric'))


@pytest.mark.parametrize('first, second', [
    ('y' * 260 + 'A', 'y' * 260 + 'B'),  # cut to one 250-character name
    ('acc@1', 'acc#1'),  # cleaned to one name
    ('acc@1', 'acc_1'),  # a name MLflow takes, after a cleaned one that took it
])
def test_two_keys_never_share_a_name_and_one_warning_says_which_became_which(
        first, second, caplog):
    import hashlib
    names = _distinct()
    one, two = names(first), names(second)
    assert one != two and len(one) <= 250 and len(two) <= 250
    assert two.endswith('_' + hashlib.sha1(second.encode()).hexdigest()[:8])
    assert (names(first), names(second)) == (one, two)  # asked again: the same
    again = _distinct()  # as in a resumed run's process
    assert (again(first), again(second)) == (one, two)
    collisions = [record.getMessage() for record in caplog.records
                  if 'would both be' in record.getMessage()]
    assert len(collisions) == 2  # one for each of the two DistinctNames
    assert all(repr(first) in message and repr(second) in message and repr(one) in message
               and repr(two) in message for message in collisions)


def test_a_name_the_tracker_takes_is_kept_and_a_cleaned_one_is_said_once(caplog):
    names = _distinct()
    assert [names(key) for key in ('main/loss', 'val/acc@1', 'val/acc@1')] == [
        'main/loss', 'val/acc_1', 'val/acc_1']
    assert [record.getMessage() for record in caplog.records] == [
        "Test: MLflow refuses the metric name 'val/acc@1'; it is logged as 'val/acc_1'"]


def test_a_collision_warning_names_the_extension_the_kind_and_the_shared_name(caplog):
    names = _distinct()
    names('acc@1')
    names('acc#1')
    [message] = [record.getMessage() for record in caplog.records if 'both' in record.getMessage()]
    assert message == ("Test: the metric names 'acc@1' and 'acc#1' would both be logged as "
                       "'acc_1'; 'acc@1' is logged as 'acc_1' and 'acc#1' as 'acc_1_9eb97df2'")


def test_without_a_length_limit_a_colliding_name_keeps_its_whole_form():
    import hashlib
    import logging

    from researchutils.chainer.training.extensions._tracking import DistinctNames
    names = DistinctNames(lambda key: key.replace('@', '_'), None, logging.getLogger('t'), 'T',
                          ('TensorBoard', 'scalar'))
    long = 'z' * 300
    assert names(long + '_') == long + '_'
    assert names(long + '@') == long + '__' + hashlib.sha1((long + '@').encode()).hexdigest()[:8]


def test_when_no_suffix_can_tell_two_keys_apart_it_is_an_error_naming_the_key():
    import logging

    from researchutils.chainer.training.extensions._tracking import DistinctNames
    names = DistinctNames(lambda key: 'same', None, logging.getLogger('t'), 'T', ('X', 'y'))
    assert names('a') == 'same'
    with pytest.raises(ValueError, match="T: no distinct name for 'b'"):
        names('b')


def test_classes_and_functions_are_named_by_their_dotted_path_other_callables_by_repr():
    import functools
    partial = functools.partial(max, 1)
    assert flat_hyperparameters({'cls': numpy.ndarray, 'function': numpy.mean,
                                 'partial': partial}) == {
        'cls': 'numpy.ndarray', 'function': 'numpy.mean', 'partial': repr(partial)}


def test_a_parameters_without_a_choice_gives_its_fixed_tree_and_other_objects_are_refused():
    params = Parameters({'model': {'n_units': 20}})
    params.choice = None
    assert flat_hyperparameters(params) == {'model/n_units': 20}
    params.choice = {'lr': 0.5}  # a search's choice, under the search's own name
    assert flat_hyperparameters(params) == {'model/n_units': 20, 'lr': 0.5}
    with pytest.raises(TypeError, match='parameters must be a Parameters, a dict or None, '
                                        'got 5'):
        flat_hyperparameters(5)


def test_arguments_are_checked_and_given_back():
    from researchutils.chainer.training.extensions._tracking import (
        check_entries,
        check_log_report,
        check_step,
    )
    assert check_entries(None) is None
    assert check_entries(('a', 'b')) == ['a', 'b'] and type(check_entries(('a',))) is list
    for bad in ('main/loss', ['a', 1], 5):
        with pytest.raises(TypeError) as refused:
            check_entries(bad)
        assert str(refused.value) == 'entries must be a list of str or None, got {!r}'.format(
            bad)
    log_report = extensions.LogReport()
    assert check_log_report(log_report) is log_report and check_log_report('Log') == 'Log'
    with pytest.raises(TypeError, match='log_report must be the name of a LogReport or a '
                                        'LogReport, got 5'):
        check_log_report(5)
    assert check_step('epoch') == 'epoch' and check_step('iteration') == 'iteration'
    with pytest.raises(ValueError) as refused:
        check_step('batch')
    assert str(refused.value) == "step must be one of ('iteration', 'epoch'), got 'batch'"


def _log_with(rows):
    log_report = extensions.LogReport()
    log_report._log.extend(rows)
    return log_report


def test_a_one_element_array_or_variable_is_a_number_a_longer_array_is_left_out(tmp_path):
    trainer = make_trainer(tmp_path, stop_iteration=1)
    trainer.extend(_log_with([{
        'epoch': 1, 'iteration': 2, 'variable': chainer.Variable(numpy.array([0.5])),
        'array': numpy.array([[2.0]], numpy.float32), 'pair': numpy.zeros(2),
        'scalar': numpy.float32(1.5), 'flag': True, 'nan': float('nan')}]), name='Log')
    [(step, values)] = LogRows('Log', None, 'iteration').new(trainer)
    assert step == 2
    nan = values.pop('nan')
    assert nan != nan  # NaN kept
    assert values == {'variable': 0.5, 'array': 2.0, 'scalar': 1.5, 'flag': 1.0}
    assert all(type(value) is float for value in values.values())


def test_rows_taken_accumulate_and_the_last_step_taken_is_the_last_row_s(tmp_path):
    trainer = make_trainer(tmp_path, stop_iteration=1)
    log_report = _log_with([])
    trainer.extend(log_report, name='Log')
    rows = LogRows('Log', None, 'iteration')
    assert rows.last_step_taken(trainer) == -1
    for iteration in (2, 4, 6):
        log_report._log.append({'epoch': 1, 'iteration': iteration, 'x': float(iteration)})
        assert rows.new(trainer) == [(iteration, {'x': float(iteration)})]
        assert rows.last_step_taken(trainer) == iteration
    assert rows.taken == 3
    rows.taken = 5  # more than the log holds (a log not yet restored)
    assert rows.last_step_taken(trainer) == -1
    epochs = LogRows(log_report, None, 'epoch')
    epochs.taken = 2
    assert epochs.last_step_taken(trainer) == 1


def test_a_log_report_not_on_the_trainer_is_refused_naming_it(tmp_path):
    trainer = make_trainer(tmp_path, stop_iteration=1)
    with pytest.raises(ValueError, match="Who: log_report 'Missing' names no extension of the "
                                         "trainer; extend the trainer with a LogReport first"):
        LogRows('Missing', None, 'iteration').check(trainer, 'Who')
    LogRows(extensions.LogReport(), None, 'iteration').check(trainer, 'Who')  # not looked up
    trainer.extend(extensions.LogReport(), name='Present')
    LogRows('Present', None, 'iteration').check(trainer, 'Who')  # found: no error


def test_the_rows_taken_and_a_driven_log_report_go_into_the_snapshot():
    from chainer.serializers import DictionarySerializer, NpzDeserializer
    log_report = _log_with([{'epoch': 1, 'iteration': 2, 'x': 1.0}])
    rows = LogRows(log_report, None, 'iteration')
    rows.taken = 1
    saved = DictionarySerializer()
    rows.serialize(saved)
    assert int(saved.target['_rows_taken']) == 1
    assert '_log_report/_log' in saved.target
    restored = LogRows(extensions.LogReport(), None, 'iteration')
    restored.serialize(NpzDeserializer(saved.target))
    assert restored.taken == 1
    assert restored.log_report.log == log_report.log
