"""NumPy 1.x objects and rules supplied to Chainer where the stack lacks them.

- :func:`numpy_distutils`: ``numpy.distutils`` with ``system_info.get_info`` (Chainer calls
  it on macOS to warn about Accelerate); it finds no library, so the warning never fires.
- :func:`sctypes`: ``numpy.sctypes``, the table of scalar types by kind.
- :func:`wrapped_int`: a Python int stored into an integer dtype the way NumPy 1.x stored
  it: wrapped when it fits a 64-bit C integer, ``OverflowError`` beyond (NumPy 2 refuses
  every int out of the dtype's range). ``F.pad_sequence`` and ``concat_examples`` use it.

The ``pkg_resources`` stand-in is in :mod:`._pkg_resources`. Tests:
``tests/test_chainer_compat_patches.py``.
"""
import types

_INT64_LOW = -(1 << 63)


def _get_info(name, notfound_action=0):
    """Stand-in for ``numpy.distutils.system_info.get_info``: finds no library.

    Args:
        name (str): the library section asked for, e.g. ``'blas_opt'``.
        notfound_action (int): accepted for the real signature; ignored.

    Returns:
        dict: ``{}``, what ``numpy.distutils`` returns for a library it did not find.
    """
    return {}


def numpy_distutils():
    """A ``numpy.distutils`` package object whose ``system_info`` has only ``get_info``."""
    package = types.ModuleType('numpy.distutils', 'Stand-in from researchutils for Chainer '
                               '7.8.1: this NumPy has no numpy.distutils.')
    package.__path__ = []
    system_info = types.ModuleType('numpy.distutils.system_info', package.__doc__)
    system_info.get_info = _get_info
    package.system_info = system_info
    return package


def sctypes():
    """``numpy.sctypes`` as NumPy 1.26 built it: kind -> scalar types, one per size."""
    import numpy
    table = {
        'int': [numpy.int8, numpy.int16, numpy.int32, numpy.int64],
        'uint': [numpy.uint8, numpy.uint16, numpy.uint32, numpy.uint64],
        'float': [numpy.float16, numpy.float32, numpy.float64, numpy.longdouble],
        'complex': [numpy.complex64, numpy.complex128, numpy.clongdouble],
        'others': [bool, object, bytes, str, numpy.void],
    }
    for kind in ('float', 'complex'):     # where long double is double, it is listed once
        unique = []
        for scalar in table[kind]:
            if all(numpy.dtype(scalar) != numpy.dtype(kept) for kept in unique):
                unique.append(scalar)
        table[kind] = unique
    return table


def wrapped_int(value, dtype, unsigned_too):
    """``value`` stored into ``dtype`` as NumPy 1.x stored it, where it is a Python int and
    ``dtype`` an integer dtype (anything else is returned as it is).

    NumPy 1.x first converted the int to a 64-bit C integer, raising ``OverflowError`` when
    it did not fit, then kept the low bits the dtype holds (``-1`` into ``uint8`` is 255,
    ``128`` into ``int8`` is -128). The C integer was signed (``int64``); with
    ``unsigned_too``, a value above its range was read as ``uint64`` instead. Which one
    applied depended on the call (checked on NumPy 1.26, Linux): ``numpy.full`` made an
    array of the int first (``int64``, else ``uint64``: ``unsigned_too``), while storing
    into an array read it as a C ``long``, or an ``unsigned long`` for ``uint32`` and
    ``uint64`` arrays.

    Args:
        value: the value to store (a padding).
        dtype: the NumPy dtype it is stored into.
        unsigned_too (bool): whether ints in ``[2**63, 2**64)`` are accepted.

    Returns:
        a scalar of ``dtype``, or ``value`` itself.

    Raises:
        OverflowError: ``value`` is an int below ``-2**63``, or not below ``2**63``
            (``2**64`` with ``unsigned_too``), where NumPy 1.x raised it too.

    Example:
        >>> import numpy
        >>> [int(wrapped_int(v, numpy.int8, False)) for v in (-1, 128, 300, 2**63 - 1)]
        [-1, -128, 44, -1]
        >>> int(wrapped_int(2**63, numpy.int64, True)), wrapped_int(2**70, numpy.float32, False)
        (-9223372036854775808, 1180591620717411303424)
        >>> wrapped_int(2**63, numpy.int64, False)
        Traceback (most recent call last):
        ...
        OverflowError: Python int 9223372036854775808 does not fit in a 64-bit C int...
    """
    import numpy
    dtype = numpy.dtype(dtype)
    if not isinstance(value, int) or isinstance(value, bool) or dtype.kind not in 'iu':
        return value
    if not _INT64_LOW <= value < 1 << (64 if unsigned_too else 63):
        raise OverflowError(
            'Python int {} does not fit in a 64-bit C integer, so NumPy 1.x could not store '
            'it into {} either'.format(value, dtype))
    bits = 8 * dtype.itemsize
    value %= 1 << bits
    if dtype.kind == 'i' and value >= 1 << (bits - 1):
        value -= 1 << bits
    return dtype.type(value)


# The storage types onnx.mapping's STORAGE_TENSOR_TYPE_TO_FIELD listed (onnx 1.6-1.18).
_ONNX_STORAGE_TYPES = ('FLOAT', 'INT32', 'INT64', 'UINT16', 'DOUBLE', 'COMPLEX64',
                       'COMPLEX128', 'UINT32', 'UINT64', 'STRING', 'BOOL')


def onnx_mapping():
    """``onnx.mapping`` with the two tables onnx_chainer reads, made by ``onnx.helper``:
    ``NP_TYPE_TO_TENSOR_TYPE`` (NumPy dtype -> ``TensorProto`` type) and
    ``STORAGE_TENSOR_TYPE_TO_FIELD`` (``TensorProto`` type -> the field holding its values).
    """
    import numpy
    from onnx import TensorProto, helper
    mapping = types.ModuleType('onnx.mapping', 'Stand-in from researchutils for '
                               'onnx_chainer: this onnx has no onnx.mapping.')
    dtypes = set()
    for tensor_type in helper.get_all_tensor_dtypes():
        try:
            dtypes.add(numpy.dtype(helper.tensor_dtype_to_np_dtype(tensor_type)))
        except (KeyError, TypeError, ValueError):      # a type NumPy cannot hold
            continue
    mapping.NP_TYPE_TO_TENSOR_TYPE = {dtype: helper.np_dtype_to_tensor_dtype(dtype)
                                      for dtype in dtypes}
    mapping.STORAGE_TENSOR_TYPE_TO_FIELD = {
        getattr(TensorProto, name): helper.tensor_dtype_to_field(getattr(TensorProto, name))
        for name in _ONNX_STORAGE_TYPES}
    return mapping
