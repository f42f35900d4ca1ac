"""Nested dicts of parameters: copy, walk, merge (shared by parameters and model selection)."""


def copy_tree(tree):
    """Copies dicts and lists; leaves (classes, functions, numbers) are shared."""
    if isinstance(tree, dict):
        return {key: copy_tree(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [copy_tree(value) for value in tree]
    return tree


def walk(tree, path):
    """Yields ``(path, value)`` for every key, inner dicts included."""
    for key, value in tree.items():
        yield path + (key,), value
        if isinstance(value, dict):
            yield from walk(value, path + (key,))


def leaves(tree, path=()):
    """Yields ``(path, value)`` for every value that is not a dict."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from leaves(value, path + (key,))
        else:
            yield path + (key,), value


def set_path(tree, path, value):
    """Sets ``tree[path[0]][path[1]]... = value``, making the inner dicts it needs."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def merge(base, update):
    """A copy of ``base`` with every leaf of ``update`` set over it."""
    merged = copy_tree(base)
    for path, value in leaves(update):
        set_path(merged, path, value)
    return merged
