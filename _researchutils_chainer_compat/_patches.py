"""What each Chainer module in ``PATCHED_MODULES`` gets, decided from the stack present.

Each patch is a function ``patch(loader, module)`` that runs the module's code with
``loader.exec_module(module)`` (inside whatever a module's own code needs while it runs) and
then finishes it. A supply or a fix is made only where the stack needs it: a name that NumPy
or setuptools has is never replaced, and on a stack that lacks nothing a patch only runs the
module. Names supplied for a module's own code go to the functions that read them alone (through
:func:`_give_numpy_names`); NumPy, ``sys.modules`` and every other module are left as they were.
"""
import contextlib
import functools
import importlib.util
import sys
import types
import warnings

from _researchutils_chainer_compat import _stand_ins


def run(patch, loader, module):
    """Run ``module``'s code with ``loader`` and apply the patch named ``patch`` to it."""
    _PATCHES[patch](loader, module)


def _findable(name):
    """Whether the installed packages (not this package) provide module ``name``."""
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:          # a parent package is missing
        return False


def _numpy_lacks(name):
    import numpy
    with warnings.catch_warnings():
        # NumPy 1.2x warns on some names it is about to remove; a warned name is present.
        warnings.simplefilter('ignore')
        return not hasattr(numpy, name)


class _NumpyWith(types.ModuleType):
    """NumPy's namespace plus a few names it lacks, for one Chainer module's globals.

    Its ``__dict__`` starts as a copy of NumPy's (so look-ups are as fast as NumPy's own);
    names NumPy loads lazily (``numpy.linalg``...) are asked of NumPy itself.
    """

    def __getattr__(self, name):
        import numpy
        return getattr(numpy, name)


def _numpy_with(names):
    import numpy
    view = _NumpyWith(numpy.__name__, numpy.__doc__)
    view.__dict__.update((k, v) for k, v in vars(numpy).items()
                         if k not in ('__getattr__', '__dir__'))
    view.__dict__.update(names)
    return view


def _give_numpy_names(module, readers, names):
    """Let the functions ``readers`` of ``module`` read ``names`` as attributes of NumPy.

    Each reader (a qualified name: ``'f'`` or ``'Class.method'``) is replaced by a copy of
    itself whose globals see a NumPy namespace with ``names`` where the module's own globals
    hold NumPy. Only those functions see it: the rest of the module keeps the real NumPy
    (Chainer compares ``xp is numpy`` elsewhere), and no reader compares NumPy by identity
    (checked by the tests).
    """
    if not names:
        return
    import numpy
    view = _numpy_with(names)
    _give_globals(module, readers, {key: view for key, value in vars(module).items()
                                    if value is numpy})


def _give_globals(module, readers, replacements):
    """Let the functions ``readers`` of ``module`` see ``replacements`` among its globals.

    Each reader (``'f'`` or ``'Class.method'``) is replaced by a copy of itself whose
    globals are the module's with ``replacements`` ({name: object}) put over them; the
    module's own globals and every other function keep what they had.
    """
    namespace = dict(vars(module))
    namespace.update(replacements)
    for qualname in readers:
        owner, _, name = qualname.rpartition('.')
        holder = getattr(module, owner) if owner else module
        original = getattr(holder, name)
        copy = types.FunctionType(original.__code__, namespace, original.__name__,
                                  original.__defaults__, original.__closure__)
        copy.__kwdefaults__ = original.__kwdefaults__
        functools.update_wrapper(copy, original)
        del copy.__wrapped__
        setattr(holder, name, copy)


@contextlib.contextmanager
def _modules_while_running(stand_ins):
    """Put ``stand_ins`` ({name: module}) in ``sys.modules`` while a module's code runs."""
    added = [name for name in stand_ins if name not in sys.modules]
    for name in added:
        sys.modules[name] = stand_ins[name]
    try:
        yield
    finally:
        for name in added:
            if sys.modules.get(name) is stand_ins[name]:
                del sys.modules[name]


@contextlib.contextmanager
def _numpy_names_while_running(names):
    """Give NumPy ``names`` while a module's own top-level code reads them, then take them back."""
    import numpy
    for key, value in names.items():
        setattr(numpy, key, value)
    try:
        yield
    finally:
        for key, value in names.items():
            if numpy.__dict__.get(key) is value:
                delattr(numpy, key)


def _pkg_resources_stand_in():
    """``{'pkg_resources': stand-in}`` where setuptools has no ``pkg_resources``, else ``{}``."""
    return {} if _findable('pkg_resources') else {'pkg_resources': _stand_ins.pkg_resources()}


def _environment_check(loader, module):
    # Chainer's start-up check: `import numpy.distutils.system_info` (get_info is called on
    # macOS only) and `import pkg_resources` (require / get_distribution of CuPy, iDeep).
    stand_ins = _pkg_resources_stand_in()
    distutils = None
    if not _findable('numpy.distutils'):
        distutils = _stand_ins.numpy_distutils()
        stand_ins.update({distutils.__name__: distutils,
                          distutils.system_info.__name__: distutils.system_info})
    with _modules_while_running(stand_ins):
        loader.exec_module(module)
    if distutils is not None:
        _give_numpy_names(module, ['_check_osx_numpy_backend'], {'distutils': distutils})


def _pkg_resources_user(loader, module):
    # chainer.testing's with_requires / without_requires build a pkg_resources.WorkingSet.
    with _modules_while_running(_pkg_resources_stand_in()):
        loader.exec_module(module)


def _as_strided(loader, module):
    # Reads np.sctypes['int'] at import and np.sctypes['float'] in backward.
    names = {'sctypes': _stand_ins.sctypes()} if _numpy_lacks('sctypes') else {}
    with _numpy_names_while_running(names):
        loader.exec_module(module)
    _give_numpy_names(module, ['AsStridedGrad.forward'], names)


def _resize_images(loader, module):
    # compute_indices_and_weights passes dtype=numpy.float, NumPy 1.x's alias of Python's
    # float (removed in NumPy 1.24): F.resize_images raised AttributeError since then.
    loader.exec_module(module)
    names = {'float': float} if _numpy_lacks('float') else {}
    _give_numpy_names(module, ['compute_indices_and_weights'], names)


def _pad_sequence(loader, module):
    loader.exec_module(module)
    if not _numpy_refuses_out_of_bound_ints():
        return
    forward = module.PadSequence.forward

    @functools.wraps(forward)
    def forward_with_wrapped_padding(self, xs):
        # NumPy 1.x stored a Python int that does not fit the dtype wrapped around
        # (-1 into uint8 -> 255; 1.24-1.26 warn as they do); NumPy 2 raises
        # OverflowError. Cast as 1.x did.
        padding = self.padding
        if xs and isinstance(padding, int) and not isinstance(padding, bool):
            self.padding = _stand_ins.wrapped_int(padding, xs[0].dtype)
        try:
            return forward(self, xs)
        finally:
            self.padding = padding

    module.PadSequence.forward = forward_with_wrapped_padding


def _numpy_refuses_out_of_bound_ints():
    """Whether NumPy refuses (2.x) or warns on (1.24-1.26) storing -1 into a uint8 array."""
    import numpy
    target = numpy.zeros(1, numpy.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter('error', DeprecationWarning)
        try:
            target[0] = -1
        except (OverflowError, DeprecationWarning):
            return True
    return False


def _fix(loader, module):
    loader.exec_module(module)
    if not _numpy_fix_deprecated():
        return
    import numpy
    fix = module.fix

    @functools.wraps(fix)
    def fix_by_trunc(x):
        # numpy.fix is deprecated from NumPy 2.5 on; numpy.trunc rounds towards zero too
        # (both keep the sign of zero). CuPy arrays keep Chainer's own path.
        array = getattr(x, 'array', x)
        if isinstance(array, numpy.ndarray):
            return module.chainer.as_variable(
                module.utils.force_array(numpy.trunc(array), array.dtype))
        return fix(x)

    module.fix = fix_by_trunc


def _warns_deprecation(call):
    """Whether ``call()`` warns with a DeprecationWarning (how a patch sees that it is due)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        call()
    return any(issubclass(w.category, DeprecationWarning) for w in caught)


def _numpy_fix_deprecated():
    import numpy
    return _warns_deprecation(lambda: numpy.fix(numpy.zeros(1)))


def _variable(loader, module):
    loader.exec_module(module)
    import numpy
    if not hasattr(numpy.empty(0), 'device'):
        return
    debug_print = module.Variable.debug_print

    @functools.wraps(debug_print)
    def debug_print_cpu_as_before(self):
        # Chainer prints `getattr(array, 'device', 'CPU')`: NumPy 2 arrays have a device
        # attribute ('cpu'), NumPy 1.x arrays had none, so Chainer printed "CPU".
        text = debug_print(self)
        if isinstance(self.array, numpy.ndarray):
            text = text.replace('\n- device: cpu\n', '\n- device: CPU\n', 1)
        return text

    module.Variable.debug_print = debug_print_cpu_as_before


def _categorical(loader, module):
    # Categorical.log_prob indexes with `numpy.meshgrid(...) + [x]`: NumPy 1.x's meshgrid
    # returned a list, NumPy 2's returns a tuple, so log_prob (and kl_divergence of two
    # Categoricals) raised TypeError. log_prob alone sees a meshgrid that returns a list.
    loader.exec_module(module)
    import numpy
    if not isinstance(numpy.meshgrid(numpy.zeros(1)), tuple):
        return

    def meshgrid_as_list(*xi, **kwargs):
        return list(numpy.meshgrid(*xi, **kwargs))

    _give_numpy_names(module, ['Categorical.log_prob'], {'meshgrid': meshgrid_as_list})


def _convert(loader, module):
    # _concat_arrays_with_padding calls numpy.maximum(shape, array.shape, shape), the third
    # argument being `out`; NumPy 2.5 deprecates a positional `out` for maximum/minimum
    # (DeprecationWarning on every padded concat_examples). It gets a maximum that passes
    # that argument as `out=`, which is what NumPy did with it.
    loader.exec_module(module)
    if not _numpy_warns_on_positional_out():
        return
    import numpy

    def maximum_out_by_keyword(x1, x2, *out, **kwargs):
        if out:
            kwargs['out'] = out[0] if len(out) == 1 else out
        return numpy.maximum(x1, x2, **kwargs)

    _give_numpy_names(module, ['_concat_arrays_with_padding'],
                      {'maximum': maximum_out_by_keyword})


def _numpy_warns_on_positional_out():
    import numpy
    target = numpy.zeros(1)
    return _warns_deprecation(lambda: numpy.maximum(target, target, target))


def _multiprocess_iterator(loader, module):
    # _PrefetchLoop.launch_thread calls thread.setDaemon(True), deprecated since Python 3.10
    # (DeprecationWarning at every MultiprocessIterator start). It gets a threading module
    # whose Thread.setDaemon sets the `daemon` attribute, which is all the old method did.
    loader.exec_module(module)
    import threading
    if not _setdaemon_deprecated():
        return

    class Thread(threading.Thread):
        def setDaemon(self, daemonic):
            self.daemon = daemonic

    view = types.ModuleType(threading.__name__, threading.__doc__)
    view.__dict__.update(vars(threading))
    view.Thread = Thread
    _give_globals(module, ['_PrefetchLoop.launch_thread'], {'threading': view})


def _setdaemon_deprecated():
    import threading
    return _warns_deprecation(lambda: threading.Thread().setDaemon(True))


def _maxout(loader, module):
    # Maxout hands a callable initialW / initial_bias the Linear's parameter array after
    # setting its `shape` to (out_size, pool_size, ...), then sets it back; NumPy 2.5
    # deprecates setting ndarray.shape. Such a callable is given to Chainer's code already
    # wrapped as an Initializer (which Maxout passes on untouched) that calls it on a
    # reshaped view of the same memory: the callable sees the same shape and fills the
    # same array.
    loader.exec_module(module)
    if not _numpy_shape_setter_deprecated():
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


def _numpy_shape_setter_deprecated():
    import numpy
    return _warns_deprecation(lambda: setattr(numpy.zeros(2), 'shape', (2, 1)))


def _caffe_pb2(loader, module):
    # Chainer's caffe_pb2 was generated by protoc 3.x: its code builds every descriptor by
    # calling the descriptor classes. protobuf >= 4 (upb or C++ backend, what pip installs
    # for Chainer's `protobuf>=3.0.0`) refuses that with TypeError, so L.caffe and
    # chainer.exporters.caffe could not be imported. The same module is built here from the
    # serialized caffe.proto in Chainer's own file, the way protoc >= 3.20 generates it.
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


_PATCHES = {
    'environment_check': _environment_check,
    'pkg_resources_user': _pkg_resources_user,
    'as_strided': _as_strided,
    'resize_images': _resize_images,
    'pad_sequence': _pad_sequence,
    'fix': _fix,
    'variable': _variable,
    'categorical': _categorical,
    'caffe_pb2': _caffe_pb2,
    'convert': _convert,
    'multiprocess_iterator': _multiprocess_iterator,
    'maxout': _maxout,
}
