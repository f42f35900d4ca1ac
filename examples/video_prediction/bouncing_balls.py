"""Procedural "bouncing balls" videos: every clip is a function of its seed alone.

Nothing is downloaded: a clip is rendered on the fly from its seed by
:func:`render_clip`, which has the ``decor_fun(dataset, index)`` signature of the
decorable iterators, so a dataset of seeds plus this function is a video dataset.
"""
import numpy as np

FRAME_SIZE = 16
BALL_SIGMA = 1.2


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
    rng = np.random.RandomState(int(seeds[index]) % (2 ** 32))
    margin = 2.0
    position = rng.uniform(margin, size - 1 - margin, (n_balls, 2))
    angle = rng.uniform(0, 2 * np.pi, n_balls)
    speed = rng.uniform(0.8, 1.6, n_balls)
    velocity = np.stack([np.cos(angle), np.sin(angle)], axis=1) * speed[:, None]
    grid = np.arange(size, dtype=np.float64)
    frames = np.empty((n_frames, size, size), np.float32)
    low, high = margin - 1, size - margin
    for t in range(n_frames):
        dy = (grid[None, :, None] - position[:, 0, None, None]) ** 2
        dx = (grid[None, None, :] - position[:, 1, None, None]) ** 2
        blobs = np.exp(-(dy + dx) / (2 * BALL_SIGMA ** 2))
        frames[t] = np.minimum(blobs.sum(axis=0), 1.0)
        position += velocity
        # Reflect off the walls.
        below, above = position < low, position > high
        position[below] = 2 * low - position[below]
        position[above] = 2 * high - position[above]
        velocity[below | above] *= -1
    return frames
