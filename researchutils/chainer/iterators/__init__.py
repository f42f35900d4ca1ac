"""Decorable iterators: drop-in Chainer iterators that build each example with
``decor_fun(dataset, index)`` and see only the first ``end_index`` examples.

* :class:`UnmodifiableDecorableList`: a read-only, lazily decorated sequence.
* :class:`DecorableSerialIterator`: in the calling thread.
* :class:`DecorableMultithreadIterator`: in worker threads.
* :class:`DecorableMultiprocessIterator`: in worker processes.

Snapshots of the three iterators are interchangeable.
"""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'decorable_multiprocess_iterator': ['DecorableMultiprocessIterator'],
    'decorable_multithread_iterator': ['DecorableMultithreadIterator'],
    'decorable_serial_iterator': ['DecorableSerialIterator'],
    'unmodifiable_decorable_list': ['UnmodifiableDecorableList'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
