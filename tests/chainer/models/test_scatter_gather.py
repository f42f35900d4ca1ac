"""Tests of the splitting of a batch across devices and the gathering of the outputs."""
import chainer
import chainer.functions as F
import numpy as np
import pytest

from researchutils.chainer.models import DataParallelChainerNetwork
from researchutils.chainer.models._scatter_gather import gather, scatter

CPU = '@numpy'


@pytest.mark.parametrize('devices', [1, 2, 3, 4])
@pytest.mark.parametrize('batch_size', [1, 2, 3, 5, 7, 10])
def test_scatter_makes_contiguous_chunks_differing_by_at_most_one(batch_size, devices):
    x = np.arange(batch_size * 2).reshape(batch_size, 2)
    inputs, _ = scatter((x,), {}, [CPU] * devices)
    sizes = [len(chunk[0]) for chunk in inputs]
    assert len(sizes) == min(devices, batch_size)
    assert max(sizes) - min(sizes) <= 1
    np.testing.assert_array_equal(np.concatenate([chunk[0] for chunk in inputs]), x)


def test_scatter_keeps_every_row_with_three_devices():
    inputs, _ = scatter((np.arange(10),), {}, [CPU] * 3)
    assert [chunk[0].tolist() for chunk in inputs] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_scatter_recurses_into_containers_and_replicates_other_values():
    x = np.arange(4)
    inputs, kwargs = scatter(
        ((x, [x * 2]), {'y': x * 3, 'name': 'n'}), {'z': x * 4, 'scale': 0.5}, [CPU] * 2)
    (pair, mapping), = inputs[1:2]
    assert pair[0].tolist() == [2, 3] and isinstance(pair[1], list)
    assert pair[1][0].tolist() == [4, 6]
    assert mapping == {'y': mapping['y'], 'name': 'n'} and mapping['y'].tolist() == [6, 9]
    assert kwargs[1]['z'].tolist() == [8, 12] and kwargs[1]['scale'] == 0.5


def test_scatter_without_arrays_makes_one_chunk():
    inputs, kwargs = scatter((1, 'a'), {'k': None}, [CPU] * 3)
    assert inputs == [(1, 'a')] and kwargs == [{'k': None}]


def test_scatter_of_a_variable_is_differentiable():
    x = chainer.Variable(np.arange(5, dtype=np.float32))
    inputs, _ = scatter((x,), {}, [CPU] * 2)
    loss = F.sum(inputs[0][0] * 2.0) + F.sum(inputs[1][0] * 3.0)
    loss.backward()
    np.testing.assert_array_equal(x.grad, [2, 2, 2, 3, 3])


def test_scatter_rejects_inputs_of_different_batch_sizes():
    with pytest.raises(ValueError, match=r'sizes \[2, 3\]'):
        scatter((np.zeros(2), np.zeros(3)), {}, [CPU] * 2)


def test_scatter_rejects_an_input_without_the_batch_axis():
    with pytest.raises(ValueError, match='dim=1'):
        scatter((np.zeros(3),), {}, [CPU] * 2, dim=1)


def test_gather_recurses_into_dicts_lists_tuples_and_none():
    predictions = [{'a': [np.zeros((1, 2))], 'b': (np.ones(1), None), 'c': None},
                   {'a': [np.ones((2, 2))], 'b': (np.zeros(2), None), 'c': None}]
    out = gather(predictions, 0, CPU)
    np.testing.assert_array_equal(out['a'][0], [[0, 0], [1, 1], [1, 1]])
    assert isinstance(out['b'], tuple) and out['b'][0].tolist() == [1, 0, 0]
    assert out['b'][1] is None and out['c'] is None


def test_gather_stacks_scalars():
    out = gather(
        [chainer.Variable(np.array(value, np.float32)) for value in (1, 2)], 0, CPU)
    np.testing.assert_array_equal(out.array, [1, 2])


def test_gather_backpropagates_into_every_replica_output():
    parts = [chainer.Variable(np.ones((2, 1), np.float32)),
             chainer.Variable(np.ones((1, 1), np.float32))]
    out = gather(parts, 0, CPU)
    F.sum(out * np.array([[1], [2], [3]], np.float32)).backward()
    np.testing.assert_array_equal(parts[0].grad, [[1], [2]])
    np.testing.assert_array_equal(parts[1].grad, [[3]])


def test_gather_of_an_array_then_a_variable_is_a_variable_that_backpropagates():
    # A replica may return an array where another returns a Variable (a branch that only
    # some chunks take): the Variable's graph must survive, wherever it comes in the list.
    first = np.array([[1], [2]], np.float32)
    second = chainer.Variable(np.array([[3]], np.float32))
    out = gather([{'pred': first}, {'pred': second}], 0, CPU)['pred']
    assert isinstance(out, chainer.Variable)
    np.testing.assert_array_equal(out.array, [[1], [2], [3]])
    F.sum(out * np.array([[1], [2], [5]], np.float32)).backward()
    np.testing.assert_array_equal(second.grad, [[5]])


def test_gather_of_an_array_scalar_then_a_variable_scalar_stacks_them_differentiably():
    loss = chainer.Variable(np.array(2, np.float32))
    out = gather([np.array(1, np.float32), loss], 0, CPU)
    assert isinstance(out, chainer.Variable)
    np.testing.assert_array_equal(out.array, [1, 2])
    F.sum(out * np.array([3, 4], np.float32)).backward()
    assert loss.grad == 4


def test_the_network_exposes_them_under_delira_names():
    assert DataParallelChainerNetwork._scatter is scatter
    assert DataParallelChainerNetwork._gather is gather
