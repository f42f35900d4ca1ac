"""The order of validation scores: ``val_score_mode`` "lowest" or "highest" is best.

Shared by the experiment (grid search, the search) and its plug-in BestModelSaver, so it lives
beside both, in neither: a Trainer extension never imports the experiment's machinery. The
summaries write scores through :func:`score_for_json`. Tests:
``tests/chainer/training/test_scores.py``.
"""
from __future__ import annotations

import math

VAL_SCORE_MODES = ('lowest', 'highest')


def check_val_score_mode(mode: str, name: str = 'val_score_mode') -> str:
    """Returns ``mode`` when it is "lowest" or "highest"; a ValueError otherwise."""
    if mode not in VAL_SCORE_MODES:
        raise ValueError('{} must be "lowest" or "highest", got {!r}'.format(name, mode))
    return mode


def improves(mode: str, new: float, old: float) -> bool:
    """Whether score ``new`` beats ``old`` under ``mode`` ("lowest" or "highest")."""
    return new < old if mode == 'lowest' else new > old


def score_for_json(score: float | None) -> float | None:
    """A score as the summaries write it: None (``null``) for none, NaN or an infinity."""
    return None if score is None or not math.isfinite(score) else score
