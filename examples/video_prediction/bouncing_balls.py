"""Procedural "bouncing balls" videos: every clip is a function of its seed alone.

Nothing is downloaded: a clip is rendered on the fly from its seed by
:func:`render_clip`, which has the ``decor_fun(dataset, index)`` signature of the
decorable iterators, so a dataset of seeds plus this function is a video dataset.
:func:`render_pushed_clip` renders the action-conditioned variant: at each move, an
action drawn from the same seed pushes every ball.
"""
import numpy as np

FRAME_SIZE = 16
BALL_SIGMA = 1.2
MARGIN = 2.0
# The actions, in the order of their one-hot index, and the direction (dy, dx) of each push.
ACTION_NAMES = ('none', 'up', 'down', 'left', 'right')
ACTION_DIRECTIONS = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], np.float64)
# Pixels that a push moves every ball, on top of the ball's own velocity, in one frame.
PUSH = 2.0


def _start(seeds, index, n_balls, size):
    """The clip's random generator and its balls' first positions and velocities."""
    rng = np.random.RandomState(int(seeds[index]) % (2 ** 32))
    position = rng.uniform(MARGIN, size - 1 - MARGIN, (n_balls, 2))
    angle = rng.uniform(0, 2 * np.pi, n_balls)
    speed = rng.uniform(0.8, 1.6, n_balls)
    velocity = np.stack([np.cos(angle), np.sin(angle)], axis=1) * speed[:, None]
    return rng, position, velocity


def _draw(position, size):
    """One frame: a Gaussian blob per ball, saturating at 1."""
    grid = np.arange(size, dtype=np.float64)
    dy = (grid[None, :, None] - position[:, 0, None, None]) ** 2
    dx = (grid[None, None, :] - position[:, 1, None, None]) ** 2
    blobs = np.exp(-(dy + dx) / (2 * BALL_SIGMA ** 2))
    return np.minimum(blobs.sum(axis=0), 1.0)


def _move(position, velocity, size, push=0.0):
    """Advances the balls by one frame in place, reflecting them off the walls."""
    low, high = MARGIN - 1, size - MARGIN
    position += velocity + push
    below, above = position < low, position > high
    position[below] = 2 * low - position[below]
    position[above] = 2 * high - position[above]
    velocity[below | above] *= -1


def render_clip(seeds, index, n_frames=8, n_balls=2, size=FRAME_SIZE):
    """Renders clip ``index`` of ``seeds`` as float32 frames of shape (n_frames, size, size).

    Balls move at constant speed and bounce off the walls; pixel values lie in [0, 1].

    Args:
        seeds (sequence of int): One seed per clip.
        index (int): Which clip.
        n_frames (int): Frames per clip.
        n_balls (int): Balls per clip.
        size (int): Frame height and width in pixels.

    Returns:
        numpy.ndarray: float32 array of shape ``(n_frames, size, size)``.
    """
    _, position, velocity = _start(seeds, index, n_balls, size)
    frames = np.empty((n_frames, size, size), np.float32)
    for t in range(n_frames):
        frames[t] = _draw(position, size)
        _move(position, velocity, size)
    return frames


def render_pushed_clip(seeds, index, n_frames=8, n_balls=2, size=FRAME_SIZE,
                       actions=None):
    """Renders clip ``index`` of ``seeds``, the balls pushed by an action at every frame.

    The balls start as in :func:`render_clip`. Between frames ``t`` and ``t + 1`` action
    ``actions[t]`` pushes every ball ``PUSH`` pixels in its direction (``ACTION_NAMES``:
    none, up, down, left, right), on top of the ball's own constant velocity; the balls
    bounce off the walls as before. Frame ``t + 1`` therefore depends on the action taken
    at frame ``t``, which the frames up to ``t`` do not tell. The actions are drawn
    uniformly from the clip's seed unless given, so a clip is a function of its seed.

    Args:
        seeds (sequence of int): One seed per clip.
        index (int): Which clip.
        n_frames (int): Frames per clip.
        n_balls (int): Balls per clip.
        size (int): Frame height and width in pixels.
        actions (sequence of int or None): ``n_frames - 1`` action indices, one per
            transition; None draws them from the seed.

    Returns:
        tuple: float32 frames of shape ``(n_frames, size, size)`` with values in [0, 1],
        and the int64 actions of shape ``(n_frames - 1,)``.

    Raises:
        ValueError: ``actions`` of the wrong length or outside ``[0, len(ACTION_NAMES))``.

    Example:
        >>> frames, actions = render_pushed_clip([7], 0, n_frames=8)
        >>> frames.shape, actions.shape
        ((8, 16, 16), (7,))
    """
    rng, position, velocity = _start(seeds, index, n_balls, size)
    if actions is None:
        actions = rng.randint(len(ACTION_NAMES), size=n_frames - 1)
    actions = np.asarray(actions, np.int64)
    if actions.shape != (n_frames - 1,):
        raise ValueError('actions must hold n_frames - 1 = {} action indices, got '
                         'shape {}'.format(n_frames - 1, actions.shape))
    if len(actions) and not (0 <= actions.min() and actions.max() < len(ACTION_NAMES)):
        raise ValueError('actions must lie in [0, {}), got {}'.format(
            len(ACTION_NAMES), actions.tolist()))
    frames = np.empty((n_frames, size, size), np.float32)
    frames[0] = _draw(position, size)
    for t, action in enumerate(actions, 1):
        _move(position, velocity, size, push=PUSH * ACTION_DIRECTIONS[action])
        frames[t] = _draw(position, size)
    return frames, actions
