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

from researchutils._chainer_compat import _stand_ins


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
    namespace = {key: view if value is numpy else value for key, value in vars(module).items()}
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
        # (-1 into uint8 -> 255); NumPy 2 raises OverflowError. Cast as 1.x did.
        padding = self.padding
        if xs and isinstance(padding, int) and not isinstance(padding, bool):
            self.padding = _stand_ins.wrapped_int(padding, xs[0].dtype)
        try:
            return forward(self, xs)
        finally:
            self.padding = padding

    module.PadSequence.forward = forward_with_wrapped_padding


def _numpy_refuses_out_of_bound_ints():
    import numpy
    target = numpy.zeros(1, numpy.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)   # NumPy 1.24-1.26 warn
        try:
            target[0] = -1
        except OverflowError:
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


def _numpy_fix_deprecated():
    import numpy
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        numpy.fix(numpy.zeros(1))
    return any(issubclass(w.category, DeprecationWarning) for w in caught)


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


_PATCHES = {
    'environment_check': _environment_check,
    'pkg_resources_user': _pkg_resources_user,
    'as_strided': _as_strided,
    'resize_images': _resize_images,
    'pad_sequence': _pad_sequence,
    'fix': _fix,
    'variable': _variable,
}
