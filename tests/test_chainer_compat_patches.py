"""What _researchutils_chainer_compat supplies to Chainer, against the NumPy 1.x semantics
Chainer 7.8.1 was written for (independent references in plain NumPy, and NumPy 1.26's own
behaviour where the suite runs on it). These run in this process, whose interpreter start
installed the finder, on every stack the suite runs on. The pkg_resources stand-in is tested
in tests/test_chainer_compat_pkg_resources.py, the finder in tests/test_chainer_compat.py.
"""
import importlib
import inspect
import os
import re
import subprocess
import sys
import threading
import warnings

import chainer
import chainer.functions as F
import numpy as np
import pytest
from chainer import gradient_check

import _researchutils_chainer_compat as compat
from _researchutils_chainer_compat import _changed, _stand_ins
from tests.support.processes import checkout_env

NUMPY_2 = int(np.__version__.split('.')[0]) >= 2


def _bilinear_reference(x, out_h, out_w, align_corners):
    """Plain NumPy bilinear resize of (B, C, H, W), Chainer's sampling grid."""
    _, _, h, w = x.shape

    def grid(n_out, n_in):
        if align_corners:
            return np.linspace(0, n_in - 1, n_out)
        return np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0)

    out = np.zeros(x.shape[:2] + (out_h, out_w))
    for i, v in enumerate(grid(out_h, h)):
        for j, u in enumerate(grid(out_w, w)):
            v0, u0 = int(v), int(u)
            v1, u1 = min(v0 + 1, h - 1), min(u0 + 1, w - 1)
            dv, du = v - v0, u - u0
            out[:, :, i, j] = ((1 - dv) * (1 - du) * x[:, :, v0, u0] +
                               (1 - dv) * du * x[:, :, v0, u1] +
                               dv * (1 - du) * x[:, :, v1, u0] + dv * du * x[:, :, v1, u1])
    return out


@pytest.mark.parametrize('align_corners', [True, False])
def test_resize_images_bilinear_matches_a_plain_numpy_resize(align_corners):
    x = np.random.RandomState(0).rand(2, 3, 4, 5).astype(np.float32)
    y = F.resize_images(x, (7, 3), align_corners=align_corners)
    np.testing.assert_allclose(y.array, _bilinear_reference(x, 7, 3, align_corners),
                               rtol=1e-5, atol=1e-6)


def test_resize_images_nearest_and_its_gradient():
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    y = F.resize_images(x, (6, 8), mode='nearest')
    np.testing.assert_array_equal(y.array[0, 0], np.repeat(np.repeat(x[0, 0], 2, 0), 2, 1))
    gradient_check.check_backward(
        lambda v: F.resize_images(v, (5, 6)), np.random.rand(1, 2, 3, 4).astype(np.float32),
        np.random.rand(1, 2, 5, 6).astype(np.float32), dtype=np.float64, atol=1e-3, rtol=1e-3)


def test_as_strided_values_and_gradient_as_numpy_strides_them():
    x = np.arange(6.0)
    y = F.as_strided(x, (3, 2), (2, 1))
    np.testing.assert_array_equal(
        y.array, np.lib.stride_tricks.as_strided(x, (3, 2), (2 * x.itemsize, x.itemsize)))
    variable = chainer.Variable(x)
    F.sum(F.as_strided(variable, (2, 2), (1, 1))).backward()        # overlapping windows
    np.testing.assert_array_equal(variable.grad, [1, 2, 1, 0, 0, 0])


def test_as_strided_index_dtypes_are_numpys_signed_integers_by_size():
    from chainer.functions.array import as_strided
    assert as_strided.index_dtype == {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def test_sctypes_stand_in_is_numpy_1_26s_table():
    table = _stand_ins.sctypes()
    assert table['int'] == [np.int8, np.int16, np.int32, np.int64]
    assert table['uint'] == [np.uint8, np.uint16, np.uint32, np.uint64]
    assert table['float'][:3] == [np.float16, np.float32, np.float64]
    assert table['others'] == [bool, object, bytes, str, np.void]
    if not NUMPY_2:                        # NumPy 1.26 still has the real one
        assert table == np.sctypes


# What NumPy 1.26 (Linux) stores for a Python int padding: (dtype, padding, stored by
# `array[...] = padding` (F.pad_sequence), stored by numpy.full (concat_examples)).
# test_int_table_is_what_numpy_1_stores checks every row against NumPy 1.26 itself.
INT_PADDINGS = [
    (np.uint8, -1, 255, 255), (np.uint8, 300, 44, 44), (np.int8, 300, 44, 44),
    (np.int8, 127, 127, 127), (np.int8, 128, -128, -128), (np.int8, -129, 127, 127),
    (np.int8, 200, -56, -56), (np.int32, 2 ** 31, -2 ** 31, -2 ** 31),
    (np.uint32, -2, 2 ** 32 - 2, 2 ** 32 - 2), (np.int32, -7, -7, -7),
    (np.int8, 2 ** 63 - 1, -1, -1), (np.int8, 2 ** 63, OverflowError, 0),
    (np.uint16, 2 ** 63, OverflowError, 0), (np.uint32, 2 ** 63, 0, 0),
    (np.uint32, 2 ** 64 - 1, 2 ** 32 - 1, 2 ** 32 - 1),
    (np.int64, -2 ** 63, -2 ** 63, -2 ** 63), (np.int64, 2 ** 63, OverflowError, -2 ** 63),
    (np.int64, -2 ** 63 - 1, OverflowError, OverflowError),
    (np.int64, 2 ** 64, OverflowError, OverflowError),
    (np.uint64, -1, 2 ** 64 - 1, 2 ** 64 - 1), (np.uint64, 2 ** 63, 2 ** 63, 2 ** 63),
    (np.uint64, 2 ** 64, OverflowError, OverflowError),
    (np.int8, 2 ** 70, OverflowError, OverflowError),
    (np.int8, -2 ** 64, OverflowError, OverflowError),
]


def _case_id(case):
    return '{}-{}'.format(np.dtype(case[0]).name, case[1])


def _stored_or_error(call):
    try:
        return int(call())
    except OverflowError:
        return OverflowError


@pytest.mark.skipif(NUMPY_2, reason='the reference is NumPy 1.26 itself, on the 3.11 stack')
@pytest.mark.parametrize('case', INT_PADDINGS, ids=_case_id)
def test_int_table_is_what_numpy_1_stores(case):
    dtype, padding, by_setitem, by_full = case

    def setitem():
        array = np.zeros(2, dtype)
        array[1:] = padding
        return array[1]

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)     # 1.24-1.26 warn, then wrap
        assert _stored_or_error(setitem) == by_setitem
        assert _stored_or_error(lambda: np.full(2, padding, dtype)[1]) == by_full


def _assert_pads_with(pad, dtype, padding, stored):
    """``pad(arrays, padding)`` of [1, 2, 3] and [4] stores ``stored`` (or raises it)."""
    xs = [np.array([1, 2, 3], dtype), np.array([4], dtype)]
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        if stored is OverflowError:
            with pytest.raises(OverflowError):
                pad(xs, padding)
            return
        y = pad(xs, padding)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, np.array([[1, 2, 3], [4, stored, stored]], dtype))


@pytest.mark.parametrize('case', INT_PADDINGS, ids=_case_id)
def test_pad_sequence_stores_an_int_padding_as_numpy_1_did(case):
    dtype, padding, stored, _ = case
    _assert_pads_with(lambda xs, p: F.pad_sequence(xs, padding=p).array, dtype, padding, stored)


@pytest.mark.parametrize('case', INT_PADDINGS, ids=_case_id)
def test_concat_examples_stores_an_int_padding_as_numpy_1_did(case):
    dtype, padding, _, stored = case
    _assert_pads_with(lambda xs, p: chainer.dataset.concat_examples(xs, padding=p),
                      dtype, padding, stored)


def test_concat_examples_pads_each_element_of_a_tuple_with_its_own_wrapped_padding():
    batch = [(np.array([1, 2], np.uint8), np.array([3], np.int8)),
             (np.array([4], np.uint8), np.array([5, 6], np.int8))]
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        x, t = chainer.dataset.concat_examples(batch, padding=(-1, 300))
    np.testing.assert_array_equal(x, np.array([[1, 2], [4, 255]], np.uint8))
    np.testing.assert_array_equal(t, np.array([[3, 44], [5, 6]], np.int8))


@pytest.mark.parametrize('dtype,padding', [(np.float32, -1), (np.float32, 2 ** 70),
                                           (np.float64, 0.5), (np.bool_, 1)])
def test_pad_sequence_and_concat_examples_store_other_paddings_as_numpy_does(dtype, padding):
    xs = [np.zeros(2, dtype), np.zeros(1, dtype)]
    expected = np.array([[0, 0], [0, padding]], dtype)
    np.testing.assert_array_equal(F.pad_sequence(xs, padding=padding).array, expected)
    np.testing.assert_array_equal(chainer.dataset.concat_examples(xs, padding=padding),
                                  expected)


def test_pad_sequence_with_an_out_of_range_padding_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        y = F.pad_sequence([np.zeros(2, np.uint16), np.zeros(1, np.uint16)], padding=-1)
    np.testing.assert_array_equal(y.array, [[0, 0], [0, 2 ** 16 - 1]])


def test_pad_sequence_keeps_its_padding_and_a_float_one():
    function = chainer.functions.array.pad_sequence.PadSequence(3, -1)
    function.apply([np.zeros(1, np.uint8)])
    assert function.padding == -1
    y = F.pad_sequence([np.zeros(1, np.float32)], length=2, padding=0.5).array
    np.testing.assert_array_equal(y, [[0, 0.5]])


def test_debug_print_names_a_cpu_array_as_chainer_did():
    text = chainer.Variable(np.ones(3, np.float32), name='v').debug_print()
    assert '\n- device: CPU\n' in text
    assert '- shape: (3,)' in text


def test_fix_rounds_towards_zero_keeps_dtype_sign_and_warns_nothing():
    x = np.array([-2.5, -0.5, 0.0, 0.4, 1.7], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        y = F.fix(chainer.Variable(x)).array
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [-2.0, -0.0, 0.0, 0.0, 1.0])
    assert np.signbit(y[1])


def test_categorical_log_prob_and_kl_divergence_as_plain_numpy_indexing_gives_them():
    rng = np.random.RandomState(0)
    p = rng.rand(3, 2, 4).astype(np.float32)
    p /= p.sum(axis=-1, keepdims=True)
    q = rng.rand(3, 2, 4).astype(np.float32)
    q /= q.sum(axis=-1, keepdims=True)
    x = rng.randint(0, 4, size=(3, 2))
    dist = chainer.distributions.Categorical(p)
    reference = np.log(p)[np.arange(3)[:, None], np.arange(2)[None, :], x]
    np.testing.assert_allclose(dist.log_prob(x).array, reference, rtol=1e-6)
    np.testing.assert_allclose(dist.log_prob(chainer.Variable(x)).array, reference, rtol=1e-6)
    kl = chainer.kl_divergence(dist, chainer.distributions.Categorical(q)).array
    np.testing.assert_allclose(kl, (p * (np.log(p) - np.log(q))).sum(axis=-1), rtol=1e-5)


def test_concat_examples_pads_to_the_largest_shape_and_warns_nothing():
    arrays = [np.arange(6.0).reshape(2, 3), np.arange(3.0).reshape(3, 1)]
    expected = np.full((2, 3, 3), -1.0)
    expected[0, :2, :3] = arrays[0]
    expected[1, :3, :1] = arrays[1]
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        x, t = chainer.dataset.concat_examples([(arrays[0], 1), (arrays[1], 2)], padding=-1)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(t, [1, 2])


def test_multiprocess_iterator_runs_its_daemon_prefetch_thread_and_warns_nothing():
    iterator = chainer.iterators.MultiprocessIterator(
        list(range(7)), 3, repeat=False, shuffle=False, n_processes=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            batches = list(iterator)
        assert batches == [[0, 1, 2], [3, 4, 5], [6]]
        assert iterator._prefetch_loop._thread.daemon
    finally:
        iterator.finalize()


def test_maxout_gives_callable_initializers_its_3d_and_2d_shapes_and_warns_nothing():
    seen = []

    def initial_w(array):
        seen.append(array.shape)
        array[...] = np.arange(array.size).reshape(array.shape)

    def initial_b(array):
        seen.append(array.shape)
        array[...] = -np.arange(array.size).reshape(array.shape)

    with warnings.catch_warnings():
        warnings.simplefilter('error')
        link = chainer.links.Maxout(3, 2, 4, initialW=initial_w, initial_bias=initial_b)
    assert seen == [(2, 4, 3), (2, 4)]
    np.testing.assert_array_equal(link.linear.W.array, np.arange(24).reshape(8, 3))
    np.testing.assert_array_equal(link.linear.b.array, -np.arange(8))
    # unit k of the Linear: W[k] = (3k, 3k+1, 3k+2), b[k] = -k -> 8k + 3 on ones; max of 4
    y = link(np.ones((1, 3), np.float32)).array
    np.testing.assert_array_equal(y, [[8 * 3 + 3, 8 * 7 + 3]])


def test_caffe_protobuf_module_builds_caffe_messages_and_caffe_function_runs(tmp_path):
    from chainer.links.caffe import CaffeFunction
    from chainer.links.caffe.protobuf3 import caffe_pb2 as pb
    # caffe.proto: `repeated int64 dim = 1 [packed = true]` -> tag 0x0a, length 2, 2, 3
    assert pb.BlobShape(dim=[2, 3]).SerializeToString() == b'\n\x02\x02\x03'
    assert (pb.TRAIN, pb.TEST, pb.DESCRIPTOR.name) == (0, 1, 'caffe.proto')
    rng = np.random.RandomState(0)
    w, b = rng.randn(2, 3).astype(np.float32), rng.randn(2).astype(np.float32)
    net = pb.NetParameter(name='tiny', layer=[
        pb.LayerParameter(
            name='ip', type='InnerProduct', bottom=['data'], top=['ip'],
            inner_product_param=pb.InnerProductParameter(num_output=2),
            blobs=[pb.BlobProto(shape=pb.BlobShape(dim=[2, 3]), data=w.ravel().tolist()),
                   pb.BlobProto(shape=pb.BlobShape(dim=[2]), data=b.tolist())]),
        pb.LayerParameter(name='relu', type='ReLU', bottom=['ip'], top=['out'])])
    path = tmp_path / 'tiny.caffemodel'
    path.write_bytes(net.SerializeToString())
    x = rng.randn(4, 3).astype(np.float32)
    y, = CaffeFunction(str(path))(inputs={'data': x}, outputs=['out'])
    np.testing.assert_allclose(y.array, np.maximum(x @ w.T + b, 0), rtol=1e-6)


@pytest.mark.parametrize('module_name,qualname', [
    ('chainer._environment_check', '_check_osx_numpy_backend'),
    ('chainer.functions.array.as_strided', 'AsStridedGrad.forward'),
    ('chainer.functions.array.resize_images', 'compute_indices_and_weights'),
    ('chainer.distributions.categorical', 'Categorical.log_prob'),
    ('chainer.dataset.convert', '_concat_arrays_with_padding')])
def test_functions_given_a_numpy_namespace_never_compare_numpy_by_identity(
        module_name, qualname):

    target = importlib.import_module(module_name)
    for part in qualname.split('.'):
        target = getattr(target, part)
    source = inspect.getsource(target)
    assert 'is numpy' not in source and 'is np' not in source and 'numpy is' not in source


def _numpy_float64_nearest_indices(n_in, n_out):
    """Chainer's nearest-neighbour rows (or columns), with float64 coordinates."""
    coordinates = np.arange(n_out, dtype=np.float64) * (n_in / n_out)
    return np.minimum(np.floor(coordinates), n_in - 1).astype(int)


@pytest.mark.parametrize('in_size,out_size', [((14, 26), (46, 22)), ((30, 26), (52, 44))])
def test_resize_images_nearest_picks_the_pixels_of_float64_coordinates(in_size, out_size):
    # At these sizes a float32 grid floors some coordinates to the pixel before or after.
    for n_in, n_out in zip(in_size, out_size):
        float32 = np.floor(np.arange(n_out, dtype=np.float32) * (n_in / n_out))
        assert (float32 != _numpy_float64_nearest_indices(n_in, n_out)).any()
    x = np.arange(np.prod(in_size), dtype=np.float32).reshape((1, 1) + in_size)
    y = F.resize_images(x, out_size, mode='nearest').array
    rows, columns = (_numpy_float64_nearest_indices(n, m) for n, m in zip(in_size, out_size))
    np.testing.assert_array_equal(y[0, 0], x[0, 0][rows][:, columns])


@pytest.mark.parametrize('align_corners', [True, False])
def test_resize_images_bilinear_weights_come_from_float64_coordinates(align_corners):
    # 4099 rows down to 1000: float32 coordinates near 4000 are off by up to 2.4e-4 of a
    # pixel, which moves the interpolated value by far more than float32 arithmetic does.
    x = np.random.RandomState(1).rand(1, 1, 4099, 2).astype(np.float32)
    y = F.resize_images(x, (1000, 2), align_corners=align_corners).array
    np.testing.assert_allclose(y, _bilinear_reference(x, 1000, 2, align_corners),
                               rtol=0, atol=2e-6)


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('shape', [(5,), ()])
def test_fix_keeps_the_dtype_and_shape_of_its_input(dtype, shape):
    x = np.array([-2.5, -0.5, 0.0, 0.4, 1.7], dtype)[:5 if shape else 1].reshape(shape)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        y = F.fix(x).array
    assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == shape
    np.testing.assert_array_equal(y, np.trunc(x.astype(np.float64)).astype(dtype))


def test_setdaemon_of_pythons_threading_is_untouched_by_the_iterators_patch():
    from chainer.iterators import multiprocess_iterator
    assert multiprocess_iterator.threading is threading
    method = threading.Thread.__dict__['setDaemon']
    assert os.path.samefile(method.__code__.co_filename, threading.__file__)
    thread = threading.Thread()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        thread.setDaemon(True)                      # Python's own: deprecated since 3.10
    assert thread.daemon and [w.category for w in caught] == [DeprecationWarning]


def test_maxout_keeps_chainers_default_initial_bias_of_zero():
    link = chainer.links.Maxout(3, 2, 4)
    np.testing.assert_array_equal(link.linear.b.array, np.zeros(8, np.float32))
    assert chainer.links.Maxout(3, 2, 4, initial_bias=None).linear.b is None


def test_what_is_supplied_matches_what_the_stack_lacks():
    from chainer import variable
    from chainer.dataset import convert
    from chainer.distributions import categorical
    from chainer.functions.array import pad_sequence
    from chainer.functions.math import fix as fix_module
    major, minor = (int(p) for p in np.__version__.split('.')[:2])

    def patched(function):
        return function.__code__.co_filename == _changed.__file__

    assert patched(fix_module.fix) == ((major, minor) >= (2, 5))    # numpy.fix deprecated
    # out-of-bound ints: array stores warn from 1.24 and refuse from 2.0; numpy.full
    # refuses from 2.5 (still wrapping on 2.0)
    assert patched(pad_sequence.PadSequence.forward) == ((major, minor) >= (1, 24))
    assert patched(convert._concat_arrays_with_padding) == ((major, minor) >= (2, 5))
    assert patched(variable.Variable.debug_print) == NUMPY_2         # ndarray.device
    assert (categorical.Categorical.log_prob.__globals__['numpy'] is not np) == NUMPY_2
    assert categorical.numpy is np and convert.numpy is np           # the modules' own


# --- onnx_chainer on an onnx without onnx.mapping ------------------------------------

def test_onnx_chainer_imports_and_reads_onnxs_tables_of_types():
    onnx = pytest.importorskip('onnx', reason='the onnx extra')
    exporter = importlib.import_module('onnx_chainer.export')
    from onnx_chainer.functions import array, math
    assert exporter._available
    for table in (exporter.NP_TYPE_TO_TENSOR_TYPE, array.NP_TYPE_TO_TENSOR_TYPE,
                  math.NP_TYPE_TO_TENSOR_TYPE):
        assert table[np.dtype(np.float32)] == onnx.TensorProto.FLOAT
        assert table[np.dtype(np.int64)] == onnx.TensorProto.INT64
        assert table[np.dtype(np.float16)] == onnx.TensorProto.FLOAT16
        assert table[np.dtype(np.bool_)] == onnx.TensorProto.BOOL


@pytest.mark.parametrize('dtype,field', [(np.float32, 'float_data'), (np.int64, 'int64_data'),
                                         (np.int32, 'int32_data'), (np.float64, 'double_data')])
def test_onnx_chainer_writes_a_constant_into_the_field_of_its_type(dtype, field):
    pytest.importorskip('onnx', reason='the onnx extra')
    from onnx_chainer import context
    tensor = context._tensor_from_array_for_constant(np.array([[1, 2], [3, 4]], dtype), 'k')
    assert tensor.raw_data == b'' and list(getattr(tensor, field)) == [1, 2, 3, 4]


def test_onnx_gains_no_mapping_module():
    onnx = pytest.importorskip('onnx', reason='the onnx extra')
    importlib.import_module('onnx_chainer.export')
    had = [n for n in ('onnx.mapping',) if os.path.exists(
        os.path.join(os.path.dirname(onnx.__file__), 'mapping.py'))]
    assert hasattr(onnx, 'mapping') == bool(had)
    assert ('onnx.mapping' in sys.modules) == bool(had)


# --- the table of patches ------------------------------------------------------------

def test_every_patch_in_the_table_is_a_function_of_loader_and_module():
    for name in compat.PATCHED_MODULES:
        patch = compat.patch_for(name)
        assert list(inspect.signature(patch).parameters) == ['loader', 'module'], name


def test_every_patch_function_is_in_the_table():
    named = set(compat.PATCHED_MODULES.values())
    for where in sorted({patch.partition(':')[0] for patch in named}):
        module = importlib.import_module(compat.__name__ + '.' + where)
        for name, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == module.__name__ \
                    and not name.startswith('_'):
                assert '{}:{}'.format(module.__name__.rpartition('.')[2], name) in named


@pytest.mark.parametrize('patch,module_name', sorted(
    {patch: name for name, patch in compat.PATCHED_MODULES.items()}.items()))
def test_every_patch_names_the_release_that_changed_what_it_supplies(patch, module_name):
    comments = ' '.join(re.findall(r'#(.*)', inspect.getsource(compat.patch_for(module_name))))
    assert re.search(r'(NumPy|Python|setuptools|protobuf|onnx|torch|CuPy) \d', comments), patch


def test_no_module_of_the_compat_package_is_over_400_lines():
    folder = os.path.dirname(compat.__file__)
    for name in os.listdir(folder):
        if name.endswith('.py'):
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                assert len(f.read().splitlines()) <= 400, name


# --- CUDA's libraries without a GPU ----------------------------------------------------

_CUDA_STATE = '''
import sys
import warnings
warnings.simplefilter('error', UserWarning)  # Chainer's 'cuDNN is not enabled'
import chainer.functions
from chainer.backends import cuda
try:
    import cupy
    cupy.cuda.runtime.getDeviceCount()
    print('device')
except ImportError:
    print('no cupy')
except Exception:
    print('no device')
print(cuda.available, any(name.startswith('optuna') for name in sys.modules))
try:
    cuda.check_cuda_available()
except RuntimeError as error:
    print(' '.join(str(error).split()))
try:
    from cupy.cuda import cublas  # noqa: F401
    print('cuBLAS')
except Exception:
    print('no cuBLAS')
'''


def test_cupy_that_imports_on_a_machine_without_a_device_is_not_available():
    # The newest stack has CuPy 14 and, from torch's wheels, cuBLAS (the fourth line): every
    # import Chainer tries succeeds, and only the missing driver tells that no GPU can be
    # used. Chainer alone said available, and warned at import that cuDNN is not enabled.
    env = checkout_env()
    done = subprocess.run([sys.executable, '-c', _CUDA_STATE], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines[0] != 'no device':
        pytest.skip('needs CuPy and no usable CUDA device, found: ' + lines[0])
    # Not available, and Optuna not imported (cupyx.scipy, which Chainer imports beside CuPy,
    # imports it where it is installed: `import chainer` loaded the search's dependency).
    assert lines[1] == 'False False'
    assert 'CuPy imports, but no CUDA device can be used' in lines[2]
    import cupy  # the refusal was chainer.backends.cuda's alone
    assert cupy.cuda.runtime is not None


_CUDA_CALLS = '''
import cupy.cuda.runtime

called = []
for name in ('getDeviceCount', 'getDevice', 'runtimeGetVersion', 'driverGetVersion'):
    setattr(cupy.cuda.runtime, name, lambda *args, name=name: called.append(name) or 1)
import chainer  # noqa: E402, F401
print(' '.join(called))
'''


def test_import_chainer_calls_no_cuda_function():
    # A process that has called CUDA (cudaGetDeviceCount runs cuInit) can no longer fork
    # workers that use the GPU, and Chainer's MultiprocessParallelUpdater refuses to start
    # after it: on a GPU machine, `import chainer` must leave CUDA as Chainer alone does.
    pytest.importorskip('cupy')
    done = subprocess.run([sys.executable, '-c', _CUDA_CALLS], env=checkout_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ''
