"""chunk_bounds: contiguous chunks, none empty, sizes differing by at most one, larger first."""
import pytest

from researchutils._chunks import chunk_bounds


def _reference(size, parts):
    """Independently: deal the items one by one to the chunks in turn, then count."""
    parts = max(1, min(parts, size))
    sizes = [0] * parts
    for item in range(size):
        sizes[item % parts] += 1
    edges = [0]
    for count in sizes:
        edges.append(edges[-1] + count)
    return list(zip(edges[:-1], edges[1:]))


@pytest.mark.parametrize('size', [0, 1, 2, 5, 10, 11, 64])
@pytest.mark.parametrize('parts', [1, 2, 3, 4, 7, 100])
def test_chunks_cover_the_range_in_order_as_evenly_as_possible(size, parts):
    bounds = chunk_bounds(size, parts)
    assert bounds == _reference(size, parts)
    assert len(bounds) == max(1, min(parts, size))
    if size:
        assert all(stop > start for start, stop in bounds)


def test_ten_items_in_three_chunks_put_the_larger_chunk_first():
    # The data-parallel scatter's order (tests/chainer/models/test_scatter_gather.py).
    assert chunk_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]


def test_the_pool_the_threads_and_the_scatter_share_the_one_rule():
    from researchutils import _process_pool
    from researchutils.chainer.iterators import decorable_multithread_iterator
    from researchutils.chainer.models import _scatter_gather
    assert _process_pool.chunk_bounds is chunk_bounds
    assert decorable_multithread_iterator.chunk_bounds is chunk_bounds
    assert _scatter_gather.chunk_bounds is chunk_bounds
