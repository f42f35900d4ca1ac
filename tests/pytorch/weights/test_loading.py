"""load_chainer_weights (researchutils/pytorch/weights/loading.py, _sources.py): a module
written by hand filled from a link, a model file saved by researchutils' serializers, and a
real Trainer snapshot; strict, naming the key and both sides, and loading nothing on refusal."""
import os
import zipfile

import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import pytest
from chainer import training

torch = pytest.importorskip('torch')

from researchutils.chainer.serializers import save_model  # noqa: E402
from researchutils.pytorch.nn.recurrent import LSTM  # noqa: E402
from researchutils.pytorch.weights import load_chainer_weights  # noqa: E402
from tests.pytorch.weights.ported import check_ported, randomize  # noqa: E402
from tests.support.tiny_training import make_trainer  # noqa: E402


class _Net(chainer.Chain):
    """Chainer's model: a convolution, a batch normalization, an LSTM and a Linear."""

    def __init__(self, units=4):
        super().__init__()
        with self.init_scope():
            self.norm = L.BatchNormalization(2)
            self.conv = L.Convolution2D(2, 3, 3, pad=1)
            self.lstm = L.LSTM(3, units)
            self.out = L.Linear(units, 2)

    def forward(self, x):
        h = F.mean(self.conv(self.norm(x)), axis=(2, 3))
        return self.out(self.lstm(h))


class _Port(torch.nn.Module):
    """The same model written by hand in torch, the children named as Chainer's."""

    def __init__(self, units=4):
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(2, eps=2e-5, momentum=0.1)
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.lstm = LSTM(3, units)
        self.out = torch.nn.Linear(units, 2)

    def forward(self, x):
        return self.out(self.lstm(self.conv(self.norm(x)).mean(dim=(2, 3))))


def _floats(*shape, seed=4):
    return numpy.random.RandomState(seed).standard_normal(shape).astype(numpy.float32)


def _trained_net():
    # float64: through a convolution and a batch normalization, float32's rounding alone
    # differs by 2e-5 in beta's gradient (a sum of 48 terms that nearly cancel); the
    # converters' own float32 tests are in test_conversion.py
    with chainer.using_config('dtype', numpy.float64):
        net = randomize(_Net())
    with chainer.using_config('train', True):
        net(_floats(5, 2, 4, 4).astype(numpy.float64))  # statistics moved from their start
    net.lstm.reset_state()
    net.cleargrads()
    return net


def _state(module):
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def _assert_unchanged(module, before):
    after = module.state_dict()
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        assert torch.equal(after[name], value), name


def _assert_ports(net, port):
    port.train()
    check_ported(net, port, _floats(3, 2, 4, 4, seed=7).astype(numpy.float64))
    for name in ('avg_mean', 'avg_var'):
        numpy.testing.assert_allclose(
            getattr(port.norm, {'avg_mean': 'running_mean', 'avg_var': 'running_var'}[name])
            .detach().numpy(), getattr(net.norm, name), rtol=1e-6)


def test_from_a_link_the_hand_written_port_equals_chainer():
    net = _trained_net()
    port = load_chainer_weights(_Port().double(), net)
    assert port.norm.num_batches_tracked.item() == net.norm.N
    _assert_ports(net, port)


def test_from_a_model_file_saved_by_save_model(tmp_path):
    net = _trained_net()
    path = str(tmp_path / 'model.npz')
    save_model(path, net)
    port = load_chainer_weights(_Port().double(), path)
    _assert_ports(net, port)


def _snapshot(out, model):
    trainer = make_trainer(out, stop_iteration=3, model=L.Classifier(model))
    trainer.extend(training.extensions.snapshot(filename='snapshot'), trigger=(3, 'iteration'))
    trainer.run()
    return os.path.join(str(out), 'snapshot')


def test_from_a_trainer_snapshot_the_model_after_training(tmp_path):
    linear = randomize(L.Linear(3, 2))
    path = _snapshot(tmp_path, linear)
    with zipfile.ZipFile(path) as archive:
        assert 'updater/model:main/predictor/W.npy' in archive.namelist()

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.predictor = torch.nn.Linear(3, 2)

    port = load_chainer_weights(Classifier(), path)
    # the trained weights, not the initial ones: the snapshot's
    numpy.testing.assert_array_equal(port.predictor.weight.detach().numpy(), linear.W.array)
    predictor = load_chainer_weights(torch.nn.Linear(3, 2), path,
                                     key='updater/model:main/predictor')
    assert torch.equal(predictor.bias, port.predictor.bias)


def test_a_snapshot_of_another_model_is_refused_naming_the_first_key(tmp_path):
    path = _snapshot(tmp_path, L.Linear(3, 2))
    port = _Port()
    before = _state(port)
    with pytest.raises(ValueError, match=r"^.*snapshot'? \(under 'updater/model:main/'\) has "
                                         r"no array 'conv/W'"):
        load_chainer_weights(port, path)
    _assert_unchanged(port, before)


def test_nothing_under_the_key_lists_the_models_the_file_holds(tmp_path):
    path = _snapshot(tmp_path, L.Linear(3, 2))
    with pytest.raises(KeyError, match=r"no arrays under 'updater/model:other/'.*"
                                       r"\['updater/model:main/'\]"):
        load_chainer_weights(torch.nn.Linear(3, 2), path, key='updater/model:other')


def _refusal(net, port, match):
    before = _state(port)
    with pytest.raises(ValueError, match=match):
        load_chainer_weights(port, net)
    _assert_unchanged(port, before)


def test_a_shape_that_does_not_fit_is_refused_naming_key_and_both_shapes():
    _refusal(_trained_net(), _Port(units=5),
             r"array 'lstm/lateral/W' has shape \(16, 4\) and dtype float64, but the module's "
             r"'lstm.weight_hh' needs it with shape \(20, 5\) and dtype float32; nothing was "
             r"loaded")


def test_a_dtype_of_another_kind_is_refused():
    net = _trained_net()
    port = _Port()
    port.norm.num_batches_tracked = torch.tensor(0.0)  # a float where Chainer has an int
    _refusal(net, port, r"array 'norm/N' has shape \(\) and dtype int64, but the module's "
                        r"'norm.num_batches_tracked' needs it with shape \(\) and dtype "
                        r"float32")


def test_an_array_the_module_lacks_is_refused():
    net = _trained_net()
    port = _Port()
    del port.out
    _refusal(net, port, r"array 'out/W' \(shape \(2, 4\) and dtype float64\) fits nothing in "
                        r"the module")


def test_a_tensor_chainer_lacks_is_refused():
    net = _trained_net()
    port = _Port()
    port.extra = torch.nn.Linear(2, 2)
    _refusal(net, port, r"has no array 'extra/W': the module's 'extra.weight' needs it")


def test_a_parameter_chainer_never_initialized_is_refused():
    port = torch.nn.Linear(3, 2)
    before = _state(port)
    with pytest.raises(ValueError, match=r"array 'W' is not initialized"):
        load_chainer_weights(port, L.Linear(None, 2))
    _assert_unchanged(port, before)


def test_a_corrupt_file_loads_nothing(tmp_path):
    net = _trained_net()
    path = str(tmp_path / 'model.npz')
    save_model(path, net, compression=False)
    with open(path, 'rb') as file:
        data = bytearray(file.read())
    index = data.index(b'\x93NUMPY', data.index(b'out/W.npy'))
    data[index + 200:index + 232] = b'\x00' * 32  # inside out/W's header and data
    with open(path, 'wb') as file:
        file.write(bytes(data))
    port = _Port()
    before = _state(port)
    with pytest.raises(ValueError, match='model.npz'):
        load_chainer_weights(port, path)
    _assert_unchanged(port, before)


def test_plain_lstm_cell_gets_chainers_gate_order_and_a_zero_second_bias():
    link = randomize(L.StatelessLSTM(3, 4))
    cell = load_chainer_weights(torch.nn.LSTMCell(3, 4), link)
    assert not cell.bias_hh.any()
    x = _floats(2, 3)
    c, h = link(None, None, x)
    h_torch, c_torch = cell(torch.tensor(x))
    numpy.testing.assert_allclose(h_torch.detach().numpy(), h.array, rtol=1e-6, atol=1e-7)
    numpy.testing.assert_allclose(c_torch.detach().numpy(), c.array, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('source, error', [(3, TypeError), (None, TypeError)])
def test_a_source_of_another_kind_is_refused(source, error):
    with pytest.raises(error, match='source must be'):
        load_chainer_weights(torch.nn.Linear(3, 2), source)


def test_a_missing_file_is_named(tmp_path):
    path = str(tmp_path / 'absent.npz')
    with pytest.raises(FileNotFoundError, match='absent.npz'):
        load_chainer_weights(torch.nn.Linear(3, 2), path)


def test_module_of_another_kind_is_refused():
    with pytest.raises(TypeError, match='module must be a torch.nn.Module'):
        load_chainer_weights(L.Linear(3, 2), L.Linear(3, 2))


def test_every_problem_is_listed_after_the_first_up_to_eight():
    net = _trained_net()
    port = torch.nn.Module()
    for index in range(11):  # eleven tensors Chainer lacks, and Chainer's arrays unused
        port.register_buffer('extra{:02d}'.format(index), torch.zeros(1))
    before = _state(port)
    with pytest.raises(ValueError) as error:
        load_chainer_weights(port, net)
    message = str(error.value)
    assert message.startswith("the link _Net: array 'conv/W'")  # the first key in key order
    assert message.count('; the link _Net') + message.count("; the module's") == 7
    problems = 11 + len([name for name, _ in net.namedparams()]) + 3  # + norm's persistents
    assert message.endswith(' and {} more'.format(problems - 9))
    _assert_unchanged(port, before)


@pytest.mark.parametrize('array_dtype, tensor_dtype, fits', [
    ('float64', torch.float32, True), ('float16', torch.float64, True),
    ('int32', torch.int64, True), ('uint8', torch.int64, True),
    ('int64', torch.float32, False), ('float32', torch.int64, False),
    ('bool', torch.bool, True), ('int8', torch.bool, False), ('bool', torch.uint8, False),
    ('complex64', torch.complex128, True), ('float32', torch.complex64, False),
])
def test_a_dtype_fits_within_its_kind(array_dtype, tensor_dtype, fits):
    from researchutils.pytorch.weights._sources import kind_fits
    assert kind_fits(numpy.dtype(array_dtype), tensor_dtype) is fits
