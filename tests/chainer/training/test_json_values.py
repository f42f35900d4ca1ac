"""json_values: parameters as JSON, read back with their classes, tuples and arrays."""
import json
import re

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import Parameters, json_values


def test_json_values_round_trip():
    value = {'trigger': (1, 'epoch'), 'array': np.arange(3, dtype=np.int16),
             'optimizer_cls': chainer.optimizers.SGD, 'scalar': np.float32(0.5),
             'list': [None, True]}
    restored = json_values.from_json_value(json.loads(json.dumps(
        json_values.to_json_value(value))))
    assert restored['trigger'] == (1, 'epoch')
    assert restored['optimizer_cls'] is chainer.optimizers.SGD
    assert restored['array'].dtype == np.int16 and list(restored['array']) == [0, 1, 2]
    assert restored['scalar'] == 0.5 and restored['list'] == [None, True]


def test_a_value_json_cannot_hold_is_refused_naming_its_path():
    with pytest.raises(ValueError, match=r"training/bad is .*object"):
        json_values.to_json_value({'bad': object()}, 'training')


def test_a_non_string_key_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"training has the key 1"):
        json_values.to_json_value({1: 'a'}, 'training')


def test_dumps_json_is_indented_and_ends_with_a_newline():
    assert json_values.dumps_json({'a': [1]}) == '{\n  "a": [\n    1\n  ]\n}\n'


def _written(tmp_path, text, name='settings.json'):
    path = tmp_path / name
    path.write_bytes(text.encode('utf-8') if isinstance(text, str) else text)
    return str(path)


def test_load_json_refuses_a_repeated_key_in_a_nested_object_naming_key_and_file(tmp_path):
    path = _written(tmp_path, '{"alpha": 1, "inner": {"beta": [1], "beta": [2]}}')
    with pytest.raises(ValueError, match=r"settings.json: the key 'beta' appears twice"):
        json_values.load_json(path)


def test_load_json_reads_what_dumps_json_writes(tmp_path):
    value = {'best_score': None, 'results': [{'score': 1.5}], 'name': 'é'}
    loaded = json_values.load_json(_written(tmp_path, json_values.dumps_json(value)))
    assert loaded == value


def test_load_json_reads_nan_that_files_of_older_versions_hold(tmp_path):
    loaded = json_values.load_json(_written(tmp_path, '{"best_score": NaN, "x": -Infinity}'))
    assert np.isnan(loaded['best_score']) and loaded['x'] == -np.inf


@pytest.mark.parametrize('value, where', [
    (float('nan'), 'value'), (float('inf'), 'value'),
    ({'best_score': float('nan')}, r"value\['best_score'\]"),
    ({'results': [1.0, {'score': -float('inf')}]}, r"value\['results'\]\[1\]\['score'\]"),
])
def test_dumps_json_writes_strict_json_refusing_nan_and_infinity(value, where):
    with pytest.raises(ValueError, match='^{} is .*strict JSON has no NaN'.format(where)):
        json_values.dumps_json(value)


@pytest.mark.parametrize('value, message', [
    ({1: 'a'}, "^value has the key 1 of type int: JSON object keys are strings"),
    ({'a': {None: 1}}, r"^value\['a'\] has the key None"),
    ({'a': np.float32(1)}, r"^value\['a'\] is .*1\.0.* of type float32, which JSON has no type"),
    ({'a': {1, 2}}, r"^value\['a'\] is \{1, 2\} of type set"),
])
def test_dumps_json_refuses_keys_and_values_json_would_change_or_cannot_hold(value, message):
    with pytest.raises(TypeError, match=message):
        json_values.dumps_json(value)


def test_dumps_json_output_is_read_by_a_strict_reader():
    value = {'a': [1, 2.5, None, True, 'x'], 'b': {'c': (1, 2)}}

    def refuse(constant):
        raise AssertionError('not strict JSON: ' + constant)
    assert json.loads(json_values.dumps_json(value), parse_constant=refuse) == {
        'a': [1, 2.5, None, True, 'x'], 'b': {'c': [1, 2]}}


def test_load_json_reads_the_deepest_nesting_allowed_and_refuses_one_level_more(tmp_path):
    deepest = json_values.MAX_JSON_DEPTH
    path = _written(tmp_path, '{"a": ' + '[' * (deepest - 1) + ']' * (deepest - 1) + '}')
    loaded = json_values.load_json(path)
    for _ in range(deepest - 1):
        loaded = loaded['a'] if isinstance(loaded, dict) else loaded[0]
    assert loaded == []
    path = _written(tmp_path, '{"a": ' + '[' * deepest + ']' * deepest + '}')
    with pytest.raises(ValueError, match='settings.json: lists and objects nest deeper than'):
        json_values.load_json(path)


def test_load_json_of_a_latin_1_file_keeps_the_decode_error_and_notes_the_file(tmp_path):
    path = _written(tmp_path, '{"name": "Müller"}'.encode('latin-1'))
    with pytest.raises(UnicodeDecodeError) as caught:
        json_values.load_json(path)
    assert any(path in note for note in caught.value.__notes__)


def test_parameters_from_json_names_where_the_data_came_from(tmp_path):
    data = {'fixed_params': {'training': {'losses': {'L': {'__object__': 'os:system'}}}},
            'variable_params': {}}
    with pytest.raises(ValueError, match=r"^params.json: fixed_params/training/losses/L: "):
        Parameters.from_json(data, where='params.json')
    with pytest.raises(ValueError, match=r"params.json: saved parameters are a dict"):
        Parameters.from_json({'fixed_params': {}}, where='params.json')


def _decode_training(training):
    return json_values.from_json_value({'training': training}, 'fixed_params')


# Arrays in parameters: simple dtypes only ---------------------------------------------------

@pytest.mark.parametrize('dtype', ['(10000,10000)f8', '(2,)f8', 'V8', 'U3', 'S3', 'O',
                                   [('a', '<f8')], 'M8[s]', None, 5])
def test_an_array_with_a_non_numeric_dtype_is_refused(dtype):
    with pytest.raises(ValueError, match=r"fixed_params/training/a: the array has the dtype"):
        _decode_training({'a': {'__ndarray__': [0], 'dtype': dtype}})


@pytest.mark.parametrize('dtype', ['float32', 'int16', 'bool', 'complex64', 'uint8'])
def test_an_array_with_a_numeric_dtype_round_trips(dtype):
    array = np.arange(3).astype(dtype)
    decoded = _decode_training(json_values.to_json_value({'a': array}))['training']['a']
    assert decoded.dtype == np.dtype(dtype) and decoded.tolist() == array.tolist()


def test_load_json_of_an_integer_longer_than_python_reads_names_the_file(tmp_path):
    # Python refuses int('9' * 5000) (sys.get_int_max_str_digits(), 4300 by default) with a
    # ValueError that says nothing of the file.
    path = tmp_path / 'experiment.json'
    path.write_text('{"seed": ' + '9' * 5000 + '}')
    with pytest.raises(ValueError, match=r'experiment\.json: a value cannot be read: .*4300'):
        json_values.load_json(str(path))


@pytest.mark.parametrize('path, error', [(5, TypeError), (True, TypeError), (None, TypeError),
                                         (b'a.json', TypeError), ('a\0b.json', ValueError)])
def test_load_json_names_a_path_that_is_not_one(path, error):
    with pytest.raises(error, match='^path must'):
        json_values.load_json(path)


# References inside lists, tuples and dicts: the same trust as at the top ------------------

LOSS = {'__object__': 'tests.chainer.training.tasks:mean_squared_error'}


@pytest.mark.parametrize('losses', [[LOSS], {'__tuple__': [LOSS]}, {'L': LOSS}])
def test_a_loss_of_the_model_package_resolves_inside_lists_tuples_and_dicts(losses):
    from tests.chainer.training import tasks
    decoded = json_values.from_json_value({'losses': losses}, 'training',
                                          model_package='tests')['losses']
    functions = decoded.values() if isinstance(decoded, dict) else decoded
    assert list(functions) == [tasks.mean_squared_error]
    with pytest.raises(ValueError, match=r"training/losses.*not trusted"):
        json_values.from_json_value({'losses': losses}, 'training')


@pytest.mark.parametrize('value', [[{'__object__': 'math:sqrt'}],
                                   {'__tuple__': [{'__object__': 'math:sqrt'}]}])
def test_allowed_modules_reach_references_inside_lists_and_tuples(value):
    import math
    decoded = json_values.from_json_value({'f': value}, 'training', allowed_modules=['math'])
    assert list(decoded['f']) == [math.sqrt]
    with pytest.raises(ValueError, match=r"^training/f: .*'math:sqrt'.*allowed_modules"):
        json_values.from_json_value({'f': value}, 'training')


@pytest.mark.parametrize('where, value', [
    ('training', {'optimizer_params': {'f': {'__object__': 'math:sqrt'}}}),
    ('training', {'lr_sched_trigger': [{'__object__': 'math:sqrt'}]}),
    ('training', {'optimizer_params': {'__tuple__': [{'__object__': 'math:sqrt'}]}}),
    ('fixed_params/training/optimizer_params', {'f': {'__object__': 'math:sqrt'}}),
])
def test_keyword_arguments_and_triggers_take_no_reference_at_any_depth(where, value):
    with pytest.raises(ValueError, match="holds the reference 'math:sqrt'") as info:
        json_values.from_json_value(value, where, allowed_modules=['math'])
    message = str(info.value)
    assert message.startswith(where)
    assert all(key in message for key in json_values._PLAIN_KEYS)


def test_non_finite_floats_are_read_back_in_lists_dicts_and_arrays():
    value = {'a': [{'__float__': 'inf'}, {'__float__': '-inf'}], 'b': {'__float__': 'nan'},
             'c': {'__ndarray__': [[{'__float__': '-inf'}, 1.0]], 'dtype': 'float32'}}
    decoded = json_values.from_json_value(value, 'training')
    assert decoded['a'] == [float('inf'), float('-inf')] and np.isnan(decoded['b'])
    assert decoded['c'].dtype == np.float32 and decoded['c'].tolist() == [[-np.inf, 1.0]]


@pytest.mark.parametrize('value, where', [
    ({'a': [{'__float__': 'big'}]}, 'training/a'),
    ({'a': {'__ndarray__': [{'__float__': 'big'}], 'dtype': 'float64'}}, 'training/a'),
])
def test_a_float_that_is_no_non_finite_name_is_refused_naming_where(value, where):
    with pytest.raises(ValueError, match=r"{}: __float__ holds 'big'; .*'nan'".format(
            where)) as info:
        json_values.from_json_value(value, 'training')
    assert str(info.value).startswith(where + ': ')


def test_an_array_that_cannot_be_read_is_refused_naming_where_and_why():
    with pytest.raises(ValueError, match=r"^training/a: the array cannot be read: .*") as info:
        json_values.from_json_value({'a': {'__ndarray__': [[1], [1, 2]], 'dtype': 'int8'}},
                                    'training')
    assert isinstance(info.value.__cause__, ValueError)
    assert str(info.value.__cause__) in str(info.value)


def test_a_refused_dtype_is_named_as_saved():
    with pytest.raises(ValueError, match=r"training/a: the array has the dtype 'U3'"):
        json_values.from_json_value({'a': {'__ndarray__': ['x'], 'dtype': 'U3'}}, 'training')


@pytest.mark.parametrize('value, where', [
    ({'a': [1, (2, object())]}, 'value/a[1][1]'),
    ({'a': (object(),)}, 'value/a[0]'),
])
def test_a_value_json_cannot_hold_deep_inside_is_refused_naming_its_place(value, where):
    with pytest.raises(ValueError, match=r"^{} is <object object at .*> of type object, "
                                         .format(re.escape(where))):
        json_values.to_json_value(value)


def test_a_range_saved_as_json_reads_back_as_the_range():
    from researchutils.chainer.training.search_space import FloatRange, IntRange
    value = {'lr': FloatRange(1e-4, 1.0, log=True), 'units': IntRange(8, 64, step=8)}
    decoded = json_values.from_json_value(json.loads(json.dumps(
        json_values.to_json_value(value))), 'variable')
    assert decoded == value
    # A dict of one key that is no range's, or of two keys, is a plain dict.
    for plain in ({'__float_ranges__': {'low': 1}}, {'__int_range__': {'low': 1, 'high': 2},
                                                     'other': 1}):
        assert json_values.from_json_value(plain, 'variable') == plain


def test_load_json_refuses_invalid_json_naming_the_file_and_keeping_the_position(tmp_path):
    path = _written(tmp_path, '{"a": 1,\n "b": }')
    with pytest.raises(json.JSONDecodeError) as info:
        json_values.load_json(path)
    assert str(info.value).startswith(path + ': not valid JSON: Expecting value')
    assert (info.value.lineno, info.value.colno, info.value.pos) == (2, 7, 15)
    assert info.value.doc == '{"a": 1,\n "b": }'


def test_a_repeated_key_is_refused_naming_both_values(tmp_path):
    path = _written(tmp_path, '{"seed": "first-value", "seed": ["second-value"]}')
    with pytest.raises(ValueError, match=r"the key 'seed' appears twice") as info:
        json_values.load_json(path)
    assert 'first-value' in str(info.value) and "['second-value']" in str(info.value)


def test_json_nested_past_the_recursion_limit_is_refused_as_too_deep(tmp_path):
    import sys
    # Deep enough for json's own decoder to stop with a RecursionError.
    depth = max(100000, sys.getrecursionlimit() * 2)
    path = _written(tmp_path, '[' * depth + ']' * depth)
    with pytest.raises(ValueError, match=r'nest deeper than {} levels'.format(
            json_values.MAX_JSON_DEPTH)):
        json_values.load_json(path)


def test_a_list_deeper_than_allowed_beside_plain_values_is_refused(tmp_path):
    deepest = json_values.MAX_JSON_DEPTH
    # Plain values on both sides of the deep list, whichever order the walk takes.
    path = _written(tmp_path, '[1, "a", ' + '[' * deepest + ']' * deepest + ', 2, "b"]')
    with pytest.raises(ValueError, match='nest deeper than'):
        json_values.load_json(path)


def test_non_finite_floats_become_strict_json_at_any_depth():
    # As the summaries (search.json, grid_search.json) are written.
    value = {'a': [float('inf'), 1.5], 'b': {'c': float('nan')}, 'd': -float('inf')}
    text = json_values.dumps_json(json_values._strict_json_value(value))

    def refuse(constant):
        raise AssertionError('not strict JSON: ' + constant)
    assert json.loads(text, parse_constant=refuse) == {
        'a': [{'__float__': 'inf'}, 1.5], 'b': {'c': {'__float__': 'nan'}},
        'd': {'__float__': '-inf'}}


def test_inside_parameters_only_the_optimizer_and_scheduler_keys_have_rules_of_their_own():
    import math
    # optimizer_cls: a Chainer optimizer class, whatever else is allowed.
    with pytest.raises(ValueError, match=r"training/optimizer_cls: .*'math:sqrt'"):
        json_values.from_json_value({'optimizer_cls': {'__object__': 'math:sqrt'}},
                                    'training', allowed_modules=['math'])
    # Any other key, a setting's name included, takes the general rule there.
    for key in ('optim_builder', 'model_cls', 'f'):
        decoded = json_values.from_json_value({key: {'__object__': 'math:sqrt'}}, 'training',
                                              allowed_modules=['math'])
        assert decoded == {key: math.sqrt}


def test_a_reference_at_the_top_is_read_whatever_where_says():
    import chainer.optimizers
    for where in ('optimizer_cls', 'training/optimizer_cls'):
        value = json_values.from_json_value({'__object__': 'chainer.optimizers:SGD'}, where)
        assert value is chainer.optimizers.SGD


@pytest.mark.parametrize('dtype', ['float33', 'no such dtype'])
def test_an_array_with_an_unknown_dtype_is_refused_naming_it(dtype):
    with pytest.raises(ValueError, match=r"^fixed_params/training/a: the array has the dtype "
                                         r"'{}'".format(dtype)):
        _decode_training({'a': {'__ndarray__': [0], 'dtype': dtype}})


def test_a_saved_range_with_other_keys_is_refused_naming_what_it_holds():
    with pytest.raises(ValueError, match=r"^variable/lr: __float_range__ holds "
                                         r"\{'low': 1, 'middle': 2\}"):
        json_values.from_json_value({'lr': {'__float_range__': {'low': 1, 'middle': 2}}},
                                    'variable')
