"""compare (researchutils/pytorch/weights/comparison.py): the differences it reports are the
real ones: near zero for a faithful port, and for a port with one wrong weight or a wrong
forward, large exactly where the fault is, by Chainer's name."""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import pytest

torch = pytest.importorskip('torch')

from researchutils.pytorch.weights import compare, from_chainer  # noqa: E402
from researchutils.pytorch.weights.comparison import Comparison, Difference  # noqa: E402
from tests.pytorch.weights.ported import randomize  # noqa: E402


def _floats(*shape, seed=5):
    return numpy.random.RandomState(seed).standard_normal(shape).astype(numpy.float32)


class _Model(chainer.Chain):

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.encoder = L.Linear(3, 4)
            self.lstm = L.LSTM(4, 4)
            self.head = L.Linear(4, 2)

    def forward(self, x):
        return self.head(self.lstm(F.relu(self.encoder(x))))


class _Port(torch.nn.Module):

    def __init__(self, tree):
        super().__init__()
        self.encoder, self.lstm, self.head = tree.encoder, tree.lstm, tree.head

    def forward(self, x):
        return self.head(self.lstm(torch.relu(self.encoder(x))))


def _pair():
    model = randomize(_Model())
    return model, _Port(from_chainer(model))


def test_a_faithful_port_differs_by_rounding_only_and_names_every_gradient():
    model, port = _pair()
    result = compare(model, port, _floats(5, 3))
    assert list(result.gradients) == [
        '/encoder/W', '/encoder/b', '/head/W', '/head/b', '/lstm/lateral/W', '/lstm/upward/W',
        '/lstm/upward/b', 'inputs[0]']
    assert result.forward.scale > 0.1
    assert result.largest_relative < 1e-5
    # the first step has no lateral term (h is None), so its gradient is zero in both
    assert [name for name, gradient in result.gradients.items() if gradient.scale == 0] == [
        '/lstm/lateral/W']
    second = compare(model, port, _floats(5, 3, seed=6))  # the state carried, in both
    assert second.gradients['/lstm/lateral/W'].scale > 0
    assert second.largest_relative < 1e-5


def test_a_wrong_weight_shows_in_its_own_gradient_and_the_forward():
    model, port = _pair()
    with torch.no_grad():
        port.head.bias[0] += 0.5
    result = compare(model, port, _floats(5, 3))
    assert result.forward.largest == pytest.approx(0.5, rel=1e-5)
    assert result.gradients['/head/b'].largest < 1e-5  # a bias's gradient does not see it
    with torch.no_grad():
        port.head.bias[0] -= 0.5
        port.encoder.weight[1, 2] *= -1
    model.lstm.reset_state()  # a new sequence: the last step's graph is of other weights
    port.lstm.reset_state()
    result = compare(model, port, _floats(5, 3))
    assert result.gradients['/encoder/W'].relative > 1e-3
    assert result.gradients['inputs[0]'].relative > 1e-3


def test_gate_order_mistake_is_named_in_the_lstm_gradients():
    model, port = _pair()
    with torch.no_grad():  # swap two of torch's gate blocks: i and f
        port.lstm.weight_ih.copy_(torch.cat([port.lstm.weight_ih[4:8], port.lstm.weight_ih[:4],
                                             port.lstm.weight_ih[8:]]))
    result = compare(model, port, _floats(5, 3))
    assert result.forward.relative > 1e-3
    assert result.gradients['/lstm/upward/W'].relative > 1e-3


def test_eval_mode_is_chainers_test_mode():
    model = randomize(chainer.Sequential(L.BatchNormalization(3), L.Linear(3, 2)))
    module = from_chainer(model)
    module.eval()
    x = _floats(4, 3)
    result = compare(model, module, x)
    assert result.largest_relative < 1e-5
    assert not module[0].running_mean.any()  # eval: the statistics did not move
    module.train()
    result = compare(model, module, x)
    assert result.largest_relative < 1e-5
    numpy.testing.assert_allclose(module[0].running_mean.numpy(), model[0].avg_mean, rtol=1e-6)
    assert module[0].running_mean.any()


def test_several_arguments_and_lists_of_sequences():
    model = randomize(L.NStepLSTM(1, 3, 4, 0.0))
    xs = [_floats(4, 3, seed=1), _floats(2, 3, seed=2)]
    result = compare(model, from_chainer(model), (None, None, xs))
    assert 'inputs[2][1]' in result.gradients and '/0/w0' in result.gradients
    assert result.largest_relative < 1e-5


def test_repr_lists_every_gradient_by_name():
    result = Comparison(Difference(2e-7, 1.0), {'/W': Difference(1e-6, 0.5),
                                                'inputs[0]': Difference(0.0, 0.0)})
    assert repr(result) == ('Comparison(largest forward difference 2e-07 (relative 2e-07); '
                            'gradients:\n  /W         1e-06 (relative 2e-06)\n'
                            '  inputs[0]  0 (relative 0))')


def test_outputs_of_another_shape_are_refused():
    with pytest.raises(ValueError, match='differ in shape'):
        compare(L.Linear(3, 2), torch.nn.Linear(3, 3), _floats(4, 3))


@pytest.mark.parametrize('arguments, match', [
    ((torch.nn.Linear(3, 2), torch.nn.Linear(3, 2), None), 'chainer_model must be'),
    ((L.Linear(3, 2), L.Linear(3, 2), None), 'module must be'),
    ((L.Linear(3, 2), torch.nn.Linear(3, 2), [1.0]), r'inputs\[0\]\[0\] must be a NumPy'),
])
def test_arguments_of_another_kind_are_refused(arguments, match):
    with pytest.raises(TypeError, match=match):
        compare(*arguments)
