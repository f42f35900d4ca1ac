"""researchutils.chainer.onnx._proto, through export: in every opset offered the file passes
onnx's full check, its node names are unique, and onnxruntime computes Chainer's result;
other opsets are refused naming the range."""
import collections

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.links import GradClipLSTM
from researchutils.chainer.onnx import export
from researchutils.chainer.onnx.exporter import OPSETS
from tests.chainer.onnx.test_export import TOLERANCE, _random, _run

onnx = pytest.importorskip('onnx', reason='the onnx extra: pip install researchutils[onnx]')
pytest.importorskip('onnxruntime', reason='the onnx extra')


class _Small(chainer.Chain):
    """An LSTM step whose state has more rows than the batch (Slice, Concat), F.reshape
    (onnx_chainer's int64 shape), a Linear, and from opset 10 F.flip (a reversed Slice)."""

    def __init__(self, flip):
        super().__init__()
        self.flip = flip
        with self.init_scope():
            self.lstm = GradClipLSTM(3, 4)
            self.out = L.Linear(4, 2)

    def forward(self, x):
        h = self.lstm(x)
        if self.flip:
            h = F.flip(h, 1)
        return F.reshape(self.out(h), (-1,))


def test_the_opsets_offered_are_7_to_12():
    # 13 made Squeeze's, Unsqueeze's, Split's and the reductions' attributes inputs, which
    # onnx_chainer's converters still write as attributes.
    assert list(OPSETS) == list(range(7, 13))


@pytest.mark.parametrize('opset_version', list(OPSETS))
def test_every_opset_offered_gives_a_valid_file_that_computes_chainers_result(
        tmp_path, opset_version):
    rng = np.random.RandomState(opset_version)
    model = _Small(flip=opset_version >= 10)
    model.lstm(_random(rng, 3, 3))         # a state of 3 rows, a batch of 2
    x = _random(rng, 2, 3)
    path = tmp_path / 'small.onnx'
    proto = export(model, x, path, states=['/lstm'], opset_version=opset_version)

    written = onnx.load(str(path))
    assert [(o.domain, o.version) for o in written.opset_import] == [('', opset_version)]
    onnx.checker.check_model(written, full_check=True)
    names = collections.Counter(node.name for node in written.graph.node)
    assert [name for name, count in names.items() if count > 1] == []
    assert len(names) == len(written.graph.node) > 20       # the LSTM's nodes included
    assert written == proto

    got = _run(path, {'input': x, 'lstm/c': model.lstm.c.array, 'lstm/h': model.lstm.h.array})
    with chainer.using_config('train', False):
        expected = model(x).array
    np.testing.assert_allclose(got['output'], expected, **TOLERANCE)
    np.testing.assert_allclose(got['lstm/c_out'], model.lstm.c.array, **TOLERANCE)


@pytest.mark.parametrize('opset_version', [7, 8])
def test_int64_constants_before_opset_9_are_initializers(tmp_path, opset_version):
    # Constant holds floats only before opset 9: the shapes become initializers.
    proto = export(chainer.Sequential(lambda x: F.reshape(x, (6,))),
                   np.zeros((2, 3), np.float32), tmp_path / 'r.onnx',
                   opset_version=opset_version)
    assert [node.op_type for node in proto.graph.node] == ['Reshape']
    shape, = proto.graph.initializer
    assert onnx.numpy_helper.to_array(shape).tolist() == [6]
    assert [value.name for value in proto.graph.input] == ['input']


@pytest.mark.parametrize('opset_version', [6, 13, 25, 99, 0])
def test_an_opset_outside_the_range_is_refused_naming_it(tmp_path, opset_version):
    with pytest.raises(ValueError, match=r'opset_version must be an integer in \[7, 12\] or '
                                         r'None, got {}$'.format(opset_version)):
        export(L.Linear(3, 2), np.zeros((1, 3), np.float32), tmp_path / 'm.onnx',
               opset_version=opset_version)
    assert list(tmp_path.iterdir()) == []


def test_the_default_opset_is_11(tmp_path):
    proto = export(L.Linear(3, 2), np.zeros((1, 3), np.float32), tmp_path / 'm.onnx')
    assert [o.version for o in proto.opset_import] == [11]


@pytest.mark.parametrize('opset_version', [7, 9])
def test_a_flip_before_opset_10_is_refused_naming_the_opset(tmp_path, opset_version):
    # F.flip is a Slice with step -1, which Slice takes from opset 10 on.
    with pytest.raises(ValueError, match='a reversed Slice needs ONNX opset 10 or later, got '
                                         'opset_version={}$'.format(opset_version)):
        export(chainer.Sequential(lambda x: F.flip(x, 1)), np.zeros((2, 3), np.float32),
               tmp_path / 'flip.onnx', opset_version=opset_version)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('axis', [0, 1, -1])
def test_a_flip_follows_onnxs_reference_not_only_onnxruntime(tmp_path, axis):
    # onnxruntime reads an end of +INT64_MAX with step -1 as "to the front" too; the ONNX
    # reference (and the spec: end clamped to [-1, dim - 1]) reads it as empty.
    from onnx.reference import ReferenceEvaluator
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    proto = export(chainer.Sequential(lambda a: F.flip(a, axis)), x, tmp_path / 'flip.onnx')
    got, = ReferenceEvaluator(proto).run(None, {'input': x})
    np.testing.assert_array_equal(got, np.flip(x, axis))
