"""Export Chainer models to ONNX (the ``onnx`` extra), LSTMs and researchutils' links included.

Importing this package imports neither onnx nor onnx_chainer; :func:`export` does, when
called. The converters it adds to onnx_chainer's are
:data:`researchutils.chainer.onnx.converters.CONVERTERS`. Tutorial:
``docs/tutorials/onnx.rst``.

Example:
    >>> from researchutils.chainer.onnx import export
    >>> from researchutils.chainer.onnx.converters import CONVERTERS
    >>> sorted(CONVERTERS)
    ['Flip', 'GradClipLSTM', 'LSTM', '_ClipGradient']
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'exporter': ['export'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.onnx.exporter import export as export
