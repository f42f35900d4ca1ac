"""How train.py --actions lays out a pushed clip for the network, and mirrors its actions."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'examples', 'video_prediction'))

import train  # noqa: E402
from bouncing_balls import ACTION_NAMES, FRAME_SIZE, render_pushed_clip  # noqa: E402

PIXELS = FRAME_SIZE * FRAME_SIZE


def _swapped(first, second):
    names = list(ACTION_NAMES)
    i, j = names.index(first), names.index(second)
    names[i], names[j] = names[j], names[i]
    return [ACTION_NAMES.index(name) for name in names]


def test_mirroring_left_to_right_swaps_the_left_and_right_pushes():
    assert train.MIRRORED_ACTION_X.tolist() == _swapped('left', 'right')


def test_mirroring_top_to_bottom_swaps_the_up_and_down_pushes():
    assert train.MIRRORED_ACTION_Y.tolist() == _swapped('up', 'down')


def test_steps_hold_the_observed_frames_then_zeros_and_each_action_one_hot():
    frames, actions = render_pushed_clip([12], 0, n_frames=train.CONTEXT + train.MAX_K_STEP)
    example = train.steps_example(frames, actions)
    steps = example['data']
    assert steps.shape == (len(actions), PIXELS + len(ACTION_NAMES))
    np.testing.assert_array_equal(steps[:train.CONTEXT, :PIXELS],
                                  frames[:train.CONTEXT].reshape(train.CONTEXT, -1))
    assert not steps[train.CONTEXT:, :PIXELS].any()
    np.testing.assert_array_equal(steps[:, PIXELS:], np.eye(len(ACTION_NAMES))[actions])
    np.testing.assert_array_equal(example['label'], frames[train.CONTEXT:])
    np.testing.assert_array_equal(train.last_frames_of_steps(steps[None])[0],
                                  frames[train.CONTEXT - 1])
