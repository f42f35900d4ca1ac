"""Patches for rules a release changed under Chainer: NumPy 2's integers, ``ndarray.device``,
``meshgrid`` and deprecations, Python's ``Thread.setDaemon``, protobuf 4's generated code.

Each patch is ``patch(loader, module)`` (listed in ``PATCHED_MODULES``): it runs the module's
code, then, only where the stack has the new rule (checked by calling it), gives back
Chainer's behaviour on NumPy 1.x in a wrapper or through :func:`._module_scope.give_globals`.
Tests: ``tests/test_chainer_compat_patches.py``.
"""
import functools
import types
import warnings

from _researchutils_chainer_compat import _module_scope
from _researchutils_chainer_compat._stand_ins import wrapped_int


def _warns_deprecation(call):
    """Whether ``call()`` warns with a DeprecationWarning (how a patch sees that it is due)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        call()
    return any(issubclass(w.category, DeprecationWarning) for w in caught)


def _refuses(call):
    """Whether ``call()`` raises OverflowError, or warns as NumPy 1.24-1.26 did before 2.0
    refused what they still wrapped."""
    try:
        return _warns_deprecation(call)
    except OverflowError:
        return True


def pad_sequence(loader, module):
    """``PadSequence.forward`` stores the padding with ``y[i, l:] = padding``."""
    # An int out of the dtype's range: wrapped by NumPy 1.x, warned on by 1.24, refused
    # (OverflowError) from NumPy 2.0. Stored as NumPy 1.x did (a C long, or unsigned long
    # for uint32 / uint64), OverflowError beyond 64 bits included.
    loader.exec_module(module)
    import numpy
    if not _refuses(lambda: numpy.zeros(1, numpy.uint8).__setitem__(0, -1)):
        return
    forward = module.PadSequence.forward

    @functools.wraps(forward)
    def forward_with_wrapped_padding(self, xs):
        padding = self.padding
        if xs:
            dtype = xs[0].dtype
            self.padding = wrapped_int(padding, dtype, dtype.kind == 'u' and dtype.itemsize >= 4)
        try:
            return forward(self, xs)
        finally:
            self.padding = padding

    module.PadSequence.forward = forward_with_wrapped_padding


def convert(loader, module):
    """``concat_examples`` (every Trainer's default converter) pads with ``numpy.full``."""
    # Both from NumPy 2.5: maximum's positional `out` deprecated, and numpy.full refusing
    # an int out of the dtype's range.
    loader.exec_module(module)
    _maximum_out_by_keyword(module)
    _padding_wrapped_by_full(module)


def _maximum_out_by_keyword(module):
    # NumPy 2.5 deprecates maximum's positional `out`, which _concat_arrays_with_padding
    # passes: it gets a maximum that passes it by keyword, which is what NumPy did with it.
    import numpy
    if not _warns_deprecation(lambda: numpy.maximum(*[numpy.zeros(1)] * 3)):
        return

    def maximum_out_by_keyword(x1, x2, *out, **kwargs):
        if out:
            kwargs['out'] = out[0] if len(out) == 1 else out
        return numpy.maximum(x1, x2, **kwargs)

    _module_scope.give_numpy_names(module, ['_concat_arrays_with_padding'],
                                   {'maximum': maximum_out_by_keyword})


def _padding_wrapped_by_full(module):
    # An int out of the dtype's range: numpy.full wrapped it up to NumPy 2.0 and refuses it
    # (OverflowError) from 2.5. Wrapped as NumPy 1.x's full did (through int64, else uint64).
    import numpy
    if not _refuses(lambda: numpy.full(1, -1, numpy.uint8)):
        return
    concat = module._concat_arrays_with_padding

    @functools.wraps(concat)
    def concat_with_wrapped_padding(arrays, padding):
        return concat(arrays, wrapped_int(padding, arrays[0].dtype, True))

    module._concat_arrays_with_padding = concat_with_wrapped_padding


def fix(loader, module):
    """``F.fix`` calls ``xp.fix``."""
    # numpy.fix: deprecated in NumPy 2.5; numpy.trunc rounds towards zero too (both keep
    # the sign of zero). CuPy arrays keep Chainer's own path.
    loader.exec_module(module)
    import numpy
    if not _warns_deprecation(lambda: numpy.fix(numpy.zeros(1))):
        return
    chainer_fix = module.fix

    @functools.wraps(chainer_fix)
    def fix_by_trunc(x):
        array = getattr(x, 'array', x)
        if isinstance(array, numpy.ndarray):
            return module.chainer.as_variable(
                module.utils.force_array(numpy.trunc(array), array.dtype))
        return chainer_fix(x)

    module.fix = fix_by_trunc


def variable(loader, module):
    """``Variable.debug_print`` prints ``getattr(array, 'device', 'CPU')``."""
    # ndarray.device: added in NumPy 2.0 ('cpu'); NumPy 1.x arrays had none, so Chainer
    # printed "CPU".
    loader.exec_module(module)
    import numpy
    if not hasattr(numpy.empty(0), 'device'):
        return
    debug_print = module.Variable.debug_print

    @functools.wraps(debug_print)
    def debug_print_cpu_as_before(self):
        text = debug_print(self)
        if isinstance(self.array, numpy.ndarray):
            text = text.replace('\n- device: cpu\n', '\n- device: CPU\n', 1)
        return text

    module.Variable.debug_print = debug_print_cpu_as_before


def categorical(loader, module):
    """``Categorical.log_prob`` indexes with ``numpy.meshgrid(...) + [x]``."""
    # numpy.meshgrid: returns a tuple from NumPy 2.0 (a list before), so log_prob (and
    # kl_divergence of two Categoricals) raised TypeError. log_prob alone sees a meshgrid
    # that returns a list.
    loader.exec_module(module)
    import numpy
    if not isinstance(numpy.meshgrid(numpy.zeros(1)), tuple):
        return

    def meshgrid_as_list(*xi, **kwargs):
        return list(numpy.meshgrid(*xi, **kwargs))

    _module_scope.give_numpy_names(module, ['Categorical.log_prob'],
                                   {'meshgrid': meshgrid_as_list})


def multiprocess_iterator(loader, module):
    """``_PrefetchLoop.launch_thread`` calls ``thread.setDaemon(True)``."""
    # Thread.setDaemon: deprecated in Python 3.10 (a warning at every MultiprocessIterator
    # start). launch_thread alone gets a threading module whose Thread.setDaemon sets
    # `daemon`, which is all the old method did; Python's threading is left as it is.
    loader.exec_module(module)
    import threading
    if not _warns_deprecation(lambda: threading.Thread().setDaemon(True)):
        return

    class Thread(threading.Thread):
        def setDaemon(self, daemonic):
            self.daemon = daemonic

    view = types.ModuleType(threading.__name__, threading.__doc__)
    view.__dict__.update(vars(threading))
    view.Thread = Thread
    _module_scope.give_globals(module, ['_PrefetchLoop.launch_thread'], {'threading': view})


def maxout(loader, module):
    """``Maxout`` sets the ``shape`` of the parameter array around a callable initializer."""
    # Setting ndarray.shape: deprecated in NumPy 2.5. Such a callable is given to Chainer's
    # code already wrapped as an Initializer (which Maxout passes on untouched) that calls
    # it on a reshaped view of the same memory: it sees the same shape, fills the same array.
    loader.exec_module(module)
    import numpy
    if not _warns_deprecation(lambda: setattr(numpy.zeros(2), 'shape', (2, 1))):
        return
    from chainer import initializer
    init = module.Maxout.__init__

    class OnReshapedView(initializer.Initializer):
        def __init__(self, function, shape):
            super().__init__(getattr(function, 'dtype', None))
            self.function, self.shape = function, shape

        def __call__(self, array):
            self.function(array.reshape(self.shape))

    def wrapped(value, shape):
        # Arrays, scalars and None are not callable; an Initializer Maxout passes on as is.
        if callable(value) and not isinstance(value, initializer.Initializer):
            return OnReshapedView(value, shape)
        return value

    @functools.wraps(init)
    def __init__(self, in_size, out_size, pool_size, initialW=None, initial_bias=0):
        init(self, in_size, out_size, pool_size,
             wrapped(initialW, (out_size, pool_size, in_size)),
             wrapped(initial_bias, (out_size, pool_size)))

    module.Maxout.__init__ = __init__


def caffe_pb2(loader, module):
    """Chainer's ``caffe_pb2`` builds every descriptor by calling the descriptor classes."""
    # Generated by protoc 3.x, whose code protobuf 4 and newer (upb or C++ backend, what
    # pip installs for Chainer's `protobuf>=3.0.0`) refuse with TypeError: L.caffe and
    # chainer.exporters.caffe did not import. The module is built here from the serialized
    # caffe.proto in Chainer's own file, the way protoc >= 3.20 generates it.
    if not _protobuf_refuses_old_generated_code():
        loader.exec_module(module)
        return
    import ast

    from google.protobuf import descriptor_pool
    from google.protobuf.internal import builder
    serialized = None
    for node in ast.parse(loader.get_source(module.__name__)).body:
        if isinstance(node, ast.Assign) and \
                [getattr(target, 'id', None) for target in node.targets] == ['DESCRIPTOR']:
            argument, = (k.value for k in node.value.keywords if k.arg == 'serialized_pb')
            serialized = ast.literal_eval(argument.args[0]).encode('latin1')   # _b('...')
    if serialized is None:
        raise ImportError('{} holds no serialized_pb'.format(module.__name__))
    pool = descriptor_pool.Default()
    try:
        descriptor = pool.AddSerializedFile(serialized)
    except TypeError:             # already there (an earlier import of Chainer's code)
        descriptor = pool.FindFileByName('caffe.proto')
    module.DESCRIPTOR = descriptor
    builder.BuildMessageAndEnumDescriptors(descriptor, vars(module))
    builder.BuildTopDescriptorsAndMessages(descriptor, module.__name__, vars(module))


def _protobuf_refuses_old_generated_code():
    import google.protobuf
    from google.protobuf.internal import api_implementation
    major = int(google.protobuf.__version__.split('.')[0])
    return major >= 4 and api_implementation.Type() != 'python'
