"""Preprocessing over many frames (NumPy only)."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from researchutils._checks import check_number_array

__all__ = ['compute_mean_image']


def compute_mean_image(frames: Iterable[ArrayLike]) -> NDArray[np.float32]:
    """Computes the pixel-wise mean of frames of one shape.

    Frames are read one at a time (a generator works, and needs memory for one
    frame only) and summed in float64, so many frames or frames of very different
    magnitudes lose no precision; the mean is returned in float32.

    Args:
        frames (iterable of numpy.ndarray): Frames, all of one shape, such as a
            list of ``(H, W, C)`` images or an array ``(N, H, W, C)``.

    Returns:
        numpy.ndarray: The mean frame, float32, of the frames' shape.

    Raises:
        ValueError: ``frames`` is empty, or a frame's shape differs from the first's.
        TypeError: ``frames`` is not iterable, or a frame is not numbers (strings).

    Example:

        >>> import numpy as np
        >>> from researchutils.image.preprocess import compute_mean_image
        >>> compute_mean_image([np.zeros((2, 2)), np.full((2, 2), 4, np.uint8)])
        array([[2., 2.],
               [2., 2.]], dtype=float32)
    """
    total = None
    count = 0
    if isinstance(frames, (str, bytes)) or not isinstance(frames, Iterable):
        raise TypeError('frames must be a list of frames or an array (N, ...), got {!r}'.format(
            frames))
    for frame in frames:
        frame = check_number_array(frame, 'frames[{}]'.format(count))
        if total is None:
            total = np.zeros(frame.shape, np.float64)
        elif frame.shape != total.shape:
            raise ValueError('frames[{}] has shape {}, frames[0] {}: all frames must have one '
                             'shape'.format(count, frame.shape, total.shape))
        total += frame
        count += 1
    if total is None:
        raise ValueError('frames is empty: there is no mean image of no frames')
    return (total / count).astype(np.float32)
