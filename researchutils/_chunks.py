"""Contiguous chunks of ``range(size)``: how work is cut for workers, threads and devices.

One rule for the worker pool, the multithread iterator and the data-parallel scatter: at
most ``parts`` chunks, none empty (fewer chunks when ``size`` is smaller), sizes differing by
at most one, the larger ones first. Standard library only. Tests: ``tests/test_chunks.py``.
"""


def chunk_bounds(size: int, parts: int) -> list[tuple[int, int]]:
    """Splits ``range(size)`` into at most ``parts`` contiguous ``(start, stop)`` pairs.

    Args:
        size (int): How many items (0 gives one empty chunk).
        parts (int): The most chunks wanted (at least one is made).

    Returns:
        list of tuple: ``(start, stop)`` pairs covering ``range(size)`` in order; the first
        ``size % parts`` chunks hold one item more than the others.

    Example:
        >>> chunk_bounds(10, 3)
        [(0, 4), (4, 7), (7, 10)]
        >>> chunk_bounds(2, 5)
        [(0, 1), (1, 2)]
    """
    parts = max(1, min(parts, size))
    base, extra = divmod(size, parts)
    bounds, start = [], 0
    for index in range(parts):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds
