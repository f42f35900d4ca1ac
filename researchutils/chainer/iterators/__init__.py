"""Decorable iterators: drop-in Chainer iterators that build each example with
``decor_fun(dataset, index)`` and see only the first ``end_index`` examples.

* :class:`UnmodifiableDecorableList`: a read-only, lazily decorated sequence.
* :class:`DecorableSerialIterator`: in the calling thread.
* :class:`DecorableMultithreadIterator`: in worker threads.
* :class:`DecorableMultiprocessIterator`: in worker processes.

Snapshots of the three iterators are interchangeable.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'decorable_multiprocess_iterator': ['DecorableMultiprocessIterator'],
    'decorable_multithread_iterator': ['DecorableMultithreadIterator'],
    'decorable_serial_iterator': ['DecorableSerialIterator'],
    'unmodifiable_decorable_list': ['UnmodifiableDecorableList'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.iterators.decorable_multiprocess_iterator import (
        DecorableMultiprocessIterator as DecorableMultiprocessIterator,
    )
    from researchutils.chainer.iterators.decorable_multithread_iterator import (
        DecorableMultithreadIterator as DecorableMultithreadIterator,
    )
    from researchutils.chainer.iterators.decorable_serial_iterator import (
        DecorableSerialIterator as DecorableSerialIterator,
    )
    from researchutils.chainer.iterators.unmodifiable_decorable_list import (
        UnmodifiableDecorableList as UnmodifiableDecorableList,
    )
