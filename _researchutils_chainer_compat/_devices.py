"""A patch for what pip installs beside Chainer: CUDA's libraries on a machine with no GPU.

Tests: ``tests/test_chainer_compat_patches.py``.
"""


def cuda(loader, module):
    """``chainer.backends.cuda`` says CUDA is available only where a device can be used."""
    # torch 2 wheels from PyPI bring cuBLAS and the CUDA runtime as pip packages
    # (nvidia-cublas...). Beside CuPy 14 every import Chainer tries then succeeds on a machine
    # without a driver or a GPU, and it set `available = True`: `import chainer` warned that
    # cuDNN is not enabled, and code that asks `cuda.available` before `to_gpu()` failed
    # later. Where no device can be counted, the module is left as Chainer leaves it when
    # CuPy is missing: not available, the reason in `_resolution_error`.
    loader.exec_module(module)
    if not module.available:
        return
    try:
        count = module.cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy's CUDARuntimeError: no driver, or a driver too old
        reason = '{}: {}'.format(type(error).__name__, error)
    else:
        if count > 0:
            return
        reason = 'no CUDA device'
    module.available = False
    module._resolution_error = RuntimeError(
        'CuPy imports, but no CUDA device can be used ({})'.format(reason))
