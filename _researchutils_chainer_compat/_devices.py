"""A patch for what pip installs beside Chainer: CUDA's libraries on a machine with no GPU.

Tests: ``tests/test_chainer_compat_patches.py``.
"""
import builtins
import ctypes
import os

# The driver's own library (never CuPy's or pip's): where it cannot be loaded, no GPU can be.
_DRIVER = 'nvcuda.dll' if os.name == 'nt' else 'libcuda.so.1'


def _no_device():
    """Why CuPy can use no CUDA device here, or None (a driver, or no CuPy at all).

    Decided without calling CUDA: a process that has called it (cudaGetDeviceCount runs cuInit)
    can no longer fork workers that use the GPU, and Chainer's MultiprocessParallelUpdater
    then refuses to start. The driver's library is loaded, never called.
    """
    try:
        import cupy  # noqa: F401
    except Exception:
        return None     # Chainer's own import of CuPy fails the same way, and says so
    try:
        ctypes.CDLL(_DRIVER)
    except OSError as error:
        return 'no CUDA driver: {}'.format(error)
    return None


def cuda(loader, module):
    """``chainer.backends.cuda`` says CUDA is available only where a device can be used."""
    # torch 2 wheels from PyPI bring cuBLAS and the CUDA runtime as pip packages
    # (nvidia-cublas...). Beside CuPy 14 every import Chainer tries then succeeds on a machine
    # without a driver or a GPU: it set `available = True`, warned at `import chainer` that
    # cuDNN is not enabled, and imported cupyx (which imports Optuna when installed). Where
    # there is no driver, the module's own imports of CuPy fail, and Chainer leaves
    # CUDA unavailable as it does without CuPy, the reason in `_resolution_error`. The
    # refusal is the module's alone: `import cupy` elsewhere works as ever.
    reason = _no_device()
    if reason is None:
        loader.exec_module(module)
        return

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if not level and name.partition('.')[0] in ('cupy', 'cupyx'):
            raise ImportError('CuPy imports, but no CUDA device can be used ({})'.format(
                reason))
        return builtins.__import__(name, globals, locals, fromlist, level)

    module.__builtins__ = dict(vars(builtins), __import__=import_)
    loader.exec_module(module)
