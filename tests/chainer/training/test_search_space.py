"""Search ranges in Parameters: checks naming the key, JSON through experiment.json, grid."""
import json

import chainer
import numpy
import pytest

from researchutils.chainer.training import ChainerExperiment, Parameters, load_json
from researchutils.chainer.training.search_space import FloatRange, IntRange
from tests.chainer.training import tasks
from tests.support import search_studies


def ranged_params():
    return tasks.make_params(variable={
        'training': {'optimizer_params': {'alpha': FloatRange(1e-4, 1e-1, log=True)}},
        'model': {'num_hidden': IntRange(4, 32, step=4)}})


@pytest.mark.parametrize('make, message', [
    (lambda: FloatRange(2.0, 1.0), r'low=2\.0 is above high=1\.0'),
    (lambda: IntRange(5, 1), r'low=5 is above high=1'),
    (lambda: FloatRange(0.0, 1.0, log=True), r'log-scale range needs low > 0, got low=0\.0'),
    (lambda: IntRange(-2, 8, log=True), r'log-scale range needs low > 0'),
    (lambda: FloatRange(0.0, 1.0, step=0.3), r'step=0\.3 does not divide high - low = 1\.0'),
    (lambda: IntRange(0, 10, step=3), r'step=3 does not divide'),
    (lambda: FloatRange(0.0, 1.0, step=-0.5), r'step must be positive'),
    (lambda: FloatRange(1e-3, 1.0, log=True, step=0.001), r'log-scale range takes no step'),
    (lambda: FloatRange(0.0, float('inf')), r'high must be finite'),
    (lambda: FloatRange(0, 10 ** 400), r'FloatRange: high must be finite, within the largest '
                                       r'float, got 1000'),
    (lambda: FloatRange(-10 ** 400, 0), r'FloatRange: low must be finite'),
    (lambda: FloatRange(-1.5e308, 1.5e308), r'high - low overflows a float'),
    (lambda: FloatRange(-1.5e308, 1.5e308, step=1e308), r'high - low overflows a float'),
    (lambda: FloatRange(0, 1, step=5e-324), r'step=5e-324 cuts high - low = 1\.0 into more '
                                            r'steps than a float counts'),
    (lambda: IntRange(2 ** 53 + 1, 2 ** 53 + 5, step=2), r'IntRange: low=9007199254740993 is '
                                                         r'beyond 2\*\*53'),
    (lambda: IntRange(0, 2 ** 53 + 2, step=2), r'IntRange: high=9007199254740994 is beyond'),
    (lambda: IntRange(-2 ** 53 - 1, 0), r'IntRange: low=-9007199254740993 is beyond'),
])
def test_bad_ranges_are_refused_when_made(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_integer_bounds_that_a_float_holds_exactly_are_accepted():
    # Optuna stores values as floats: up to 2**53 each integer is one float.
    edge = IntRange(-2 ** 53, 2 ** 53, step=2 ** 53)
    assert [value for value in (-2 ** 53, 0, 2 ** 53) if edge.contains(value)] == [
        -2 ** 53, 0, 2 ** 53]
    assert all(float(value) == value for value in (edge.low, edge.high))


@pytest.mark.parametrize('make, message', [
    (lambda: FloatRange('0', 1.0), r"low must be a real number, got '0'"),
    (lambda: IntRange(1, 2.5), r'high must be an integer, got 2\.5'),
    (lambda: FloatRange(True, 2.0), r'low must be a real number, got True'),
    (lambda: FloatRange(0.0, 1.0, log='yes'), r'log must be True or False'),
    (lambda: IntRange(1, 10, step=None), r'IntRange: step must be a positive integer, got '
                                         r'None'),
    (lambda: IntRange(1, 10, step=2.0), r'IntRange: step must be an integer, got 2\.0'),
])
def test_ranges_of_the_wrong_type_are_refused(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_a_range_contains_both_its_bounds():
    assert FloatRange(0.5, 2.0).contains(2.0) and FloatRange(0.5, 2.0).contains(0.5)
    assert FloatRange(0.0, 1.0, step=0.25).contains(1.0)
    assert IntRange(3, 9, step=3).contains(9) and IntRange(3, 9).contains(3)
    assert not FloatRange(0.5, 2.0).contains(2.0000001)
    assert not FloatRange(0.5, 2.0).contains(float('nan'))
    assert not FloatRange(0.5, 2.0).contains(10 ** 400)  # no OverflowError


def test_an_int_range_takes_every_integer_by_default():
    values = IntRange(1, 4)
    assert values.step == 1
    assert [value for value in range(0, 6) if values.contains(value)] == [1, 2, 3, 4]
    assert values.to_json() == {'__int_range__': {'low': 1, 'high': 4, 'log': False,
                                                  'step': 1}}


def test_a_range_among_candidates_is_refused_when_made_naming_it():
    with pytest.raises(ValueError, match=r'variable_params/training/optimizer_params/alpha\[0\] '
                                         r'is FloatRange\(0\.1, 1\.0.*a range among '
                                         r'candidates'):
        tasks.make_params(variable={'training': {'optimizer_params': {
            'alpha': [FloatRange(0.1, 1), 0.01]}}})
    with pytest.raises(ValueError, match=r'variable_params/model/layers\[1\]\[0\]/width is '
                                         r'IntRange'):
        tasks.make_params(variable={'model': {'layers': [[{'width': 4}],
                                                          [{'width': IntRange(1, 8)}]]}})


def test_a_range_inside_a_fixed_value_is_refused_naming_it():
    with pytest.raises(ValueError, match=r'fixed_params/training/schedule\[1\] is FloatRange.*'
                                         r'put it in variable_params'):
        Parameters({'training': {'schedule': (0.1, FloatRange(0.1, 1.0))}})


def test_float_step_that_divides_up_to_rounding_is_accepted():
    assert FloatRange(0.0, 1.0, step=0.1).step == 0.1


def test_an_empty_list_of_choices_is_refused_naming_the_key():
    with pytest.raises(ValueError, match=r'variable_params/training/optimizer_params/alpha must '
                                         r'be a non-empty list'):
        tasks.make_params(variable={'training': {'optimizer_params': {'alpha': []}}})


def test_a_choice_json_cannot_hold_is_refused_when_made_naming_the_key():
    with pytest.raises(ValueError, match=r'variable_params/training/losses_choice\[1\] is '
                                         r'<function .*lambda.*cannot be saved'):
        Parameters({}, {'training': {'losses_choice': [chainer.functions.relu, lambda x: x]}})


def test_a_range_in_fixed_params_is_refused():
    with pytest.raises(ValueError, match=r'fixed_params/training/lr is FloatRange.*variable_'):
        Parameters({'training': {'lr': FloatRange(0.1, 1.0)}})


def test_grid_of_a_space_with_a_range_names_the_range():
    with pytest.raises(ValueError, match=r'variable_params/training/optimizer_params/alpha is '
                                         r'FloatRange\(0\.0001, 0\.1, log=True.*no grid'):
        ranged_params().grid()


def test_grid_search_of_a_space_with_a_range_names_the_range(tmp_path):
    experiment = tasks.experiment(tmp_path, ranged_params(), val_score_key='MSE')
    with pytest.raises(ValueError, match=r'variable_params/.*alpha is FloatRange'):
        experiment.grid_search(*tasks.make_managers(n_train=32, n_val=16))
    assert not (tmp_path / 'exp' / 'grid_0').exists()


def test_lists_stay_a_grid():
    params = tasks.make_params(variable={'model': {'num_hidden': [4, 8]}})
    assert [p.model for p in params.grid()] == [{'num_hidden': 4}, {'num_hidden': 8}]


def test_ranges_go_through_experiment_json_and_load_json(tmp_path):
    experiment = tasks.experiment(tmp_path, ranged_params(), val_score_key='MSE')
    path = experiment.save()
    saved = load_json(path)['params']['variable_params']
    assert saved['model']['num_hidden'] == {
        '__int_range__': {'low': 4, 'high': 32, 'log': False, 'step': 4}}
    assert saved['training']['optimizer_params']['alpha'] == {
        '__float_range__': {'low': 1e-4, 'high': 1e-1, 'log': True, 'step': None}}
    assert ChainerExperiment.load(path).params == ranged_params()


@pytest.mark.parametrize('edit, message', [
    ({'__float_range__': {'low': 1.0, 'high': 0.5}}, r'alpha: low=1\.0 is above high=0\.5'),
    ({'__float_range__': {'low': 0.0, 'high': 1.0, 'log': True}},
     r'alpha: a log-scale range needs low > 0'),
    ({'__float_range__': {'low': 0.0, 'high': 1.0, 'step': 0.3}}, r'alpha: step=0\.3 does not'),
    ({'__float_range__': {'low': 0.0, 'high': 1.0, 'code': 'os:system'}},
     r'alpha: __float_range__ holds'),
    ({'__int_range__': {'low': {'__object__': 'os:system'}, 'high': 3}},
     r'alpha: low must be an integer'),
    ({'__int_range__': {'low': 1, 'high': 3, 'step': None}},
     r'alpha: step must be a positive integer, got None'),
])
def test_bad_ranges_in_experiment_json_are_refused_naming_the_key(tmp_path, edit, message):
    experiment = tasks.experiment(tmp_path, ranged_params(), val_score_key='MSE')

    def change(saved):
        saved['params']['variable_params']['training']['optimizer_params']['alpha'] = edit
    tasks.edit_saved_experiment(experiment, change)
    with pytest.raises((ValueError, TypeError), match=message):
        ChainerExperiment.load(experiment.output_dir)


def test_a_reference_in_a_list_of_choices_follows_its_keys_rule(tmp_path):
    params = tasks.make_params(variable={'training': {'optimizer_cls': [
        chainer.optimizers.Adam, chainer.optimizers.SGD]}})
    experiment = tasks.experiment(tmp_path, params, val_score_key='MSE')

    def change(saved):
        saved['params']['variable_params']['training']['optimizer_cls'][1] = {
            '__object__': 'os:system'}
    tasks.edit_saved_experiment(experiment, change)
    with pytest.raises(ValueError, match=r"optimizer_cls: the reference 'os:system'"):
        ChainerExperiment.load(experiment.output_dir)


def test_choose_takes_only_values_the_space_allows():
    params = ranged_params()
    chosen = params.choose({'training/optimizer_params/alpha': 0.01, 'model/num_hidden': 12})
    assert chosen.model == {'num_hidden': 12}
    assert chosen.training['optimizer_params'] == {'alpha': 0.01}
    for choice, message in [
            ({'training/optimizer_params/alpha': 0.5, 'model/num_hidden': 12}, r'alpha: 0\.5'),
            ({'training/optimizer_params/alpha': 0.01, 'model/num_hidden': 13}, r'hidden: 13'),
            ({'training/optimizer_params/alpha': 'os:system', 'model/num_hidden': 12},
             r'alpha: .os:system'),
            ({'training/optimizer_params/alpha': 0.01}, r'a value to each variable')]:
        with pytest.raises(ValueError, match=message):
            params.choose(choice)


def test_choose_compares_candidates_by_their_json_form():
    params = Parameters({}, {'model': {'weights': [numpy.zeros(2), numpy.ones(2)]}})
    assert params.choose({'model/weights': numpy.ones(2)}).model['weights'].tolist() == [1, 1]
    with pytest.raises(ValueError, match='not one of the values'):
        params.choose({'model/weights': numpy.full(2, 2.0)})


def test_an_experiment_checks_a_ranged_space_when_made(tmp_path):
    params = Parameters(tasks.make_params().fixed_params,
                        {'training': {'num_epochs': IntRange(0, 3)}})
    with pytest.raises(ValueError, match='num_epochs'):
        tasks.experiment(tmp_path, params)
    assert json.dumps(ranged_params().to_json())  # ranges are JSON


def test_candidates_equal_in_python_but_of_other_types_stay_apart_in_a_search(tmp_path):
    pytest.importorskip('optuna')
    params = Parameters(tasks.make_params(num_epochs=1).fixed_params,
                        {'model': {'marker': [1, True, 1.0]}})
    chosen = []

    class Remember(tasks.Regressor):
        def __init__(self, marker, **kwargs):
            chosen.append(marker)
            super().__init__(**kwargs)
    experiment = ChainerExperiment(params, Remember, name='exp', save_path=str(tmp_path),
                                   val_score_key='MSE', seed=0)
    study_folder = tmp_path / 'exp'
    study_folder.mkdir()
    study = search_studies.create('sqlite:///' + str(study_folder / 'search.db'))
    for marker in (True, 1.0, 1):
        study.enqueue_trial({'model/marker': json.dumps(marker)})  # the labels Optuna holds
    summary = experiment.search(*tasks.make_managers(n_train=32, n_val=16), n_trials=3)
    picked = [choice['model/marker'] for choice, _ in summary['results']]
    assert [type(marker) for marker in picked] == [bool, float, int]


@pytest.mark.parametrize('range_cls', [FloatRange, IntRange])
@pytest.mark.parametrize('where', [5, b'lr', ['lr']])
def test_where_that_is_not_a_str_is_refused(range_cls, where):
    with pytest.raises(TypeError, match='^where must be a str or None'):
        range_cls(0, 1, where=where)


# Survivors of mutation testing (docs/testing.rst): what a user of the ranges sees -----------

def test_a_range_of_one_value_is_a_range():
    assert (FloatRange(1.0, 1.0).low, IntRange(3, 3).high) == (1.0, 3)


@pytest.mark.parametrize('arguments, error, named', [
    (dict(low=0.0, high=1.0, step=0), ValueError, ['step', '0']),
    (dict(low=0.0, high=1.0, step=-0.5), ValueError, ['step', '-0.5']),
    (dict(low=0.0, high=1.0, log='yes'), TypeError, ['log', "'yes'"]),
    (dict(low=1.0, high=10.0, log=True, step=1.0), ValueError, ['step=1.0', 'log']),
    (dict(low=0.5, high=1.5, step=0.3), ValueError, ['step=0.3', 'high - low = 1.0']),
    (dict(low=-1e300, high=1e300, step=1e-10), ValueError, ['step=1e-10', 'more steps',
                                                            'high - low = 2e+300']),
    (dict(low=-1.7e308, high=1.6e308), ValueError, ['-1.7e+308', '1.6e+308', 'overflows']),
])
def test_a_bad_float_range_is_refused_naming_where_the_argument_and_its_value(
        arguments, error, named):
    with pytest.raises(error) as info:
        FloatRange(where='variable/lr', **arguments)
    message = str(info.value)
    assert message.startswith('variable/lr: ')
    assert all(part in message for part in named), message


def test_ranges_are_equal_only_to_ranges_of_their_class_and_fields():
    assert FloatRange(0.0, 1.0, step=0.5) == FloatRange(0.0, 1.0, step=0.5)
    assert FloatRange(0.0, 1.0) != FloatRange(0.0, 2.0)
    # The same numbers, another kind of range.
    assert FloatRange(0.0, 1.0, step=1.0) != IntRange(0, 1)
    assert FloatRange(0.0, 1.0) != (0.0, 1.0, False, None)


def test_equal_ranges_hash_alike():
    assert len({FloatRange(0.0, 1.0), FloatRange(0, 1), IntRange(0, 1)}) == 2
    assert hash(IntRange(0, 8, step=2)) == hash(IntRange(0, 8, step=2))


def test_repr_shows_every_field():
    assert repr(FloatRange(0, 1, step=0.5)) == 'FloatRange(0.0, 1.0, log=False, step=0.5)'


def test_contains_counts_steps_from_low():
    assert IntRange(1, 10, step=3).contains(4) and not IntRange(1, 10, step=3).contains(3)
    assert FloatRange(0.1, 1.0, step=0.3).contains(0.4)
    assert not FloatRange(0.1, 1.0, step=0.3).contains(0.5)


def test_an_integer_range_contains_no_float_even_a_whole_one():
    assert not IntRange(0, 10).contains(3.0)
    assert IntRange(0, 10).contains(3)
