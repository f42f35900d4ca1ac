"""The demo's clips (examples/video_prediction/bouncing_balls.py): balls pushed by actions."""
import doctest
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'examples', 'video_prediction'))

import bouncing_balls  # noqa: E402
from bouncing_balls import (  # noqa: E402
    ACTION_NAMES,
    FRAME_SIZE,
    PUSH,
    render_clip,
    render_pushed_clip,
)

NO_PUSH = ACTION_NAMES.index('none')


def _centroid(frame):
    """(y, x) centre of mass of a frame, in pixels (plain NumPy)."""
    grid = np.arange(frame.shape[0], dtype=np.float64)
    total = frame.sum()
    return np.array([(frame.sum(axis=1) * grid).sum() / total,
                     (frame.sum(axis=0) * grid).sum() / total])


def test_the_same_seed_gives_the_same_clip_and_actions():
    first_frames, first_actions = render_pushed_clip([5, 7, 11], 1)
    second_frames, second_actions = render_pushed_clip([7], 0)
    np.testing.assert_array_equal(first_frames, second_frames)
    np.testing.assert_array_equal(first_actions, second_actions)


def test_another_seed_gives_another_clip():
    first, _ = render_pushed_clip([7], 0)
    other, _ = render_pushed_clip([8], 0)
    assert not np.array_equal(first, other)


def test_shapes_dtypes_and_one_action_per_transition():
    frames, actions = render_pushed_clip([3], 0, n_frames=8)
    assert frames.shape == (8, FRAME_SIZE, FRAME_SIZE) and frames.dtype == np.float32
    assert actions.shape == (7,) and actions.dtype.kind == 'i'
    assert 0 <= frames.min() and frames.max() <= 1
    assert set(actions.tolist()) <= set(range(len(ACTION_NAMES)))


def test_actions_are_drawn_from_the_seed_and_vary():
    actions = np.concatenate([render_pushed_clip([seed], 0)[1] for seed in range(50)])
    counts = np.bincount(actions, minlength=len(ACTION_NAMES))
    assert (counts > 0).all(), counts


def test_actions_change_the_trajectory_but_not_the_start():
    drawn_frames, drawn_actions = render_pushed_clip([4], 0)
    still = np.full_like(drawn_actions, NO_PUSH)
    still_frames, _ = render_pushed_clip([4], 0, actions=still)
    np.testing.assert_array_equal(drawn_frames[0], still_frames[0])
    assert not np.array_equal(drawn_frames[1:], still_frames[1:])


@pytest.mark.parametrize('name, direction', [
    ('up', (-1, 0)), ('down', (1, 0)), ('left', (0, -1)), ('right', (0, 1))])
def test_a_push_moves_a_ball_by_push_pixels_in_its_direction(name, direction):
    checked = 0
    for seed in range(100):
        pushed, _ = render_pushed_clip([seed], 0, n_frames=2, n_balls=1,
                                       actions=[ACTION_NAMES.index(name)])
        still, _ = render_pushed_clip([seed], 0, n_frames=2, n_balls=1, actions=[NO_PUSH])
        pushed_at, still_at = _centroid(pushed[1]), _centroid(still[1])
        # Far from the walls a ball is a whole blob and no reflection happened.
        if min(pushed_at.min(), still_at.min()) < 5 or max(pushed_at.max(),
                                                          still_at.max()) > FRAME_SIZE - 6:
            continue
        checked += 1
        np.testing.assert_allclose(pushed_at - still_at, PUSH * np.array(direction),
                                   atol=0.05)
    assert checked >= 10


def test_without_pushes_the_balls_move_as_in_the_action_free_clips():
    frames, _ = render_pushed_clip([9], 0, n_frames=8, actions=[NO_PUSH] * 7)
    np.testing.assert_array_equal(frames, render_clip([9], 0, n_frames=8))


@pytest.mark.parametrize('actions, message', [
    ([0] * 6, 'actions must hold n_frames - 1 = 7'),
    ([0, 0, 0, 0, 0, 0, 9], 'actions must lie in'),
])
def test_bad_actions_are_refused(actions, message):
    with pytest.raises(ValueError, match=message):
        render_pushed_clip([1], 0, n_frames=8, actions=actions)


def test_the_docstring_examples_run():
    assert doctest.testmod(bouncing_balls).failed == 0
