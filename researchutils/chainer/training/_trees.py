"""Nested dicts of parameters: copy, walk, merge (shared by parameters and model selection)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeAlias

#: Nested dicts of parameters: string keys; a value is a dict again or a leaf of any kind
#: (a number, a list of candidates, a class, a function, an array).
Tree: TypeAlias = dict[str, Any]
#: The keys from the top of a tree down to one value.
Path: TypeAlias = tuple[str, ...]


def copy_tree(tree: Tree) -> Tree:
    """Copies dicts and lists; leaves (classes, functions, numbers) are shared."""
    return {key: _copy_value(value) for key, value in tree.items()}


def _copy_value(value: object) -> object:
    """A dict or list copied as :func:`copy_tree` copies; any other value as it is."""
    if isinstance(value, dict):
        return copy_tree(value)
    if isinstance(value, list):
        return [_copy_value(item) for item in value]
    return value


def walk(tree: Tree, path: Path) -> Iterator[tuple[Path, Any]]:
    """Yields ``(path, value)`` for every key, inner dicts included."""
    for key, value in tree.items():
        yield path + (key,), value
        if isinstance(value, dict):
            yield from walk(value, path + (key,))


def leaves(tree: Tree, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Yields ``(path, value)`` for every value that is not a dict."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from leaves(value, path + (key,))
        else:
            yield path + (key,), value


def set_path(tree: Tree, path: Path, value: object) -> None:
    """Sets ``tree[path[0]][path[1]]... = value``, making the inner dicts it needs."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def merge(base: Tree, update: Tree) -> Tree:
    """A copy of ``base`` with every leaf of ``update`` set over it."""
    merged = copy_tree(base)
    for path, value in leaves(update):
        set_path(merged, path, value)
    return merged
