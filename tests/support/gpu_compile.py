"""Compile every CUDA kernel on our GPU paths with NVRTC, for today's GPUs, without a GPU.

For each kernel definition that ``tests/support/cuda_kernels`` reads from the source, this
builds the CUDA source CuPy itself would build when the kernel is called, for each floating
type the path runs in (float16, float32, float64), and compiles it with NVRTC for each
architecture in :func:`architectures` (sm_80, sm_90, sm_120 and the newest this NVRTC
knows), as a cubin, with the options CuPy passes. ``make gpu-compile-check`` (or ``python
-m tests.support.gpu_compile``) prints every kernel with its source location and the
architectures it compiled for, then ``compiled N kernels for sm_80 ...; F failed; M not
checked``; ``tests/test_gpu_compile.py`` runs it in the suite.

What CuPy itself does, and what of it is used here (CuPy 14.2, :data:`TESTED_CUPY`):

* ``ElementwiseKernel.__call__`` parses the parameters, decides the type map from the
  arguments' dtypes (``_decide_params_type``), describes each argument (``_ArgInfo``: array
  or scalar, dtype, ndim, contiguity, 32-bit indexing) and calls
  ``_get_elementwise_kernel_code``. Here the kernel object is CuPy's own, built from the
  evaluated definition, and the arguments are described as Chainer's call sites pass them:
  the parameters listed in :data:`SCALAR_ARGUMENTS` as scalars (declared by value), the
  others as CuPy describes contiguous arrays after its dimension reduction (1-d, 32-bit
  indexed); only an argument's declaration changes with the shape of a real call, never the
  kernel's body.
* ``ReductionKernel`` does the same through ``_ReductionKernel_get_cached_function_code``,
  with the ``IndexT`` type CuPy adds and its default block size, for a full reduction of a
  1-d input (what Chainer's reductions on our paths do).
* ``compile_with_cache`` prepends CuPy's headers (``_cupy_header_list``), assembles the
  options (``assemble_cupy_compiler_options``: ``--std=c++17``, the bundled CCCL and CuPy
  include folders, the CUDA headers), adds ``-ftz=true``, ``-arch=sm_XX`` and
  ``--device-as-default-execution-space``, and compiles with ``_NVRTCProgram``; the same
  calls are made here, with the architecture given instead of read from a device.

Not generated (listed as not checked, with the reason, never counted): a kernel whose
definition depends on a run-time value, ``cupy.fuse`` kernels (traced from device arrays),
raw modules, a placeholder type whose dtype on our paths is not in
:data:`PLACEHOLDER_DTYPES`, and CuPy's own ufuncs and routines (their source is built in
CuPy's compiled code, out of Python's reach; CuPy's own test suite compiles them).

A result that compiled is kept in a cache folder (:func:`cache_folder`) under a key made of
the source, the options, the architecture, the NVRTC version, the CuPy version and a digest
of every include folder, so a second run compiles only what changed. A failure is never
kept: it is compiled, and reported with NVRTC's log, every time.

Tests: ``tests/test_gpu_compile.py``.
"""
import collections
import concurrent.futures
import hashlib
import json
import os
import sys
import tempfile
import time

import numpy

from tests.support import cuda_kernels, cupy_names

#: CuPy versions (major.minor) whose internals this module was written against and checked.
TESTED_CUPY = ('14.2',)

#: The architectures the issue asks for; :func:`architectures` adds the newest NVRTC knows.
REQUIRED_ARCHITECTURES = ('80', '90', '120')

FLOAT_DTYPES = ('float16', 'float32', 'float64')


def _accumulation_dtype(float_dtype):
    """float32 for float16, else the dtype itself (Chainer's _reduction_dtype and
    _get_intermediate_dtype)."""
    return 'float32' if float_dtype == 'float16' else float_dtype


#: The dtype of each placeholder type other than ``T`` (the path's floating type), per
#: kernel (file, name), as Chainer's call site gives it: a dtype name, 'float' for the
#: floating type under test, or a function of it.
PLACEHOLDER_DTYPES = {
    # An array of the input arrays' data pointers (numpy.uintp).
    ('chainer/functions/array/pad_sequence.py', 'pad_sequence_fwd'): {'P': 'uint64'},
    # Sampling coordinates from modf of float (float64) arrays.
    ('chainer/functions/array/resize_images.py', 'resize_images_interpolate_bilinear'):
        {'S': 'float64'},
    ('chainer/functions/array/resize_images.py',
     'resize_images_interpolate_grad_bilinear'): {'S': 'float64'},
    # Labels are int32; the coefficient is in the reduction dtype of x.
    ('chainer/functions/loss/softmax_cross_entropy.py', 'crossent_fwd'):
        {'S': 'int32', 'U': _accumulation_dtype},
    ('chainer/functions/loss/softmax_cross_entropy.py', 'softmax_crossent_no_reduce_fwd'):
        {'S': 'int32'},
    ('chainer/functions/loss/softmax_cross_entropy.py', 'softmax_crossent_bwd'):
        {'S': 'int32', 'U': _accumulation_dtype},
    ('chainer/functions/loss/softmax_cross_entropy.py', 'softmax_crossent_weight_bwd'):
        {'S': 'int32', 'U': _accumulation_dtype},
    # The random array is cupy.random.rand(..., dtype=float32).
    ('chainer/functions/noise/dropout.py', 'dropout_fwd'): {'R': 'float32'},
    # numerical_grad casts the output gradients and accumulates the gradients in float64.
    ('chainer/gradient_check.py', 'numerical_grad_kernel_1'): {'U': 'float64', 'V': 'float64'},
    ('chainer/gradient_check.py', 'numerical_grad_kernel_3'): {'U': 'float64', 'V': 'float64'},
    # P is the parameter's dtype; T the intermediate dtype (float32 for float16).
    ('chainer/optimizers/adam.py', 'amsbound'): {'P': 'float', 'T': _accumulation_dtype},
    ('chainer/optimizers/adam.py', 'adabound'): {'P': 'float', 'T': _accumulation_dtype},
    ('chainer/optimizers/adam.py', 'adam'): {'P': 'float', 'T': _accumulation_dtype},
    # gamma, beta and the running statistics have x's dtype (L.BatchNormalization's
    # default), so the promoted type X and U are x's dtype too.
    ('chainer/functions/normalization/batch_normalization.py', 'update_mean_var'):
        {'U': 'float'},
    ('chainer/functions/normalization/batch_normalization.py', 'bn_bwd'):
        {'U': 'float', 'X': 'float'},
    ('chainer/functions/normalization/batch_normalization.py', 'bn_fwd'): {'U': 'float'},
}


#: The floating types Chainer's type checks accept, for the kernels whose functions accept
#: fewer than all three (``tests/test_gpu_compile.py`` checks each against Chainer).
FLOAT_DTYPES_ACCEPTED = {
    # ResizeImages and ResizeImagesGrad.check_type_forward: float32 only.
    ('chainer/functions/array/resize_images.py', 'resize_images_interpolate_bilinear'):
        ('float32',),
    ('chainer/functions/array/resize_images.py', 'resize_images_interpolate_grad_bilinear'):
        ('float32',),
}

_IM2COL_SCALARS = ('h', 'w', 'out_h', 'out_w', 'kh', 'kw', 'sy', 'sx', 'ph', 'pw', 'dy', 'dx')
_ADAM_SCALARS = ('alpha_t', 'one_minus_beta1', 'one_minus_beta2', 'eps', 'eta',
                 'weight_decay_rate')

#: The input parameters each kernel's call site passes as a Python or NumPy scalar, read
#: from the call sites (CuPy declares a scalar argument by value, an array as a CArray read
#: at the element's index); every other argument is a contiguous array.
SCALAR_ARGUMENTS = {
    ('researchutils/chainer/functions/activation/grad_clip_lstm.py',
     'researchutils_grad_clip_lstm_bwd'): ('low', 'high'),
    ('chainer/functions/array/pad_sequence.py', 'pad_sequence_fwd'):
        ('pad', 'base', 'max_length'),
    ('chainer/functions/array/resize_images.py', 'resize_images_interpolate_bilinear'):
        ('H', 'W', 'outsize'),
    ('chainer/functions/array/resize_images.py', 'resize_images_interpolate_grad_bilinear'):
        ('H', 'W', 'outsize'),
    ('chainer/functions/loss/softmax_cross_entropy.py', 'crossent_fwd'):
        ('n_channel', 'ignore_label'),
    ('chainer/functions/loss/softmax_cross_entropy.py', 'softmax_crossent_no_reduce_fwd'):
        ('n_channel', 'ignore'),
    ('chainer/functions/loss/softmax_cross_entropy.py', 'softmax_crossent_bwd'):
        ('n_channel', 'n_unit', 'ignore_label'),
    ('chainer/functions/loss/softmax_cross_entropy.py', 'softmax_crossent_weight_bwd'):
        ('n_channel', 'n_unit', 'ignore_label'),
    ('chainer/functions/noise/dropout.py', 'dropout_fwd'): ('scale', 'ratio'),
    ('chainer/gradient_check.py', 'numerical_grad_kernel_1'): ('eps',),
    ('chainer/gradient_check.py', 'numerical_grad_kernel_3'): ('eps',),
    ('chainer/optimizers/adam.py', 'amsbound'): _ADAM_SCALARS + ('lower', 'upper'),
    ('chainer/optimizers/adam.py', 'adabound'): _ADAM_SCALARS + ('lower', 'upper'),
    ('chainer/optimizers/adam.py', 'adam'): _ADAM_SCALARS,
    ('chainer/optimizers/momentum_sgd.py', 'momentum_sgd'): ('lr', 'momentum'),
    ('chainer/optimizers/sgd.py', 'sgd'): ('lr',),
    ('chainer/utils/conv.py', 'im2col'): _IM2COL_SCALARS,
    ('chainer/utils/conv.py', 'col2im'): _IM2COL_SCALARS,
    ('chainer/functions/normalization/batch_normalization.py', 'update_mean_var'):
        ('decay', 'adjust'),
    ('chainer/functions/normalization/batch_normalization.py', 'bn_bwd'): ('inv_m',),
    ('chainer/functions/math/basic_math.py', 'div_from_const_bwd'): ('value',),
    ('chainer/functions/math/basic_math.py', 'pow_var_const_bwd'): ('value',),
    ('chainer/functions/math/basic_math.py', 'pow_const_var_bwd'): ('value',),
}


def _table_key(kernel):
    return kernel.where.rsplit(':', 1)[0], kernel.name


class CupyInternalsMoved(RuntimeError):
    """The installed CuPy is not one whose internals this check was written against."""


def _cupy_internals():
    """CuPy's code generation and compile pieces, checked against :data:`TESTED_CUPY`."""
    import cupy
    from cupy._core import _carray, _kernel, _reduction, _scalar, core
    from cupy.cuda import compiler
    from cupy_backends.cuda.libs import nvrtc
    version = '.'.join(cupy.__version__.split('.')[:2])
    if version not in TESTED_CUPY:
        raise CupyInternalsMoved(
            'CuPy {}: the GPU compile check builds kernel sources with CuPy {} internals; '
            'check tests/support/gpu_compile.py against this CuPy and add it to '
            'TESTED_CUPY'.format(cupy.__version__, ' / '.join(TESTED_CUPY)))
    needed = {
        _kernel: ('_ArgInfo', '_TypeMap', '_get_elementwise_kernel_code', '_decide_params_type',
                  'ElementwiseKernel'),
        _reduction: ('_ReductionKernel_get_cached_function_code', '_get_block_specs',
                     'ReductionKernel'),
        core: ('_cupy_header_list', 'assemble_cupy_compiler_options', 'CUPY_CACHE_KEY'),
        compiler: ('_NVRTCProgram', 'CompileException', '_get_max_compute_capability'),
        _carray: ('Indexer',),
        _scalar: ('CScalar',),
    }
    missing = ['{}.{}'.format(module.__name__, name) for module, names in needed.items()
               for name in names if not hasattr(module, name)]
    if missing:
        raise CupyInternalsMoved('CuPy {} lacks {}, which the GPU compile check uses'.format(
            cupy.__version__, ', '.join(missing)))
    return cupy, _carray, _kernel, _reduction, _scalar, core, compiler, nvrtc


def available():
    """None when CuPy and NVRTC are here to compile with, else the reason they are not."""
    try:
        import cupy  # noqa: F401
    except Exception as error:
        return 'CuPy does not import ({}: {}): install cupy-cuda13x'.format(
            type(error).__name__, error)
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
    except Exception as error:
        return 'NVRTC is not loadable ({}: {}): pip install nvidia-cuda-nvrtc'.format(
            type(error).__name__, error)
    return None


def architectures():
    """sm_80, sm_90, sm_120 and the newest architecture this NVRTC compiles for."""
    from cupy_backends.cuda.libs import nvrtc
    supported = [str(arch) for arch in nvrtc.getSupportedArchs()]
    missing = [arch for arch in REQUIRED_ARCHITECTURES if arch not in supported]
    if missing:
        raise RuntimeError('NVRTC {} cannot compile for sm_{}'.format(
            '.'.join(map(str, nvrtc.getVersion())), ', sm_'.join(missing)))
    newest = max(supported, key=int)
    return REQUIRED_ARCHITECTURES + ((newest,) if newest not in REQUIRED_ARCHITECTURES else ())


Source = collections.namedtuple('Source', 'kernel dtype name code')
Source.__doc__ = """One CUDA source to compile: the kernel, the floating type it was built
for (None when it has no floating placeholder), the CUDA function's name and the source."""


def _placeholder_dtypes(kernel, placeholders):
    """[(label, {placeholder: dtype})] for the floating types to build, or raise ValueError."""
    if not placeholders:
        return [(None, {})]
    rules = dict(PLACEHOLDER_DTYPES.get(_table_key(kernel), {}))
    rules.setdefault('T', 'float')
    unknown = sorted(set(placeholders) - set(rules))
    if unknown:
        raise ValueError('the dtype of placeholder type {} on our paths is not in '
                         'PLACEHOLDER_DTYPES'.format(', '.join(unknown)))
    builds = []
    for float_dtype in FLOAT_DTYPES_ACCEPTED.get(_table_key(kernel), FLOAT_DTYPES):
        chosen = {}
        for placeholder in placeholders:
            rule = rules[placeholder]
            chosen[placeholder] = (float_dtype if rule == 'float' else
                                   rule(float_dtype) if callable(rule) else rule)
        builds.append((float_dtype, chosen))
    return builds


def _params_dtypes(params, chosen):
    return tuple(numpy.dtype(chosen[p.ctype] if p.dtype is None else p.dtype) for p in params)


def _array(internals, dtype, ndim):
    cupy, _, _kernel, _, _, _, _, _ = internals
    # What CuPy records for a contiguous array after it reduced the dimensions.
    return _kernel._ArgInfo(1, cupy.ndarray, dtype, ndim, True, True)


def _scalar_argument(internals, dtype):
    _, _, _kernel, _, _scalar, _, _, _ = internals
    return _kernel._ArgInfo(3, _scalar.CScalar, dtype, 0, True, True)


def _input_arginfos(internals, kernel, params, dtypes, ndim):
    """Scalars where the call site passes one (:data:`SCALAR_ARGUMENTS`), else arrays."""
    scalars = SCALAR_ARGUMENTS.get(_table_key(kernel), ())
    return tuple(_scalar_argument(internals, d) if p.name in scalars and not p.raw
                 else _array(internals, d, ndim) for p, d in zip(params, dtypes))


def _indexer(internals, ndim):
    _, _carray, _kernel, _, _, _, _, _ = internals
    return _kernel._ArgInfo(2, _carray.Indexer, None, ndim, True, True)


def _elementwise_sources(internals, kernel):
    cupy, _, _kernel, _, _, _, _, _ = internals
    args = kernel.arguments
    options = {key: args[key] for key in ('loop_prep', 'after_loop', 'options') if args[key]}
    made = cupy.ElementwiseKernel(
        args['in_params'], args['out_params'], args['operation'], args['name'],
        reduce_dims=args['reduce_dims'], preamble=args['preamble'],
        no_return=args['no_return'], return_tuple=args['return_tuple'], **options)
    placeholders = sorted({p.ctype for p in made.in_params + made.out_params if p.dtype is None})
    sources = []
    for label, chosen in _placeholder_dtypes(kernel, placeholders):
        in_dtypes = _params_dtypes(made.in_params, chosen)
        out_dtypes = _params_dtypes(made.out_params, chosen)
        _, _, type_map = made._decide_params_type(in_dtypes, out_dtypes)
        arginfos = _input_arginfos(internals, kernel, made.in_params, in_dtypes, 1)
        arginfos += tuple(_array(internals, d, 1) for d in out_dtypes)
        arginfos += (_indexer(internals, 1),)
        code = _kernel._get_elementwise_kernel_code(
            arginfos, type_map, made.params, made.operation, made.name, made.preamble,
            **made.kwargs)
        sources.append(Source(kernel, label, made.name, code))
    return sources, tuple(args['options'] or ())


def _reduction_sources(internals, kernel):
    cupy, _, _kernel, _reduction, _, _, _, _ = internals
    args = kernel.arguments
    made = cupy.ReductionKernel(
        args['in_params'], args['out_params'], args['map_expr'], args['reduce_expr'],
        args['post_map_expr'], args['identity'], args['name'],
        reduce_type=args['reduce_type'], reduce_dims=args['reduce_dims'],
        preamble=args['preamble'], options=tuple(args['options'] or ()))
    placeholders = sorted({p.ctype for p in made.in_params + made.out_params if p.dtype is None})
    block_size = _reduction._get_block_specs(1024, 1, 1, -1)[0]
    sources = []
    for label, chosen in _placeholder_dtypes(kernel, placeholders):
        in_dtypes = _params_dtypes(made.in_params, chosen)
        out_dtypes = _params_dtypes(made.out_params, chosen)
        _, _, type_map = _kernel._decide_params_type(
            made.in_params, made.out_params, tuple(d.type for d in in_dtypes),
            tuple(d.type for d in out_dtypes))
        # As ReductionKernel._call: the index type joins the type map (int32 below 2**31).
        type_map = _kernel._TypeMap(type_map._pairs + (('IndexT', 'int32'),))
        # A full reduction: 1-d inputs, 0-d output, then the two indexers and the block
        # stride, an int32 scalar.
        arginfos = _input_arginfos(internals, kernel, made.in_params, in_dtypes, 1)
        arginfos += tuple(_array(internals, d, 0) for d in out_dtypes)
        arginfos += (_indexer(internals, 1), _indexer(internals, 0),
                     _scalar_argument(internals, numpy.dtype('int32')))
        code = _reduction._ReductionKernel_get_cached_function_code(
            made.nin, made.nout, made._params, arginfos, type_map, made.name, block_size,
            made.reduce_type, made.identity, made.map_expr, made.reduce_expr,
            made.post_map_expr, made.preamble, made.options)
        sources.append(Source(kernel, label, made.name, code))
    return sources, tuple(made.options or ())


def _raw_sources(internals, kernel):
    args = kernel.arguments
    return [Source(kernel, None, args['name'], args['code'])], tuple(args['options'] or ())


_BUILDERS = {'elementwise': _elementwise_sources, 'reduction': _reduction_sources,
             'raw': _raw_sources}


def build_sources(kernel, internals=None):
    """(sources, kernel options) for one kernel definition; raises ValueError if not buildable."""
    internals = internals or _cupy_internals()
    if kernel.problem is not None:
        raise ValueError(kernel.problem)
    return _BUILDERS[kernel.kind](internals, kernel)


def compile_options(internals, kernel_options, arch):
    """The NVRTC options CuPy's compile_with_cache passes, for one architecture."""
    _, _, _, _, _, core, compiler, _ = internals
    options = core.assemble_cupy_compiler_options(tuple(kernel_options)) + ('-ftz=true',)
    # CuPy compiles a cubin for every architecture up to the newest NVRTC knows.
    assert int(arch) <= int(compiler._get_max_compute_capability()), arch
    return options + ('-arch=sm_' + arch, '--device-as-default-execution-space')


def full_source(internals, code):
    """The source as NVRTC gets it: CuPy's headers, then the kernel's code."""
    _, _, _, _, _, core, _, _ = internals
    return ''.join('#include <%s>\n' % header for header in core._cupy_header_list) + code


def cache_folder():
    """$RESEARCHUTILS_GPU_COMPILE_CACHE, else researchutils/gpu-compile-check under
    $XDG_CACHE_HOME (default ~/.cache)."""
    folder = os.environ.get('RESEARCHUTILS_GPU_COMPILE_CACHE')
    if folder:
        return folder
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'researchutils', 'gpu-compile-check')


def _include_digest(options):
    """A digest of every file in every include folder the options name (path, size, mtime)."""
    digest = hashlib.sha256()
    for option in options:
        if not option.startswith('-I'):
            continue
        folder = option[2:]
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames.sort()
            for filename in sorted(filenames):
                stat = os.stat(os.path.join(dirpath, filename))
                digest.update('{}\0{}\0{}\n'.format(
                    os.path.relpath(os.path.join(dirpath, filename), folder), stat.st_size,
                    stat.st_mtime_ns).encode())
    return digest.hexdigest()


def _environment_key(internals, options):
    cupy, _, _, _, _, core, _, nvrtc = internals
    return json.dumps({'nvrtc': list(nvrtc.getVersion()), 'cupy': cupy.__version__,
                       'cupy_cache_key': core.CUPY_CACHE_KEY,
                       'includes': _include_digest(options)}, sort_keys=True)


def cache_key(source, options, arch, environment):
    """The cache key of one compilation: everything that decides its result."""
    text = json.dumps([source, list(options), arch, environment])
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


class _Cache:
    """Successful compilations, one small file each, written atomically."""

    def __init__(self, folder):
        self.folder = folder

    def _path(self, key):
        return os.path.join(self.folder, key[:2], key + '.ok')

    def hit(self, key):
        return self.folder is not None and os.path.isfile(self._path(key))

    def add(self, key, record):
        if self.folder is None:
            return
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix='.tmp')
        try:
            with os.fdopen(fd, 'w') as f:
                json.dump(record, f)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise


def _nvrtc_compile(compiler, source, options):
    program = compiler._NVRTCProgram(source, 'kern.cu', (), (), method='cubin')
    try:
        cubin, _ = program.compile(options)
    except compiler.CompileException as error:
        return False, error.get_message()
    return True, len(cubin)


def _compile_one(job):
    """Compile one (source, options) for one architecture; returns (ok, cubin size or log).

    First with ``--pch`` (NVRTC's automatic precompiled header of CuPy's headers, the
    option CuPy itself adds under ``CUPY_NVRTC_USE_PCH=1``): the headers are then parsed
    once per architecture instead of once per source, about 40% less time. A failure is
    compiled again with exactly CuPy's default options, and that is the verdict and the log.
    """
    source, options, arch = job
    internals = _cupy_internals()
    compiler, nvrtc = internals[6], internals[7]
    if tuple(nvrtc.getVersion()) >= (12, 8):
        ok, outcome = _nvrtc_compile(compiler, source, options + ('--pch',))
        if ok:
            return ok, outcome
    return _nvrtc_compile(compiler, source, options)


Result = collections.namedtuple('Result', 'compiled failed not_checked architectures seconds '
                                          'compilations cached')
Result.__doc__ = """What :func:`check` found.

``compiled``: [(kernel, [dtype labels])] for the kernels whose every source compiled for every
architecture; ``failed``: [(kernel, dtype label, arch, NVRTC log)]; ``not_checked``:
[(kernel, reason)]; ``architectures``: the architectures compiled for; ``seconds``: wall time;
``compilations``: distinct (source, options, architecture) jobs; ``cached``: how many of
those the cache answered.
"""


def cupy_own_kernels(internals=None):
    """Not-checked entries for CuPy's own ufuncs that our paths call, with their users.

    The ufuncs named in the source (``tests/support/cupy_names``) and those reached through
    an array operator (:data:`cuda_kernels.OPERATOR_KERNELS`).
    """
    cupy = (internals or _cupy_internals())[0]
    uses = {name: list(users) for name, users in cupy_names.collect().uses.items()}
    for name, users in cuda_kernels.operator_kernel_users().items():
        uses.setdefault(name, []).extend(users)
    entries = []
    for name, users in sorted(uses.items()):
        obj = cupy
        try:
            for attr in name.split('.')[1:]:
                obj = getattr(obj, attr)
        except (AttributeError, ImportError):   # not CuPy 14's, or its CUDA library absent
            continue
        if not isinstance(obj, cupy.ufunc):
            continue
        kernel = cuda_kernels.Kernel('cupy ufunc', users[0].split(' ')[0], name,
                                     {'name': name}, None)
        entries.append((kernel, "CuPy's own ufunc, whose source CuPy builds in compiled code "
                                'out of Python\'s reach (CuPy\'s test suite compiles it); used '
                                'by ' + '; '.join(users)))
    return entries


def check(kernels=None, jobs=None, cache=True, log=None):
    """Build and compile every kernel; never raises for a kernel that does not compile.

    Args:
        kernels (list or None): :class:`cuda_kernels.Kernel` definitions; default: all of
            ``cuda_kernels.collect()``.
        jobs (int or None): compilations run at once; default: the CPUs this process may use.
        cache (bool or str): False for no cache, True for :func:`cache_folder`, or a folder.
        log (file or None): where to print progress lines.

    Returns:
        Result: what compiled, what failed (with NVRTC's log) and what was not checked.
    """
    started = time.monotonic()
    internals = _cupy_internals()
    archs = architectures()
    if kernels is None:
        kernels = cuda_kernels.collect()
    store = _Cache(cache_folder() if cache is True else (cache or None))
    not_checked = cupy_own_kernels(internals)
    built = []       # (kernel, [(source, options)])
    environments = {}
    for kernel in kernels:
        try:
            sources, kernel_options = build_sources(kernel, internals)
        except ValueError as error:
            not_checked.append((kernel, str(error)))
            continue
        built.append((kernel, [(s, kernel_options) for s in sources]))
    # Identical sources (the same kernel defined twice) compile once.
    work = {}        # key -> job
    job_keys = {}    # (id(source), arch) -> key
    for _, sources in built:
        for source, kernel_options in sources:
            text = full_source(internals, source.code)
            for arch in archs:
                options = compile_options(internals, kernel_options, arch)
                environment = environments.get(options[:-2])
                if environment is None:
                    environment = environments[options[:-2]] = _environment_key(
                        internals, options)
                key = cache_key(text, options, arch, environment)
                job_keys[(id(source), arch)] = key
                work.setdefault(key, (text, options, arch))
    outcomes = {key: (True, None) for key in work if store.hit(key)}
    todo = [key for key in work if key not in outcomes]
    # Architecture-major order: NVRTC's precompiled header is reused along one architecture.
    todo.sort(key=lambda key: (int(work[key][2]), work[key][0][:200]))
    if not jobs:
        jobs = (len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
                else os.cpu_count() or 1)
    if log is not None:
        print('{} sources x {} architectures: {} compilations, {} from the cache ({})'.format(
            sum(len(s) for _, s in built), len(archs), len(work), len(outcomes),
            store.folder or 'no cache'), file=log, flush=True)
    # Threads suffice: CuPy's nvrtc.compileProgram releases the GIL while NVRTC compiles.
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for key, outcome in zip(todo, pool.map(_compile_one, [work[k] for k in todo])):
            outcomes[key] = outcome
            if outcome[0]:
                store.add(key, {'arch': work[key][2], 'cubin_bytes': outcome[1]})
    compiled, failed = [], []
    for kernel, sources in built:
        bad = [(source.dtype, arch, outcomes[job_keys[(id(source), arch)]][1])
               for source, _ in sources for arch in archs
               if not outcomes[job_keys[(id(source), arch)]][0]]
        if bad:
            failed += [(kernel, dtype, arch, message) for dtype, arch, message in bad]
        else:
            compiled.append((kernel, [source.dtype for source, _ in sources]))
    return Result(compiled, failed, not_checked, archs, time.monotonic() - started,
                  len(work), len(work) - len(todo))


def summary_line(result):
    """``compiled N kernels for sm_80 sm_90 sm_120 sm_121; F failed; M not checked``."""
    failed_kernels = {kernel.where for kernel, _, _, _ in result.failed}
    return 'compiled {} kernels for {}; {} failed; {} not checked'.format(
        len(result.compiled), ' '.join('sm_' + arch for arch in result.architectures),
        len(failed_kernels), len(result.not_checked))


def report(result, out):
    """Every kernel with its location and what was compiled, failures with NVRTC's log."""
    archs = ' '.join('sm_' + arch for arch in result.architectures)
    for kernel, dtypes in result.compiled:
        types = ' '.join(d for d in dtypes if d) or 'fixed types'
        print('compiled     {} {} ({}) [{}] for {}'.format(
            kernel.name, kernel.where, kernel.function, types, archs), file=out)
    for kernel, dtype, arch, message in result.failed:
        print('FAILED       {} {} ({}) [{}] for sm_{}:\n{}'.format(
            kernel.name, kernel.where, kernel.function, dtype or 'fixed types', arch,
            message.rstrip()), file=out)
    for kernel, reason in result.not_checked:
        print('not checked  {} {} ({}): {}'.format(kernel.name, kernel.where, kernel.function,
                                                  reason), file=out)
    print('{} compilations, {} from the cache, {:.1f} s'.format(
        result.compilations, result.cached, result.seconds), file=out)
    print(summary_line(result), file=out)


def main(argv=None):
    reason = available()
    if reason is not None:
        print('GPU compile check not run: ' + reason, file=sys.stderr)
        return 2
    result = check(log=sys.stdout)
    report(result, sys.stdout)
    return 1 if result.failed else 0


if __name__ == '__main__':
    sys.exit(main())
