"""DeconvolutionPS: sub-pixel convolution that swaps in for chainer.links.Deconvolution2D."""
import itertools

import chainer
import chainer.links as L
import numpy as np
import pytest
from chainer import gradient_check

from researchutils.chainer.links import DeconvolutionPS
from researchutils.chainer.links.connection import deconvolution_ps


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _numpy_deconvolution_ps(x, W, b, ksize, stride, pad, outsize=None):
    """Plain NumPy: zero-pad, correlate with W, pixel-shuffle, crop to the deconv size."""
    (kh, kw), (sy, sx), (ph, pw) = _pair(ksize), _pair(stride), _pair(pad)
    batch, _, in_h, in_w = x.shape
    if outsize is None:
        outsize = (sy * (in_h - 1) + kh - 2 * ph, sx * (in_w - 1) + kw - 2 * pw)
    out_h, out_w = outsize
    channels, _, ch, cw = W.shape
    out_channels = channels // (sy * sx)
    # Rows of the padded input: `before` zero rows first (negative: input rows dropped).
    need_h, need_w = -(-out_h // sy), -(-out_w // sx)
    total_h, total_w = need_h + ch - 1 - in_h, need_w + cw - 1 - in_w
    before_h, before_w = total_h // 2, total_w // 2
    padded = np.zeros((batch, x.shape[1], need_h + ch - 1, need_w + cw - 1))
    for row in range(padded.shape[2]):
        for col in range(padded.shape[3]):
            i, j = row - before_h, col - before_w
            if 0 <= i < in_h and 0 <= j < in_w:
                padded[:, :, row, col] = x[:, :, i, j]
    conv = np.zeros((batch, channels, need_h, need_w))
    for i in range(need_h):
        for j in range(need_w):
            patch = padded[:, :, i:i + ch, j:j + cw]
            conv[:, :, i, j] = np.einsum('bckl,ockl->bo', patch, W)
    if b is not None:
        conv += b[None, :, None, None]
    out = np.zeros((batch, out_channels, need_h * sy, need_w * sx))
    for dy in range(sy):
        for dx in range(sx):
            first = (dy * sx + dx) * out_channels
            out[:, :, dy::sy, dx::sx] = conv[:, first:first + out_channels]
    return out[:, :, :out_h, :out_w]


SHAPE_GRID = [
    (ksize, stride, pad, None)
    for ksize, stride, pad in itertools.product([1, 2, 3, 4, 5, 6, 8], [1, 2, 3], [0, 1, 2])
    if 2 * pad < ksize + stride * 2
] + [
    ((4, 3), (2, 1), (1, 0), None),
    ((3, 5), (3, 2), (0, 2), None),
    (4, 2, 1, (12, 13)),
    (4, 2, 1, (11, 14)),
    (4, 2, 1, (13, 15)),
    (3, 3, 0, (16, 19)),
    (3, 3, 0, (20, 23)),
    (5, (2, 3), (2, 1), (10, 22)),
]


@pytest.mark.parametrize('ksize, stride, pad, outsize', SHAPE_GRID)
def test_output_shape_equals_deconvolution2d(ksize, stride, pad, outsize):
    x = np.random.RandomState(0).uniform(-1, 1, (2, 3, 6, 7)).astype(np.float32)
    expected = L.Deconvolution2D(3, 5, ksize, stride, pad, outsize=outsize)(x).shape
    assert DeconvolutionPS(3, 5, ksize, stride, pad, outsize=outsize)(x).shape == expected


def test_original_researchutils_sizes_hold():
    # The frame decoder of the original tests: 11x8 -> 24x18 -> 50x38 -> 102x78 -> 210x160.
    x = np.zeros((1, 4, 11, 8), np.float32)
    for out_channels, ksize, pad, expected in [(4, 4, 0, (24, 18)), (4, 6, 1, (50, 38)),
                                               (4, 6, 1, (102, 78)), (3, 8, (0, 1), (210, 160))]:
        x = DeconvolutionPS(4, out_channels, ksize, 2, pad)(x)
        assert x.shape[2:] == expected


@pytest.mark.parametrize('ksize, stride, pad, outsize', [
    (4, 2, 1, None), (3, 2, 0, None), (3, 2, 1, None), (5, 3, 2, None), (6, 2, 4, None),
    ((4, 3), (2, 1), (0, 1), None), (4, 2, 1, (13, 13)), (1, 1, 0, None), (2, 3, 0, None),
])
def test_values_equal_numpy_subpixel_convolution(ksize, stride, pad, outsize):
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (2, 3, 6, 7))
    with chainer.using_config('dtype', np.float64):
        link = DeconvolutionPS(3, 2, ksize, stride, pad, outsize=outsize,
                               initial_bias=chainer.initializers.Uniform(1.0))
    expected = _numpy_deconvolution_ps(x, link.conv.W.array, link.conv.b.array, ksize, stride,
                                       pad, outsize)
    np.testing.assert_allclose(link(x).array, expected, rtol=1e-12, atol=1e-12)


def test_kernel_is_ksize_divided_by_stride_rounded_up():
    assert DeconvolutionPS(3, 5, 4, 2).conv.W.shape == (20, 3, 2, 2)
    assert DeconvolutionPS(3, 5, (5, 3), (2, 3)).conv.W.shape == (30, 3, 3, 1)


def test_parameter_names_are_the_originals():
    assert sorted(name for name, _ in DeconvolutionPS(3, 5, 4, 2).namedparams()) == \
        ['/conv/W', '/conv/b']
    assert sorted(name for name, _ in DeconvolutionPS(3, 5, 4, 2, nobias=True).namedparams()) \
        == ['/conv/W']


def test_initializers_are_used():
    link = DeconvolutionPS(3, 5, 4, 2, initialW=chainer.initializers.Constant(0.5),
                           initial_bias=2.0)
    assert np.all(link.conv.W.array == 0.5) and np.all(link.conv.b.array == 2.0)


def test_in_channels_is_inferred_on_the_first_call():
    link = DeconvolutionPS(None, 5, 4, 2, 1)
    assert link.conv.W.array is None
    assert link(np.zeros((1, 3, 4, 4), np.float32)).shape == (1, 5, 8, 8)
    assert link.conv.W.shape == (20, 3, 2, 2)


def test_each_call_recomputes_the_size_for_its_input():
    link = DeconvolutionPS(3, 5, 4, 2, 1)
    assert link(np.zeros((1, 3, 4, 4), np.float32)).shape == (1, 5, 8, 8)
    assert link(np.zeros((1, 3, 7, 5), np.float32)).shape == (1, 5, 14, 10)


@pytest.mark.parametrize('ksize, stride, pad, outsize', [
    (4, 2, 1, None), (3, 2, 1, None), ((4, 3), (2, 1), (0, 1), None), (3, 2, 0, (8, 10))])
def test_gradients(ksize, stride, pad, outsize):
    rng = np.random.RandomState(2)
    with chainer.using_config('dtype', np.float64):
        link = DeconvolutionPS(2, 3, ksize, stride, pad, outsize=outsize,
                               initial_bias=chainer.initializers.Uniform(1.0))
    x = rng.uniform(-1, 1, (2, 2, 4, 5))
    gy = rng.uniform(-1, 1, link(x).shape)
    gradient_check.check_backward(link, x, gy, (link.conv.W, link.conv.b),
                                  eps=1e-6, atol=1e-7, rtol=1e-6)


def test_double_backward():
    rng = np.random.RandomState(3)
    with chainer.using_config('dtype', np.float64):
        link = DeconvolutionPS(2, 3, 3, 2, 1, initial_bias=chainer.initializers.Uniform(1.0))
    x = rng.uniform(-1, 1, (2, 2, 4, 5))
    gy = rng.uniform(-1, 1, link(x).shape)

    def squared(x):
        y = link(x)
        return y * y  # the link is linear: square it so the second derivative is not zero

    gradient_check.check_double_backward(
        squared, x, gy, rng.uniform(-1, 1, x.shape), params=(link.conv.W,),
        params_grad_grad=(rng.uniform(-1, 1, link.conv.W.shape),),
        eps=1e-6, atol=1e-6, rtol=1e-5)


def test_serialization_round_trips(tmp_path):
    link = DeconvolutionPS(3, 5, 4, 2, 1)
    path = str(tmp_path / 'deconv.npz')
    chainer.serializers.save_npz(path, link)
    fresh = DeconvolutionPS(3, 5, 4, 2, 1)
    chainer.serializers.load_npz(path, fresh)
    x = np.random.RandomState(4).uniform(-1, 1, (1, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(fresh(x).array, link(x).array)


@pytest.mark.parametrize('kwargs, error, name', [
    ({'ksize': 0}, ValueError, 'ksize'),
    ({'ksize': (3,)}, ValueError, 'ksize'),
    ({'ksize': 2.5}, TypeError, 'ksize'),
    ({'stride': 0}, ValueError, 'stride'),
    ({'stride': True}, TypeError, 'stride'),
    ({'pad': -1}, ValueError, 'pad'),
    ({'outsize': (0, 3)}, ValueError, 'outsize'),
    ({'outsize': 8}, TypeError, 'outsize'),
    ({'out_channels': 0}, ValueError, 'out_channels'),
    ({'in_channels': -2}, ValueError, 'in_channels'),
    ({'nobias': 'False'}, TypeError, "^nobias must be True or False, got 'False'"),
    ({'nobias': None}, TypeError, '^nobias must be True or False'),
    ({'nobias': 2}, TypeError, '^nobias must be True or False'),
    ({'nobias': [True]}, TypeError, '^nobias must be True or False'),
    ({'initialW': 'abc'}, TypeError, '^initialW must be an initializer'),
    ({'initial_bias': 'abc'}, TypeError, '^initial_bias must be an initializer'),
    ({'initial_bias': np.array(['a'])}, TypeError, '^initial_bias must be an initializer'),
])
def test_bad_arguments_are_refused_with_their_name(kwargs, error, name):
    arguments = dict(in_channels=3, out_channels=5, ksize=4, stride=2)
    arguments.update(kwargs)
    with pytest.raises(error, match=name):
        DeconvolutionPS(**arguments)


def test_outsize_that_a_deconvolution_cannot_give_is_refused_at_the_call():
    link = DeconvolutionPS(3, 5, 4, 2, 1, outsize=(8, 10))
    with pytest.raises(ValueError, match='outsize'):
        link(np.zeros((1, 3, 4, 4), np.float32))


def test_pad_that_leaves_no_output_is_refused_at_the_call():
    with pytest.raises(ValueError, match='pad'):
        DeconvolutionPS(3, 5, 2, 1, 3)(np.zeros((1, 3, 2, 2), np.float32))


def test_input_that_is_not_4d_is_refused():
    with pytest.raises(chainer.utils.type_check.InvalidType):
        DeconvolutionPS(3, 5, 4, 2)(np.zeros((3, 4, 4), np.float32))


def test_module_stays_a_module():
    assert deconvolution_ps.DeconvolutionPS is DeconvolutionPS


@pytest.mark.gpu
def test_gpu_values_and_gradients_match_cpu():
    link = DeconvolutionPS(3, 5, 4, 2, 1, initial_bias=chainer.initializers.Uniform(1.0))
    gpu = link.copy(mode='copy')
    gpu.to_device('@cupy:0')
    x = np.random.RandomState(5).uniform(-1, 1, (2, 3, 6, 7)).astype(np.float32)
    ys = []
    for model, array in ((link, x), (gpu, chainer.backends.cuda.to_gpu(x))):
        model.cleargrads()
        y = model(array)
        chainer.functions.sum(y * y).backward()
        ys.append(chainer.backends.cuda.to_cpu(y.array))
    np.testing.assert_allclose(ys[0], ys[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(link.conv.W.grad, chainer.backends.cuda.to_cpu(gpu.conv.W.grad),
                               rtol=1e-3, atol=1e-4)


def _function_names(y):
    names, stack = set(), [y.creator_node]
    while stack:
        node = stack.pop()
        if node is not None:
            names.add(node.label)
            stack.extend(x.creator_node for x in node.inputs)
    return names


def test_few_output_channels_take_the_transposed_convolution_on_the_cpu():
    # 8 -> 1 channel, stride 2: the convolution has 4 output channels, fewer than 8 inputs.
    y = DeconvolutionPS(8, 1, 8, 2, 3)(np.zeros((1, 8, 5, 5), np.float32))
    names = _function_names(y)
    assert 'Deconvolution2DFunction' in names and 'Convolution2DFunction' not in names


def test_decoder_layer_keeps_the_convolution_on_the_cpu():
    # 3 -> 5 channels, stride 2: 20 output channels, more than 3 inputs.
    y = DeconvolutionPS(3, 5, 4, 2, 1)(np.zeros((1, 3, 5, 5), np.float32))
    names = _function_names(y)
    assert 'Convolution2DFunction' in names and 'Deconvolution2DFunction' not in names


@pytest.mark.parametrize('ksize, stride, pad, outsize', SHAPE_GRID)
def test_few_output_channels_shape_equals_deconvolution2d(ksize, stride, pad, outsize):
    x = np.random.RandomState(0).uniform(-1, 1, (2, 13, 6, 7)).astype(np.float32)
    expected = L.Deconvolution2D(13, 1, ksize, stride, pad, outsize=outsize)(x).shape
    assert DeconvolutionPS(13, 1, ksize, stride, pad, outsize=outsize)(x).shape == expected


@pytest.mark.parametrize('ksize, stride, pad, outsize, nobias', [
    (8, 2, 3, None, False), (4, 2, 1, None, True), (3, 2, 0, None, False),
    (5, 3, 2, None, False), (6, 2, 4, None, True), ((4, 3), (2, 1), (0, 1), None, False),
    ((5, 3), (2, 3), (0, 2), None, False), (4, 2, 1, (13, 13), False),
    (4, 2, 1, (11, 14), True), (2, 3, 0, None, False), (1, 1, 0, None, False),
])
def test_few_output_channels_values_equal_numpy_subpixel_convolution(
        ksize, stride, pad, outsize, nobias):
    rng = np.random.RandomState(6)
    x = rng.uniform(-1, 1, (2, 19, 6, 7))
    with chainer.using_config('dtype', np.float64):
        link = DeconvolutionPS(19, 2, ksize, stride, pad, outsize=outsize, nobias=nobias,
                               initial_bias=chainer.initializers.Uniform(1.0))
    assert link.conv.W.shape[0] < 19  # the transposed-convolution path
    b = None if nobias else link.conv.b.array
    expected = _numpy_deconvolution_ps(x, link.conv.W.array, b, ksize, stride, pad, outsize)
    np.testing.assert_allclose(link(x).array, expected, rtol=1e-12, atol=1e-12)


# Kernel, padding (up to the largest DeconvolutionPS asks for: the kernel size) and input.
PATH_GRID = [((kh, kw), (ph, pw), (5, 6))
             for kh, kw in [(1, 1), (2, 3), (4, 4), (3, 1)]
             for ph, pw in [(0, 0), (kh - 1, kw - 1), (kh, kw), (kh, 0)]] + [
    ((3, 3), (1, 2), (1, 1)), ((4, 2), (4, 2), (1, 3)), ((2, 2), (1, 0), (7, 2))]


@pytest.mark.parametrize('kernel, pad, size', PATH_GRID)
@pytest.mark.parametrize('nobias', [False, True])
def test_both_paths_give_the_same_values_and_gradients(kernel, pad, size, nobias):
    rng = np.random.RandomState(7)
    x = rng.uniform(-1, 1, (2, 5) + size)
    W = rng.uniform(-1, 1, (3, 5) + kernel)
    b = None if nobias else rng.uniform(-1, 1, 3)
    results = []
    for by_col2im in (False, True):
        xv, Wv = chainer.Variable(x.copy()), chainer.Variable(W.copy())
        bv = None if nobias else chainer.Variable(b.copy())
        y = deconvolution_ps._stride1_convolution(xv, Wv, bv, pad, by_col2im)
        gy = np.random.RandomState(8).uniform(-1, 1, y.shape)
        chainer.functions.sum(y * gy).backward()
        results.append([y.array, xv.grad, Wv.grad] + ([] if nobias else [bv.grad]))
    # Plain NumPy correlation for the values.
    padded = np.pad(x, ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
    out_h, out_w = padded.shape[2] - kernel[0] + 1, padded.shape[3] - kernel[1] + 1
    expected = np.zeros((2, 3, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            patch = padded[:, :, i:i + kernel[0], j:j + kernel[1]]
            expected[:, :, i, j] = np.einsum('bckl,ockl->bo', patch, W)
    if b is not None:
        expected += b[None, :, None, None]
    np.testing.assert_allclose(results[0][0], expected, rtol=1e-12, atol=1e-12)
    for im2col, col2im in zip(*results):
        assert im2col.shape == col2im.shape
        np.testing.assert_allclose(col2im, im2col, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('ksize, stride, pad, outsize, nobias', [
    (8, 2, 3, None, False), ((4, 3), (2, 1), (0, 1), None, False), (3, 2, 0, (8, 10), True),
    (5, 3, 1, (13, 14), False)])
def test_few_output_channels_gradients(ksize, stride, pad, outsize, nobias):
    rng = np.random.RandomState(9)
    with chainer.using_config('dtype', np.float64):
        link = DeconvolutionPS(11, 1, ksize, stride, pad, outsize=outsize, nobias=nobias,
                               initial_bias=chainer.initializers.Uniform(1.0))
    assert link.conv.W.shape[0] < 11  # the transposed-convolution path
    x = rng.uniform(-1, 1, (2, 11, 4, 5))
    gy = rng.uniform(-1, 1, link(x).shape)
    params = (link.conv.W,) if nobias else (link.conv.W, link.conv.b)
    gradient_check.check_backward(link, x, gy, params, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_few_output_channels_double_backward():
    rng = np.random.RandomState(10)
    with chainer.using_config('dtype', np.float64):
        link = DeconvolutionPS(5, 1, 5, 2, 2, initial_bias=chainer.initializers.Uniform(1.0))
    assert link.conv.W.shape[0] < 5  # the transposed-convolution path
    x = rng.uniform(-1, 1, (2, 5, 3, 4))
    gy = rng.uniform(-1, 1, link(x).shape)

    def squared(x):
        y = link(x)
        return y * y

    gradient_check.check_double_backward(
        squared, x, gy, rng.uniform(-1, 1, x.shape),
        params=(link.conv.W, link.conv.b),
        params_grad_grad=(rng.uniform(-1, 1, link.conv.W.shape),
                          rng.uniform(-1, 1, link.conv.b.shape)),
        eps=1e-6, atol=1e-6, rtol=1e-5)
