"""Which process of a ChainerMN job writes, posts and asks: the one rule "is this rank 0".

Every piece that runs on several ranks but acts on one (SlackReport, the experiment's files,
the search's study, the pruning decision) asks :func:`is_rank_zero`, so the rule is written
once. Without ChainerMN (``comm`` None) the one process is rank 0. Tests:
``tests/chainer/training/test_ranks.py``.
"""
from typing import Any


def is_rank_zero(comm: Any) -> bool:
    """Whether this process is rank 0 of ``comm``; always True without ChainerMN (None).

    Args:
        comm: A ChainerMN communicator (anything with ``rank``), or None.

    Example:
        >>> is_rank_zero(None)
        True
    """
    return comm is None or bool(comm.rank == 0)
