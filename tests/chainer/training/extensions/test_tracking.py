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
