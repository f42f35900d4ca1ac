"""json_values: parameters as JSON, read back with their classes, tuples and arrays."""
import json

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
    ({'a': np.float32(1)}, r"^value\['a'\] is .* of type float32, which JSON has no type"),
    ({'a': {1, 2}}, r"^value\['a'\] is .* of type set"),
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

@pytest.mark.parametrize('dtype', ['(10000,10000)f8', 'V8', 'U3', 'S3', 'O',
                                   [('a', '<f8')], 'M8[s]'])
def test_an_array_with_a_non_numeric_dtype_is_refused(dtype):
    with pytest.raises(ValueError, match=r"fixed_params/training/a.*dtype"):
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
