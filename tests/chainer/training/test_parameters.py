import json

import chainer
import chainer.functions as F
import pytest

from researchutils.chainer.training import Parameters
from tests.chainer.training import tasks


def walkthrough_params():
    return Parameters(fixed_params={
        'model': {'num_inputs': 5, 'num_hidden': 20, 'num_outputs': 10},
        'training': {'batch_size': 64, 'num_epochs': 10,
                     'optimizer_cls': chainer.optimizers.Adam,
                     'optimizer_params': {'alpha': 1e-3},
                     'losses': {'L1': F.mean_absolute_error}}})


def test_nested_get_finds_a_key_in_either_part():
    params = walkthrough_params()
    assert params.nested_get('batch_size') == 64
    assert params.nested_get('num_hidden') == 20


def test_nested_get_finds_keys_of_inner_dicts():
    assert walkthrough_params().nested_get('alpha') == 1e-3


def test_nested_get_of_a_missing_key_lists_the_candidates():
    with pytest.raises(KeyError, match=r"'batchsize' is not in the parameters.*batch_size"):
        walkthrough_params().nested_get('batchsize')


def test_nested_get_returns_the_default_for_a_missing_key():
    assert walkthrough_params().nested_get('momentum', default=0.9) == 0.9


def test_nested_get_of_an_ambiguous_key_lists_its_paths():
    params = Parameters({'model': {'size': 1}, 'training': {'size': 2}})
    with pytest.raises(KeyError, match='fixed_params/model/size.*fixed_params/training/size'):
        params.nested_get('size')


def test_a_longer_path_resolves_an_ambiguous_key():
    params = Parameters({'model': {'size': 1}, 'training': {'size': 2}})
    assert params.nested_get('training/size') == 2


def test_model_part_is_the_model_kwargs():
    params = walkthrough_params()
    assert params.model == {'num_inputs': 5, 'num_hidden': 20, 'num_outputs': 10}
    assert tasks.Regressor(**Parameters({'model': {'num_hidden': 3}}).model).fc1.out_size == 3


def test_grid_gives_one_fixed_parameters_per_combination():
    params = Parameters({'training': {'num_epochs': 1}},
                        {'model': {'num_hidden': [4, 8]}, 'training': {'lr': [0.1, 0.2, 0.3]}})
    grid = list(params.grid())
    assert len(grid) == 6
    assert {(p.model['num_hidden'], p.training['lr']) for p in grid} == {
        (h, lr) for h in (4, 8) for lr in (0.1, 0.2, 0.3)}
    assert all(p.training['num_epochs'] == 1 and not p.variable_params for p in grid)
    assert grid[0].choice == {'model/num_hidden': 4, 'training/lr': 0.1}


def test_fixed_parameters_have_a_grid_of_one():
    assert list(walkthrough_params().grid()) == [walkthrough_params()]


def test_model_part_with_unpicked_variable_values_is_an_error():
    with pytest.raises(ValueError, match='grid'):
        _ = Parameters({}, {'model': {'num_hidden': [4, 8]}}).model


def test_variable_values_must_be_lists():
    with pytest.raises(ValueError, match='variable_params/training/lr must be a non-empty list'):
        Parameters({}, {'training': {'lr': 0.1}})


def test_top_level_keys_other_than_model_and_training_are_refused():
    with pytest.raises(ValueError, match='"model" and "training"'):
        Parameters({'batch_size': 3})


def test_json_round_trip_keeps_classes_and_functions():
    params = walkthrough_params()
    text = json.dumps(params.to_json())
    assert '"chainer.optimizers.adam:Adam"' in text
    assert Parameters.from_json(json.loads(text)) == params


def test_from_json_refuses_a_reference_that_runs_a_command():
    data = Parameters({'training': {'num_epochs': 1}}).to_json()
    data['fixed_params']['training']['lr_sched_cls'] = {'__object__': 'os:system'}
    with pytest.raises(ValueError, match=r"fixed_params/training/lr_sched_cls.*'os:system'"):
        Parameters.from_json(data)


def test_from_json_resolves_references_of_modules_the_caller_allows():
    params = Parameters({'training': {'metric': tasks.negative_mse}})
    data = json.loads(json.dumps(params.to_json()))
    with pytest.raises(ValueError, match='allowed_modules'):
        Parameters.from_json(data)
    assert Parameters.from_json(data, allowed_modules=['tests']) == params


def test_json_of_a_lambda_names_its_path():
    params = Parameters({'training': {'val_metrics': {'acc': lambda p, y: 0}}})
    with pytest.raises(ValueError, match='fixed_params/training/val_metrics/acc'):
        params.to_json()


def test_constructor_copies_the_dicts():
    fixed = {'training': {'num_epochs': 1}}
    params = Parameters(fixed)
    fixed['training']['num_epochs'] = 5
    assert params.nested_get('num_epochs') == 1
