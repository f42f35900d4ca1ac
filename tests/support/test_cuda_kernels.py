"""The kernel walk (tests/support/cuda_kernels.py) finds and evaluates kernel definitions.

Needs Chainer only, not CuPy: the walk reads source files.
"""
import textwrap

import pytest

from tests.support import cuda_kernels

KERNELS = cuda_kernels.collect()


def _by_name(name):
    return [k for k in KERNELS if k.name == name]


def test_our_kernels_are_found_with_their_module_constants_inlined():
    forward, = _by_name('researchutils_grad_clip_lstm_fwd')
    assert forward.where.startswith('researchutils/chainer/functions/activation/'
                                    'grad_clip_lstm.py:')
    assert forward.function == '_cupy_forward'
    # preamble=_PREAMBLE, a module constant, is evaluated to its text.
    assert 'sigmoid_of' in forward.arguments['preamble']
    assert forward.problem is None


def test_the_chainer_files_of_the_named_paths_are_read():
    files = cuda_kernels.chainer_files()
    for path in ('chainer/functions/rnn/lstm.py', 'chainer/functions/math/clip.py',
                 'chainer/utils/conv.py', 'chainer/optimizers/sgd.py',
                 'chainer/optimizers/momentum_sgd.py', 'chainer/optimizers/adam.py',
                 'chainer/functions/activation/sigmoid.py',
                 'chainer/functions/math/basic_math.py'):
        assert path in files, path


def test_a_wrapper_passing_its_parameters_on_is_not_a_kernel():
    # chainer.backends.cuda.elementwise builds cupy.ElementwiseKernel from its own
    # parameters: its callers define the kernels.
    assert not [k for k in KERNELS if k.where.startswith('chainer/backends/cuda.py:')]


def test_a_fused_function_is_listed_once_as_not_buildable():
    fused = [k for k in KERNELS if k.kind == 'fuse']
    assert [k.function for k in fused] == ['lstm_grad_grad']
    assert 'cupy.fuse' in fused[0].problem


def _walk(tmp_path, source):
    path = tmp_path / 'planted_kernels.py'
    path.write_text(textwrap.dedent(source))
    return cuda_kernels.kernels_in_file(str(path), 'planted_kernels_not_importable',
                                        'planted_kernels.py')


def test_arguments_are_bound_by_name_and_evaluated(tmp_path):
    kernel, = _walk(tmp_path, '''
        from chainer.backends import cuda as c
        def f():
            return c.elementwise('T x', 'T y', 'y = ' + 'x' + " * %d" % 2,
                                 name='{}_kernel'.format('twice'), preamble=f"// {'p'}")
    ''')
    assert kernel.kind == 'elementwise' and kernel.function == 'f'
    assert kernel.where == 'planted_kernels.py:4'
    assert kernel.arguments['operation'] == 'y = x * 2'
    assert kernel.name == 'twice_kernel'
    assert kernel.arguments['preamble'] == '// p'
    assert kernel.arguments['loop_prep'] == ''


def test_an_argument_known_only_at_run_time_is_named_as_the_reason(tmp_path):
    kernel, = _walk(tmp_path, '''
        import cupy
        def f(body):
            return cupy.ReductionKernel('T x', 'T y', body, 'a + b', 'y = a', '0', 'r')
    ''')
    assert kernel.kind == 'reduction' and kernel.arguments is None
    assert kernel.problem.startswith('argument map_expr = body depends on run-time value body')
    assert kernel.name == '<planted_kernels.py:4>'


def test_a_module_constant_of_a_module_that_does_not_import_names_the_error(tmp_path):
    kernel, = _walk(tmp_path, '''
        import cupy
        BODY = 'y = x'
        cupy.ElementwiseKernel('T x', 'T y', BODY, 'k')
    ''')
    assert kernel.arguments is None
    assert 'BODY (the module did not import: ModuleNotFoundError' in kernel.problem


def test_operator_kernels_point_at_the_line_that_launches_them(monkeypatch):
    users = cuda_kernels.operator_kernel_users()
    assert users['cupy.add'][0].startswith('researchutils/chainer/models/data_parallel.py:')
    monkeypatch.setitem(cuda_kernels.OPERATOR_KERNELS, 'cupy.add', (
        'researchutils/chainer/models/data_parallel.py', 'no such line', 'x'))
    with pytest.raises(LookupError, match='stale'):
        cuda_kernels.operator_kernel_users()
