"""What _researchutils_chainer_compat supplies to Chainer, against the NumPy 1.x and
setuptools semantics Chainer 7.8.1 was written for (independent references in plain NumPy,
and pip's own copy of ``packaging`` for versions). These run in this process, whose
interpreter start installed the finder, on every stack the suite runs on.
"""
import inspect
import warnings

import chainer
import chainer.functions as F
import numpy as np
import pytest
from chainer import gradient_check

from _researchutils_chainer_compat import _patches, _stand_ins

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


@pytest.mark.parametrize('dtype,padding,expected', [
    (np.uint8, -1, 255), (np.uint8, 300, 44), (np.int8, 200, -56),
    (np.uint32, -2, 2 ** 32 - 2), (np.int32, -7, -7), (np.float32, -1, -1.0)])
def test_pad_sequence_stores_an_out_of_range_padding_wrapped_as_numpy_1_did(
        dtype, padding, expected):
    xs = [np.array([1, 2, 3], dtype), np.array([4], dtype)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)     # NumPy 1.26 warns, then wraps
        y = F.pad_sequence(xs, padding=padding).array
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, np.array([[1, 2, 3], [4, expected, expected]], dtype))


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
    ('chainer.distributions.categorical', 'Categorical.log_prob')])
def test_functions_given_a_numpy_namespace_never_compare_numpy_by_identity(
        module_name, qualname):
    import importlib
    target = importlib.import_module(module_name)
    for part in qualname.split('.'):
        target = getattr(target, part)
    source = inspect.getsource(target)
    assert 'is numpy' not in source and 'is np' not in source and 'numpy is' not in source


# --- pkg_resources stand-in, against pip's own copy of packaging -------------------------

packaging_version = pytest.importorskip('pip._vendor.packaging.version')
packaging_specifiers = pytest.importorskip('pip._vendor.packaging.specifiers')

VERSIONS = ['1.0', '1.0.0', '1.0.post1', '1.0rc1', '1.0a2', '1.0b1', '1.0.dev3', '1.0rc1.dev1',
            '0.9', '1.1', '2.0.0.post3', '2.0.0', '2.1', '7.7.0', '8.0.0rc1', '8.0.0', '1!0.5',
            '1.26.4', '2.5.2', '14.0.0', '1.0+local.1', '1.0-1', '1.0.0.0']
SPECIFIERS = ['>=1.0', '<8.0.0', '>=7.7.0,<8.0.0', '==1.0', '!=1.0', '==1.*', '~=1.0',
              '~=2.0.0', '>1.0', '<=2.0.0', '>=2.0.0.post3, <2.1', '===1.0', '<1.0rc2']


def test_versions_sort_as_packaging_sorts_them():
    ours = sorted(VERSIONS, key=lambda v: _stand_ins._Version(v).sort_key)
    theirs = sorted(VERSIONS, key=packaging_version.Version)
    assert [packaging_version.Version(v) for v in ours] == \
        [packaging_version.Version(v) for v in theirs]


@pytest.mark.parametrize('specifier', SPECIFIERS)
def test_requirement_specifiers_admit_what_packaging_admits(specifier):
    reference = packaging_specifiers.SpecifierSet(specifier.replace(' ', ''))
    requirement = _stand_ins._Requirement('pkg' + specifier)
    for version in VERSIONS:
        assert (version in requirement) == reference.contains(version, prereleases=True), \
            (specifier, version)


def test_pkg_resources_stand_in_requires_what_is_installed():
    resources = _stand_ins.pkg_resources()
    numpy_dist, = resources.require('numpy>=1.26')
    assert numpy_dist.version == np.__version__
    assert resources.get_distribution('NumPy').version == np.__version__
    with pytest.raises(resources.VersionConflict):
        resources.WorkingSet().require('numpy<1.0')
    with pytest.raises(resources.DistributionNotFound):
        resources.require('no-such-distribution-here>=1')
    assert issubclass(resources.DistributionNotFound, resources.ResolutionError)


def test_chainer_testing_with_requires_skips_by_version():
    from chainer import testing
    assert testing.with_requires('numpy>=1.0')(lambda: 'ran')() == 'ran'
    import unittest
    with pytest.raises(unittest.SkipTest):
        testing.with_requires('numpy<1.0')(lambda: None)()


def test_what_is_supplied_matches_what_the_stack_lacks():
    from chainer import variable
    from chainer.functions.array import pad_sequence
    from chainer.functions.math import fix as fix_module
    major, minor = (int(p) for p in np.__version__.split('.')[:2])
    assert (fix_module.fix.__code__.co_filename == _patches.__file__) == \
        ((major, minor) >= (2, 5))                        # numpy.fix deprecated in 2.5
    assert (pad_sequence.PadSequence.forward.__code__.co_filename == _patches.__file__) == \
        ((major, minor) >= (1, 24))                 # out-of-bound ints warned 1.24, refused 2.0
    assert (variable.Variable.debug_print.__code__.co_filename == _patches.__file__) == \
        NUMPY_2                                           # ndarray.device from 2.0
    from chainer.distributions import categorical
    assert (categorical.Categorical.log_prob.__globals__['numpy'] is not np) == \
        NUMPY_2                                           # meshgrid gives a tuple from 2.0
