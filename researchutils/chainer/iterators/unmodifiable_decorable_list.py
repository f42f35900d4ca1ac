"""A read-only, lazily decorated view of the first ``end_index`` items of a dataset."""
from __future__ import annotations

import collections.abc
import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex, overload

from researchutils._checks import check_int

if TYPE_CHECKING:  # for the annotations only: the decorable iterators take these too
    from typing import Protocol, TypeAlias

    class Dataset(Protocol):
        """What a dataset must offer: ``len`` and integer indexing (a list, an array,
        a ``chainer.dataset.DatasetMixin``)."""

        def __len__(self) -> int: ...

        def __getitem__(self, index: int, /) -> Any: ...

    #: ``decor_fun(dataset, index)``: the example at ``index`` of the dataset given.
    DecorFun: TypeAlias = Callable[[Any, int], Any]


def _check_end_index(end_index: int | None, size: int) -> int:
    """Returns the number of items seen: ``size`` or a valid ``end_index``.

    Raises:
        ValueError: ``end_index`` is not None and not an integer in ``1..size``.
    """
    if end_index is None:
        return size
    # ValueError for every bad end_index, as before _checks existed.
    return check_int(end_index, 'end_index (up to the length of the dataset)', minimum=1,
                     maximum=size, type_error=ValueError)


def _unmodifiable(name: str) -> Callable[..., NoReturn]:
    def method(self: UnmodifiableDecorableList, *args: object, **kwargs: object) -> NoReturn:
        raise NotImplementedError(
            'UnmodifiableDecorableList is read-only: {}() is not supported'.format(name))
    method.__name__ = name
    method.__doc__ = 'Raises NotImplementedError: the list is read-only.'
    return method


class UnmodifiableDecorableList(collections.abc.Sequence[Any]):
    """Read-only sequence over the first ``end_index`` items, each decorated on access.

    Item ``i`` is ``decor_fun(items, i)``, or ``items[i]`` without ``decor_fun``;
    it is computed when it is read, never stored. Construction neither copies nor
    walks ``items`` (only ``len(items)`` is called), so the list costs O(1) even
    over a lazy dataset of 10**8 items.

    It supports ``len``, integer indexing (negative indices count back from
    ``end_index``; an index outside ``-end_index..end_index-1`` raises
    :class:`IndexError`), slices with any start, stop and step (they return a
    list), iteration, ``reversed``, ``in``, :meth:`index` and :meth:`count`,
    all over the decorated items. The methods that would modify a list
    (``insert``, ``remove``, ``append``, ``extend``, ``sort``, ``pop``,
    ``reverse``, ``clear``) raise :class:`NotImplementedError`; item assignment
    and deletion raise :class:`TypeError`.

    Args:
        items: The underlying dataset: anything with ``len`` and integer
            indexing, e.g. a list, an array or a :class:`chainer.dataset.DatasetMixin`.
        decor_fun (callable): ``decor_fun(items, index)`` returns the item at
            ``index``, e.g. a stack of the frames before ``index``. ``None``
            means ``items[index]``.
        end_index (int): Only the first ``end_index`` items are seen: an
            integer in ``1..len(items)``, or ``None`` for all of them.

    Raises:
        TypeError: ``items`` has no length or ``decor_fun`` is not callable.
        ValueError: ``end_index`` is out of range.

    .. admonition:: Example

        >>> frames = list(range(10))
        >>> def previous_two(dataset, index):
        ...     return [dataset[max(index - 1, 0)], dataset[index]]
        >>> lst = UnmodifiableDecorableList(frames, previous_two, end_index=4)
        >>> len(lst)
        4
        >>> lst[-1]
        [2, 3]
        >>> lst[::2]
        [[0, 0], [1, 2]]
    """

    def __init__(self, items: Dataset, decor_fun: DecorFun | None = None,
                 end_index: int | None = None) -> None:
        try:
            size = len(items)
        except TypeError:
            raise TypeError('items must be a dataset with a length, not {!r}'.format(
                type(items).__name__)) from None
        if decor_fun is not None and not callable(decor_fun):
            raise TypeError('decor_fun must be callable or None, not {!r}'.format(decor_fun))
        self.items = items
        self.decor_fun = decor_fun
        self._length = _check_end_index(end_index, size)

    @property
    def end_index(self) -> int:
        """int: How many items the list shows (the dataset's length when none was given).

        Read-only: a list over another range is a new list.
        """
        return self._length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, key: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, key: slice) -> list[Any]: ...

    def __getitem__(self, key: SupportsIndex | slice) -> Any:
        if isinstance(key, slice):
            return [self._get(index) for index in range(self._length)[key]]
        try:
            index = operator.index(key)
        except TypeError:
            raise TypeError('UnmodifiableDecorableList indices must be integers or slices, '
                            'not {}'.format(type(key).__name__)) from None
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError('index {} is out of range for an UnmodifiableDecorableList of '
                             'length {}'.format(key, self._length))
        return self._get(index)

    def __iter__(self) -> Iterator[Any]:
        for index in range(self._length):
            yield self._get(index)

    def __reversed__(self) -> Iterator[Any]:
        for index in reversed(range(self._length)):
            yield self._get(index)

    def __repr__(self) -> str:
        return 'UnmodifiableDecorableList(<{} of {} items>, decor_fun={!r}, end_index={!r})'.format(
            type(self.items).__name__, self._length, self.decor_fun, self.end_index)

    def _get(self, index: int) -> Any:
        # ``index`` is already in range.
        if self.decor_fun is None:
            return self.items[index]
        return self.decor_fun(self.items, index)

    insert = _unmodifiable('insert')
    remove = _unmodifiable('remove')
    append = _unmodifiable('append')
    extend = _unmodifiable('extend')
    sort = _unmodifiable('sort')
    pop = _unmodifiable('pop')
    reverse = _unmodifiable('reverse')
    clear = _unmodifiable('clear')

    def __setitem__(self, key: object, value: object) -> NoReturn:
        raise TypeError('UnmodifiableDecorableList does not support item assignment')

    def __delitem__(self, key: object) -> NoReturn:
        raise TypeError('UnmodifiableDecorableList does not support item deletion')
