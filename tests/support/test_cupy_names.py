"""The CuPy-name walk (tests/support/cupy_names.py) resolves the aliases Chainer code uses.

Needs Chainer only, not CuPy: the walk reads source files.
"""
from tests.support import cupy_names

USES, KEYWORDS, FILES = cupy_names.collect()


def test_the_paths_named_in_issue_17_are_read():
    for path in ('chainer/functions/rnn/lstm.py', 'chainer/functions/math/clip.py',
                 'chainer/functions/connection/convolution_2d.py',
                 'chainer/functions/connection/deconvolution_2d.py', 'chainer/utils/conv.py',
                 'chainer/backends/cuda.py', 'chainer/backends/_cpu.py', 'chainer/_backend.py'):
        assert path in FILES, path
    assert 'chainer/backends/intel64.py' not in FILES


def test_cuda_cupy_in_researchutils_resolves_to_cupy():
    # grad_clip_lstm.py: `from chainer.backends import cuda`, then `cuda.cupy.empty_like(...)`.
    assert any(user.startswith('researchutils/chainer/functions/activation/grad_clip_lstm.py:')
               for user in USES['cupy.empty_like'])


def test_names_chainer_binds_in_its_cuda_module_resolve_to_what_it_binds():
    # cuda.py binds `cudnn = cupy.cudnn` and `libcudnn = cupy.cuda.cudnn`; convolution_2d.py
    # calls `cuda.cudnn.convolution_forward` through `cudnn = cuda.cudnn`.
    assert any(user.startswith('chainer/functions/connection/convolution_2d.py:')
               for user in USES['cupy.cudnn.convolution_forward'])
    assert any(user.startswith('chainer/functions/activation/sigmoid.py:')
               for user in USES['cupy.cuda.cudnn.CUDNN_ACTIVATION_SIGMOID'])


def test_kernels_memory_pool_and_streams_are_collected():
    for name in ('cupy.ElementwiseKernel', 'cupy.ReductionKernel', 'cupy.RawKernel',
                 'cupy.get_default_memory_pool', 'cupy.cuda.Stream', 'cupy.cuda.Device',
                 'cupy.asarray', 'cupy.clip', 'cupy.tensordot'):
        assert any(user.startswith('chainer/') for user in USES[name]), name


def test_xp_in_chainer_files_counts_as_cupy_and_import_time_names_are_kept():
    assert any(user.endswith('(xp)') for user in USES['cupy.empty_like'])
    assert 'chainer/backends/cuda.py:59' in USES['cupy.cuda.cublas']
    assert any(user.startswith('chainer/backends/cuda.py:')
               for user in USES['cupy.util.PerformanceWarning'])
