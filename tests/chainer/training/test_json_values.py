"""json_values: parameters as JSON, read back with their classes, tuples and arrays."""
import json

import chainer
import numpy as np
import pytest

from researchutils.chainer.training import json_values


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
