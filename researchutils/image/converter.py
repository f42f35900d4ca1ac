"""Axis order of images: height-width-color (matplotlib, Pillow) and color-height-width
(Chainer's convolutions). NumPy only."""
from __future__ import annotations

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ['hwc2chw', 'chw2hwc']

_Scalar = TypeVar('_Scalar', bound=np.generic)


def hwc2chw(image: NDArray[_Scalar]) -> NDArray[_Scalar]:
    """Moves the color axis of an image from last to first: ``(H, W, C)`` to ``(C, H, W)``.

    A batch ``(N, H, W, C)`` becomes ``(N, C, H, W)``.

    Args:
        image (numpy.ndarray): An image with 3 axes, or a batch of them with 4.

    Returns:
        numpy.ndarray: A view of ``image`` with the axes moved (no copy; use
        ``numpy.ascontiguousarray`` for a contiguous array).

    Raises:
        ValueError: ``image`` has neither 3 nor 4 axes.

    Example:

        >>> import numpy as np
        >>> from researchutils.image.converter import hwc2chw
        >>> hwc2chw(np.zeros((28, 20, 3))).shape
        (3, 28, 20)
    """
    return np.moveaxis(_checked(image), -1, -3)


def chw2hwc(image: NDArray[_Scalar]) -> NDArray[_Scalar]:
    """Moves the color axis of an image from first to last: ``(C, H, W)`` to ``(H, W, C)``.

    A batch ``(N, C, H, W)`` becomes ``(N, H, W, C)``.

    Args:
        image (numpy.ndarray): An image with 3 axes, or a batch of them with 4.

    Returns:
        numpy.ndarray: A view of ``image`` with the axes moved.

    Raises:
        ValueError: ``image`` has neither 3 nor 4 axes.

    Example:

        >>> import numpy as np
        >>> from researchutils.image.converter import chw2hwc
        >>> chw2hwc(np.zeros((3, 28, 20))).shape
        (28, 20, 3)
    """
    return np.moveaxis(_checked(image), -3, -1)


def _checked(image: NDArray[_Scalar]) -> NDArray[_Scalar]:
    image = np.asarray(image)
    if image.ndim not in (3, 4):
        raise ValueError('image must have 3 axes (or 4 for a batch), got shape {}'.format(
            image.shape))
    return image
