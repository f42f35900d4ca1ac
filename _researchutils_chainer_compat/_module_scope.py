"""How a supply reaches one Chainer module, and no other code, even under threads.

A patch runs a Chainer module's code with :func:`run`, giving it what the stack lacks in the
module's own namespace, never in a shared one:

- ``imports``: what the module's ``import NAME`` statements get for top-level names
  (``pkg_resources``). The module's code runs with a ``__builtins__`` of its own whose
  ``__import__`` answers those names and passes every other import on to Python's, so
  ``sys.modules`` never holds a stand-in: a thread importing ``pkg_resources`` while Chainer
  loads gets what the stack has.
- ``numpy_names``: names the module reads as attributes of NumPy (``numpy.sctypes``). Its
  ``import numpy`` gets a copy of NumPy's namespace with those names (:func:`numpy_with`);
  NumPy itself never gains them, so a thread reading ``numpy.__dict__`` sees NumPy as it
  is. Once the module's code has run, its globals hold the real NumPy again (Chainer
  compares ``xp is numpy``), and only the functions named in ``readers`` keep the copy,
  through :func:`give_globals`. Another library's modules are given the same way with
  :func:`module_with` under ``imports`` (onnx_chainer's ``import onnx``).

Failures guarded against: a stand-in left in ``sys.modules`` or in NumPy when the module's
code raises (nothing is put there to begin with), and a function of the module that imports
a supplied name when called (the module keeps its ``__builtins__``). Tests:
``tests/test_chainer_compat.py`` (threads observing a load) and
``tests/test_chainer_compat_patches.py``.
"""
import builtins
import functools
import importlib
import types


class _ModuleWith(types.ModuleType):
    """A module's namespace plus a few names it lacks, for one Chainer module's globals.

    Its ``__dict__`` starts as a copy of the module's (so look-ups are as fast as the
    module's own); names the module loads lazily (``numpy.linalg``...) are asked of the
    module itself.
    """

    def __getattr__(self, name):
        return getattr(importlib.import_module(self.__name__), name)


def module_with(module, names):
    """A module object that reads as ``module`` plus ``names`` ({name: object})."""
    view = _ModuleWith(module.__name__, module.__doc__)
    view.__dict__.update((k, v) for k, v in vars(module).items()
                         if k not in ('__getattr__', '__dir__'))
    view.__dict__.update(names)
    return view


def numpy_with(names):
    """A module object that reads as NumPy plus ``names`` ({name: object})."""
    import numpy
    return module_with(numpy, names)


def _import_with(imports):
    """An ``__import__`` that gives ``imports`` ({top-level name: object}) and asks Python's
    own ``__import__`` (as it is at the time of the call) for everything else."""

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        top, _, rest = name.partition('.')
        if level or top not in imports:
            return builtins.__import__(name, globals, locals, fromlist, level)
        found = imports[top]                # `import a.b` binds a; `from a.b import c`, a.b
        if fromlist:
            found = functools.reduce(getattr, filter(None, rest.split('.')), found)
        return found

    return import_


def run(loader, module, imports=None, numpy_names=None, readers=()):
    """Run ``module``'s code with ``loader``, seeing ``imports`` and NumPy with ``numpy_names``.

    Args:
        loader: the module's own loader.
        module: the module object being loaded.
        imports (dict): {top-level name: object} its ``import`` statements get.
        numpy_names (dict): {name: object} it reads as attributes of NumPy.
        readers (list of str): the functions (``'f'`` or ``'Class.method'``) that keep
            reading ``numpy_names`` after the module has loaded.
    """
    imports = dict(imports or {})
    view = None
    if numpy_names:
        view = imports['numpy'] = numpy_with(numpy_names)
    if not imports:
        loader.exec_module(module)
        return
    # The module keeps these builtins (the functions it defines hold them anyway), so a
    # function that imports a supplied name when called gets it too.
    module.__builtins__ = dict(vars(builtins), __import__=_import_with(imports))
    loader.exec_module(module)
    if view is not None:
        del imports['numpy']         # an `import numpy` from now on gets the real one
        import numpy
        for name, value in list(vars(module).items()):
            if value is view:
                setattr(module, name, numpy)
        give_numpy_names(module, readers, numpy_names)


def give_numpy_names(module, readers, names):
    """Let the functions ``readers`` of ``module`` read ``names`` as attributes of NumPy.

    ``names`` is a {name: object} dict. The readers see NumPy with them wherever the
    module's globals hold NumPy; no reader compares NumPy by identity (checked by the tests).
    """
    import numpy
    view = numpy_with(names)
    give_globals(module, readers, {name: view for name, value in vars(module).items()
                                   if value is numpy})


def give_globals(module, readers, replacements):
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
