"""Decorable iterators: drop-in Chainer iterators that build each example with
``decor_fun(dataset, index)`` and see only the first ``end_index`` examples.

* :class:`UnmodifiableDecorableList`: a read-only, lazily decorated sequence.
* :class:`DecorableSerialIterator`: in the calling thread.
* :class:`DecorableMultithreadIterator`: in worker threads.
* :class:`DecorableMultiprocessIterator`: in worker processes.

Snapshots of the three iterators are interchangeable.
"""
from researchutils.chainer.iterators.decorable_multiprocess_iterator import (
    DecorableMultiprocessIterator,
)
from researchutils.chainer.iterators.decorable_multithread_iterator import (
    DecorableMultithreadIterator,
)
from researchutils.chainer.iterators.decorable_serial_iterator import DecorableSerialIterator
from researchutils.chainer.iterators.unmodifiable_decorable_list import UnmodifiableDecorableList

__all__ = [
    'DecorableMultiprocessIterator',
    'DecorableMultithreadIterator',
    'DecorableSerialIterator',
    'UnmodifiableDecorableList',
]
