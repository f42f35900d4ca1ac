"""Chainer extensions.

The subpackages are independent: ``functions``, ``links``, ``initializers``, ``iterators``,
``serializers``, ``models``, ``data_loading``, ``training``,
``training.extensions`` and ``onnx``. Each is loaded only when first used, so importing one
piece never drags in the others.
"""
from researchutils._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(globals(), {}, submodules=(
    'functions', 'links', 'initializers', 'iterators', 'serializers', 'models', 'data_loading',
    'training', 'onnx'))
