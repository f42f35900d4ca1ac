"""The table of Chainer functions: each entry's torch expression against Chainer's own
function (forward, and the gradient of every float input), and the table against the list of
functions onnx_chainer 7.8.1 converts."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chainer
import chainer.functions as F
import numpy
import pytest

from researchutils.pytorch import convert
from researchutils.pytorch.tracing.table import FUNCTIONS
from tests.pytorch.tracing.equality import compare, torch


class _Apply(chainer.Chain):
    """Applies ``function`` to its float inputs, held as parameters (``p0``, ``p1``...) so
    that their gradients are compared, and to the integer arrays given as arguments."""

    def __init__(self, function: Callable[..., Any], inputs: list[numpy.ndarray]) -> None:
        super().__init__()
        self.function = function
        with self.init_scope():
            for i, array in enumerate(inputs):
                setattr(self, 'p{}'.format(i), chainer.Parameter(array.copy()))
        self.count = len(inputs)

    def forward(self, *args: Any) -> Any:
        params = [getattr(self, 'p{}'.format(i)) for i in range(self.count)]
        return self.function(*params, *args)


def _u(*shape: int, low: float = -1.0, high: float = 1.0, seed: int = 0) -> numpy.ndarray:
    return numpy.random.RandomState(seed + sum(shape)).uniform(low, high, shape).astype(
        numpy.float32)


def _labels(*values: int) -> numpy.ndarray:
    return numpy.array(values, numpy.int32)


X = _u(2, 4, 6, 6)
V = _u(2, 4)
P = _u(2, 4, low=0.5, high=1.5)
# name -> (function of the parameters and then the arguments, float inputs, int arguments)
CASES: dict[str, tuple[Callable[..., Any], list[numpy.ndarray], list[numpy.ndarray]]] = {
    'ReLU': (F.relu, [V], []),
    'Sigmoid': (F.sigmoid, [V], []),
    'Tanh': (F.tanh, [V], []),
    'Softplus': (lambda x: F.softplus(x, beta=2.0), [V], []),
    'LeakyReLU': (lambda x: F.leaky_relu(x, 0.3), [V], []),
    'ELU': (lambda x: F.elu(x, 0.7), [V], []),
    'ClippedReLU': (lambda x: F.clipped_relu(x * 3, 1.5), [V], []),
    'HardSigmoid': (lambda x: F.hard_sigmoid(x * 3), [V], []),
    'PReLUFunction': (F.prelu, [X, _u(4, seed=3)], []),
    'LogSoftmax': (F.log_softmax, [V], []),
    'Softmax': (lambda x: F.softmax(x, axis=0), [V], []),
    'Add': (lambda a, b, c: a + b + c, [V, P, _u(2, 4, seed=5)], []),
    'Sub': (lambda a, b: a - b, [V, P], []),
    'Mul': (lambda a, b: a * b, [V, P], []),
    'Div': (lambda a, b: a / b, [V, P], []),
    'Neg': (lambda a: -a, [V], []),
    'Absolute': (abs, [V], []),
    'AddConstant': (lambda a: a + 1.5, [V], []),
    'SubFromConstant': (lambda a: 1.5 - a, [V], []),
    'MulConstant': (lambda a: a * 1.5, [V], []),
    'DivFromConstant': (lambda a: 1.5 / a, [P], []),
    'PowVarConst': (lambda a: a ** 3, [V], []),
    'PowConstVar': (lambda a: 2.0 ** a, [V], []),
    'PowVarVar': (lambda a, b: a ** b, [P, V], []),
    'Maximum': (F.maximum, [V, _u(2, 4, seed=7)], []),
    'Minimum': (F.minimum, [V, _u(2, 4, seed=7)], []),
    'MatMul': (lambda a, b: F.matmul(a, b, transa=True), [_u(3, 2), _u(3, 4)], []),
    'LinearInterpolate': (F.linear_interpolate, [_u(2, 4, low=0, high=1), V, P], []),
    'Clip': (lambda a: F.clip(a, -0.5, 0.5), [V], []),
    'Identity': (lambda a, b: F.identity(a, b)[1] * 2, [V, P], []),
    'Copy': (lambda a: F.copy(a, -1) * 2, [V], []),
    'Square': (F.square, [V], []),
    'Sqrt': (F.sqrt, [P], []),
    'Exp': (F.exp, [V], []),
    'Log': (F.log, [P], []),
    'Sin': (F.sin, [V], []),
    'Cos': (F.cos, [V], []),
    'Tan': (F.tan, [V], []),
    'Sinh': (F.sinh, [V], []),
    'Cosh': (F.cosh, [V], []),
    'Arcsin': (F.arcsin, [V * 0.9], []),
    'Arccos': (F.arccos, [V * 0.9], []),
    'Arctan': (F.arctan, [V], []),
    'sign': (lambda a: F.sign(a) * a, [V], []),
    'Sum': (lambda a: F.sum(a, axis=(1, 2), keepdims=True), [X], []),
    'Mean': (lambda a: F.mean(a, axis=1), [X], []),
    'Max': (lambda a: F.max(a, axis=1), [X], []),
    'Min': (lambda a: F.min(a, axis=(0, 2)), [X], []),
    'Prod': (lambda a: F.prod(a, axis=1), [V], []),
    'LogSumExp': (lambda a: F.logsumexp(a, axis=1), [X], []),
    'ArgMax': (lambda a: (a, F.argmax(a, axis=1)), [V], []),
    'ArgMin': (lambda a: (a, F.argmin(a, axis=0)), [V], []),
    'Reshape': (lambda a: F.reshape(a, (2, -1)), [X], []),
    'ExpandDims': (lambda a: F.expand_dims(a, 1), [V], []),
    'Squeeze': (lambda a: F.squeeze(a), [_u(2, 1, 3)], []),
    'Transpose': (lambda a: F.transpose(a, (0, 2, 3, 1)), [X], []),
    'Swapaxes': (lambda a: F.swapaxes(a, 1, 3), [X], []),
    'Moveaxis': (lambda a: F.moveaxis(a, 1, 3), [X], []),
    'Rollaxis': (lambda a: F.rollaxis(a, 3, 1), [X], []),
    'BroadcastTo': (lambda a: F.broadcast_to(a, (3, 2, 4)), [V], []),
    'GetItem': (lambda a: a[1, 1:3, None, ..., ::2], [X], []),
    'SelectItem': (F.select_item, [V], [_labels(3, 0)]),
    'Concat': (lambda a, b: F.concat([a, b], axis=0), [V, P], []),
    'Stack': (lambda a, b: F.stack([a, b], axis=2), [V, P], []),
    'Hstack': (lambda a, b: F.hstack([a, b]), [V, P], []),
    'Vstack': (lambda a, b: F.vstack([a, b]), [V, P], []),
    'Dstack': (lambda a, b: F.dstack([a, b]), [V, P], []),
    'SplitAxis': (lambda a: F.split_axis(a, [1, 3], axis=1), [X], []),
    'Separate': (lambda a: F.separate(a, axis=1), [V], []),
    'TransposeSequence': (lambda a, b: F.transpose_sequence([a, b]), [_u(3, 2), _u(2, 2)], []),
    'Repeat': (lambda a: F.repeat(a, (1, 2, 3, 1), axis=1), [V], []),
    'Tile': (lambda a: F.tile(a, (2, 1, 3)), [V], []),
    'Permutate': (lambda a: F.permutate(a, numpy.array([2, 0, 3, 1], numpy.int32), axis=1,
                                        inv=True), [V], []),
    'Pad': (lambda a: F.pad(a, ((0, 0), (1, 2), (0, 1), (2, 0)), 'constant',
                            constant_values=0.5), [X], []),
    'ResizeImages': (lambda a: F.resize_images(a, (4, 9)), [X], []),
    'Where': (lambda a, b: F.where(numpy.array([[True, False, True, False]] * 2), a, b),
              [V, P], []),
    'Cast': (lambda a: F.cast(a, numpy.float64), [V], []),
    'Depth2Space': (lambda a: F.depth2space(a, 2), [X], []),
    'Space2Depth': (lambda a: F.space2depth(a, 2), [X], []),
    'LinearFunction': (F.linear, [V, _u(3, 4), _u(3)], []),
    'Convolution2DFunction': (lambda x, w, b: F.convolution_2d(x, w, b, stride=2, pad=1,
                                                               dilate=1, groups=2),
                              [X, _u(6, 2, 3, 3), _u(6)], []),
    'ConvolutionND': (lambda x, w: F.convolution_nd(x, w, stride=(1, 2), pad=1, dilate=2),
                      [X, _u(3, 4, 2, 2)], []),
    'Deconvolution2DFunction': (lambda x, w, b: F.deconvolution_2d(x, w, b, stride=2, pad=1,
                                                                   outsize=(12, 11)),
                                [X, _u(4, 3, 3, 3), _u(3)], []),
    'DeconvolutionND': (lambda x, w: F.deconvolution_nd(x, w, stride=2, pad=1),
                        [X, _u(4, 3, 3, 3)], []),
    'EmbedIDFunction': (lambda w, t: F.embed_id(t, w, ignore_label=-1), [_u(5, 3)],
                        [_labels(0, 4, -1, 4)]),
    'BatchNormalization': (lambda x, g, b: F.batch_normalization(x, g, b), [X, P[0], V[1]],
                           []),
    # The statistics are constants (a link's persistent values): torch has no gradient
    # for them.
    'FixedBatchNormalization': (lambda x, g, b, m, v: F.fixed_batch_normalization(
        x, g, b, m, v), [X, P[0], V[1]], [V[0], P[1]]),
    'GroupNormalization': (lambda x, g, b: F.group_normalization(x, 2, g, b),
                           [X, P[0], V[1]], []),
    'LocalResponseNormalization': (lambda x: F.local_response_normalization(x, n=3, k=1.5,
                                                                            alpha=0.5),
                                   [X], []),
    'NormalizeL2': (lambda x: F.normalize(x, axis=1), [V], []),
    'MaxPooling2D': (lambda x: F.max_pooling_2d(x, 3, stride=2, pad=1), [X], []),
    'MaxPoolingND': (lambda x: F.max_pooling_nd(x, 2, cover_all=False), [X], []),
    'AveragePooling2D': (lambda x: F.average_pooling_2d(x, 3, stride=2, pad=1), [X], []),
    'AveragePoolingND': (lambda x: F.average_pooling_nd(x, 3, stride=1, pad=1,
                                                        pad_value=None), [X], []),
    'Unpooling2D': (lambda x: F.unpooling_2d(x, 3, stride=2, pad=1, outsize=(11, 10)),
                    [X], []),
    'ROIPooling2D': (lambda x, rois: F.roi_pooling_2d(x, rois, 2, 3, 0.5), [X],
                     [numpy.array([[0, 1, 2, 9, 7], [1, 0, 0, 4, 11]], numpy.float32)]),
    'SoftmaxCrossEntropy': (lambda x, t: F.softmax_cross_entropy(x, t), [_u(3, 4)],
                            [_labels(1, -1, 3)]),
    'LSTM': (lambda c, x: F.lstm(c, x), [_u(3, 2), _u(2, 8)], []),
}
CASES['MaxPooling2D'] = CASES['MaxPoolingND']
# Names onnx_chainer converts that no Chainer 7.8.1 graph holds: no FunctionNode of that name
# exists (F.selu is ELU times a constant; F.max_pooling_2d is MaxPoolingND), or the function
# runs as the nodes it is made of (F.n_step_gru: Linear, Sigmoid, Tanh... on the CPU).
NOT_IN_GRAPHS = {'Selu', 'Shape', 'n_step_gru'}


def _function_node_names() -> set[str]:
    import importlib
    import inspect
    import pkgutil

    names = set()
    for found in pkgutil.walk_packages(chainer.functions.__path__, 'chainer.functions.'):
        module = importlib.import_module(found.name)
        names |= {name for name, value in vars(module).items() if inspect.isclass(value)
                  and issubclass(value, (chainer.FunctionNode, chainer.Function))}
    return names


def _graph_names(model: chainer.Link, args: list[numpy.ndarray]) -> set[str]:
    outputs = model(*args)
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    found, pending = set(), [output.node for output in outputs]
    while pending:
        creator = pending.pop().creator_node
        if creator is not None:
            found.add(type(creator).__name__)
            pending.extend(creator.inputs)
    return found


def test_every_function_onnx_chainer_converts_has_an_entry() -> None:
    onnx_chainer_mapping = pytest.importorskip('onnx_chainer.mapping')
    converted = set(onnx_chainer_mapping.converters)
    assert len(converted) == 102
    assert converted - NOT_IN_GRAPHS <= set(FUNCTIONS)
    assert not NOT_IN_GRAPHS & (_function_node_names() - {'MaxPooling2D'})


@pytest.mark.parametrize('name', sorted(CASES))
def test_entry_equals_chainers_function(name: str) -> None:
    function, inputs, args = CASES[name]
    model = _Apply(function, inputs)
    module = convert(model, args)
    if name != 'sign':
        assert name in _graph_names(_Apply(function, inputs), args) or name == 'MaxPooling2D'
    compare(model, module, args)


def test_n_step_gru_converts_as_the_functions_it_is_made_of() -> None:
    model = chainer.links.NStepGRU(2, 3, 4, 0.0)
    xs = [_u(3, 3), _u(2, 3, seed=1)]

    class Last(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.gru = model

        def forward(self, a: Any, b: Any) -> Any:
            hy, ys = self.gru(None, [a, b])
            return (hy,) + tuple(ys)

    chain = Last()
    compare(chain, convert(chain, xs), xs)


def test_gaussian_samples_with_torchs_generator_as_chainer_with_the_same_noise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mean, ln_var = V, _u(2, 4, seed=9)
    model = _Apply(F.gaussian, [mean, ln_var])
    module = convert(model, [])
    torch.manual_seed(3)
    noise = torch.randn(2, 4).numpy()
    monkeypatch.setattr(numpy.random, 'standard_normal',
                        lambda *args, **kwargs: noise.astype(numpy.float64))
    torch.manual_seed(3)
    compare(model, module, [])

