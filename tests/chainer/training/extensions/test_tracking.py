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
