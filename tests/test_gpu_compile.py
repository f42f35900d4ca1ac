"""Every CUDA kernel on our GPU paths compiles with NVRTC for today's GPUs, without a GPU.

The check itself is ``tests/support/gpu_compile.py`` (``make gpu-compile-check`` prints its
full report); here the suite runs it and checks what it builds from. It needs CuPy 14 and
CUDA 13's NVRTC (the Python 3.13 stack of the Makefile); elsewhere the tests that compile
skip, naming what is missing, and the tests of the tables run against Chainer alone.
"""
import io

import chainer
import numpy
import pytest

from tests.support import cuda_kernels, gpu_compile

_MISSING = gpu_compile.available()
needs_nvrtc = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))

# The kernels of the paths issue 26 names, by (file, name).
_NAMED_PATHS = {
    'grad_clip_lstm forward': ('researchutils/chainer/functions/activation/grad_clip_lstm.py',
                               'researchutils_grad_clip_lstm_fwd'),
    'grad_clip_lstm backward': ('researchutils/chainer/functions/activation/grad_clip_lstm.py',
                                'researchutils_grad_clip_lstm_bwd'),
    'F.lstm forward': ('chainer/functions/rnn/lstm.py', 'lstm_fwd'),
    'F.lstm backward': ('chainer/functions/rnn/lstm.py', 'lstm_bwd'),
    'F.clip backward': ('chainer/functions/math/clip.py', 'clip_bwd'),
    'im2col': ('chainer/utils/conv.py', 'im2col'),
    'col2im': ('chainer/utils/conv.py', 'col2im'),
    'F.sigmoid': ('chainer/functions/activation/sigmoid.py', 'sigmoid_fwd'),
    'F.sigmoid backward': ('chainer/functions/activation/sigmoid.py', 'sigmoid_bwd'),
    'F.tanh backward': ('chainer/functions/activation/tanh.py', 'tanh_bwd'),
    'F.relu backward': ('chainer/functions/activation/relu.py', 'relu_bwd'),
    'SGD': ('chainer/optimizers/sgd.py', 'sgd'),
    'MomentumSGD': ('chainer/optimizers/momentum_sgd.py', 'momentum_sgd'),
    'Adam': ('chainer/optimizers/adam.py', 'adam'),
    'x ** c backward': ('chainer/functions/math/basic_math.py', 'pow_var_const_bwd'),
}


def _key(kernel):
    return kernel.where.rsplit(':', 1)[0], kernel.name


@pytest.fixture(scope='module')
def result(request):
    found = gpu_compile.check()
    report = io.StringIO()
    gpu_compile.report(found, report)
    # The count belongs in the run's output even when the tests pass: write it past the
    # output capture, as capsys.disabled() does.
    plugins = request.config.pluginmanager
    terminal, capture = plugins.getplugin('terminalreporter'), plugins.getplugin('capturemanager')
    if terminal is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            terminal.write_line('')
            terminal.write_line('GPU compile check ({} compilations, {} from the cache {}, '
                                '{:.0f} s): {}'.format(found.compilations, found.cached,
                                                       gpu_compile.cache_folder(),
                                                       found.seconds,
                                                       gpu_compile.summary_line(found)))
    return found, report.getvalue()


@needs_nvrtc
@pytest.mark.slow(reason='compiles about 400 CUDA sources with NVRTC when the cache is cold')
@pytest.mark.timeout(900)
def test_every_kernel_on_our_gpu_paths_compiles_for_todays_gpus(result):
    found, report = result
    assert not found.failed, report
    assert found.compiled
    assert set(gpu_compile.REQUIRED_ARCHITECTURES) <= set(found.architectures)


@needs_nvrtc
@pytest.mark.slow(reason='shares the compile of the test above')
@pytest.mark.timeout(900)
def test_the_paths_the_issue_names_are_among_the_compiled_kernels(result):
    found, _ = result
    compiled = {_key(kernel): dtypes for kernel, dtypes in found.compiled}
    for path, key in _NAMED_PATHS.items():
        assert compiled.get(key) == list(gpu_compile.FLOAT_DTYPES), (path, key)
    # The data-parallel gradient sum is CuPy's own add, listed with its user.
    added = [reason for kernel, reason in found.not_checked if kernel.function == 'cupy.add']
    assert added and 'researchutils/chainer/models/data_parallel.py:' in added[0]


@needs_nvrtc
@pytest.mark.slow(reason='shares the compile of the test above')
@pytest.mark.timeout(900)
def test_report_lists_each_kernel_with_location_and_architectures(result):
    found, report = result
    archs = ' '.join('sm_' + arch for arch in found.architectures)
    for kernel, _ in found.compiled:
        assert '{} {} ({})'.format(kernel.name, kernel.where, kernel.function) in report
    compiled_lines = [line for line in report.splitlines() if line.startswith('compiled  ')]
    assert len(compiled_lines) == len(found.compiled)
    assert all(line.endswith(' for ' + archs) for line in compiled_lines)
    assert report.splitlines()[-1] == 'compiled {} kernels for {}; 0 failed; {} not checked'.format(
        len(found.compiled), archs, len(found.not_checked))


def _planted(operation, name='planted_kernel'):
    return cuda_kernels.Kernel(
        'elementwise', 'tests/test_gpu_compile.py:1', 'planted', dict(
            in_params='T x', out_params='T y', operation=operation, name=name,
            reduce_dims=True, preamble='', no_return=False, return_tuple=False, loop_prep='',
            after_loop='', options=()), None)


@needs_nvrtc
def test_a_kernel_that_does_not_compile_fails_with_nvrtcs_log_every_time(tmp_path):
    # __shfl without _sync was removed in CUDA 9: the kind of 2019-era intrinsic the
    # check looks for. A failure is never cached, so the second run compiles it again.
    kernel = _planted('y = __shfl(x, 0)')
    for _ in range(2):
        found = gpu_compile.check([kernel], cache=str(tmp_path))
        assert found.compiled == []
        assert {arch for _, _, arch, _ in found.failed} == set(found.architectures)
        assert all('__shfl' in log for _, _, _, log in found.failed)
        assert found.cached == 0
        assert gpu_compile.summary_line(found).endswith(
            '; 1 failed; {} not checked'.format(len(found.not_checked)))


@needs_nvrtc
def test_a_compiled_kernel_is_cached_and_only_under_its_own_key(tmp_path):
    kernel = _planted('y = x * x')
    first = gpu_compile.check([kernel], cache=str(tmp_path))
    assert first.cached == 0 and len(first.compiled) == 1
    again = gpu_compile.check([kernel], cache=str(tmp_path))
    assert again.cached == again.compilations == first.compilations
    other = gpu_compile.check([_planted('y = x + x')], cache=str(tmp_path))
    assert other.cached == 0


@needs_nvrtc
def test_a_kernel_that_cannot_be_built_is_listed_and_not_counted():
    unbuildable = cuda_kernels.Kernel('elementwise', 'x.py:3', 'f', None,
                                      'argument operation = body depends on run-time value body')
    found = gpu_compile.check([unbuildable], cache=False)
    assert found.compiled == [] and found.failed == []
    assert (unbuildable, unbuildable.problem) in found.not_checked


@needs_nvrtc
def test_an_untested_cupy_version_fails_naming_it(monkeypatch):
    import cupy
    monkeypatch.setattr(cupy, '__version__', '15.0.0')
    with pytest.raises(gpu_compile.CupyInternalsMoved, match='CuPy 15.0.0'):
        gpu_compile.check([], cache=False)


@needs_nvrtc
def test_a_scalar_argument_is_declared_by_value_as_cupy_does():
    # numerical_grad passes eps as a Python float; its post-map reads it, which only a
    # by-value parameter allows.
    kernel = next(k for k in cuda_kernels.collect() if k.name == 'numerical_grad_kernel_1')
    sources, _ = gpu_compile.build_sources(kernel)
    assert all(' eps,' in source.code or ' eps)' in source.code for source in sources)
    assert all('_raw_eps' not in source.code for source in sources)


def test_cache_key_changes_with_source_options_arch_and_environment():
    base = ('src', ('-a',), '90', 'env')
    key = gpu_compile.cache_key(*base)
    assert key == gpu_compile.cache_key(*base)
    for index, other in enumerate(('src2', ('-b',), '80', 'env2')):
        changed = list(base)
        changed[index] = other
        assert gpu_compile.cache_key(*changed) != key, index


def _kernels_by_key():
    kernels = {}
    for kernel in cuda_kernels.collect():
        kernels.setdefault(_key(kernel), []).append(kernel)
    return kernels


def _parameters(kernel):
    params = kernel.arguments['in_params'] + ',' + kernel.arguments['out_params']
    return [p.split() for p in params.split(',') if p.strip()]


@pytest.mark.parametrize('table', ['SCALAR_ARGUMENTS', 'PLACEHOLDER_DTYPES',
                                   'FLOAT_DTYPES_ACCEPTED'])
def test_every_table_entry_names_a_collected_kernel_and_its_parameters(table):
    # A renamed kernel or parameter in Chainer must not leave a silent stale entry.
    kernels = _kernels_by_key()
    for key, value in getattr(gpu_compile, table).items():
        assert key in kernels, (table, key)
        for kernel in kernels[key]:
            params = _parameters(kernel)
            if table == 'SCALAR_ARGUMENTS':
                assert set(value) <= {p[-1] for p in params}, (key, value)
            elif table == 'PLACEHOLDER_DTYPES':
                assert set(value) <= {p[-2] for p in params if len(p[-2]) == 1}, (key, value)


def test_resize_images_accepts_float32_only_as_the_table_says():
    key = ('chainer/functions/array/resize_images.py', 'resize_images_interpolate_bilinear')
    assert gpu_compile.FLOAT_DTYPES_ACCEPTED[key] == ('float32',)
    for dtype in gpu_compile.FLOAT_DTYPES:
        x = numpy.zeros((1, 1, 2, 2), dtype)
        if dtype == 'float32':
            chainer.functions.resize_images(x, (3, 3))
        else:
            with pytest.raises(chainer.utils.type_check.InvalidType):
                chainer.functions.resize_images(x, (3, 3))
