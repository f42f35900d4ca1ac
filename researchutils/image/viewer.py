"""Show images and animations with matplotlib; where there is no display, save them.

Needs matplotlib (``pip install researchutils[plot]``). GIFs need nothing more
(matplotlib brings Pillow); MP4s need the ``ffmpeg`` program.

Each function draws into a figure of its own and closes it when done. Where
matplotlib has a display (a window backend, or a notebook), figures are shown as
in the original researchutils. Without one (on a server matplotlib falls back to
its Agg backend), showing would do nothing, so a figure that was not saved
otherwise is saved into the current folder, under ``figure.png`` for images and
``anim.gif`` for animations, or ``figure-1.png``, ``anim-1.gif``, ... when the name
is taken (nothing is ever replaced), and a ``UserWarning`` gives the path. Each
function returns what it saved.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from researchutils import _figures
from researchutils._checks import check_bool, check_str
from researchutils._typing import SavePath

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.image import AxesImage

_figures.import_matplotlib('researchutils.image.viewer')

__all__ = ['show_image', 'show_images', 'animate', 'animate_in_matrix_form']

# One title for each video: a str (shown with the frame number) or one str per frame.
_Titles = str | Sequence[str | Sequence[str]]


def show_image(image: ArrayLike, title: str = '', is_gray: bool = False, *,
               save_path: SavePath = None) -> str | None:
    """Shows one image, or saves it where there is no display.

    Args:
        image (numpy.ndarray): ``(H, W)`` (drawn with a color map, gray with
            ``is_gray``), ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA; floats in
            ``[0, 1]`` or integers in ``[0, 255]`` for color images.
        title (str): The title above the image.
        is_gray (bool): Draw an ``(H, W)`` image in gray levels.
        save_path (str or bool): Also save the figure to this file, in the format
            its extension names (``.png``, ``.pdf``, ``.svg``, ...), replacing it;
            True saves to a new ``figure.png`` in the current folder.

    Returns:
        str or None: The file saved, or None when the image was only shown.

    Raises:
        ValueError: ``image`` is not an image (a 0 x 0 array included), or
            ``save_path`` has an extension matplotlib cannot write.
        TypeError: ``title`` is not a str or ``is_gray`` not a bool.
        FileNotFoundError: The folder of ``save_path`` does not exist.

    Example:

        >>> import os, tempfile
        >>> import numpy as np
        >>> from researchutils.image import viewer
        >>> path = os.path.join(tempfile.mkdtemp(), 'noise.png')
        >>> viewer.show_image(np.random.rand(28, 28), title='noise', is_gray=True,
        ...                   save_path=path) == path
        True
    """
    return show_images([image], title=title, is_gray=is_gray, save_path=save_path)


def show_images(images: Iterable[ArrayLike], title: str = '',
                comparisons: Iterable[ArrayLike] | None = None, comparison_title: str = '',
                is_gray: bool = False, vertical: bool = False, *,
                save_path: SavePath = None) -> str | None:
    """Shows images in a row, and comparison images in a second row below them.

    Args:
        images (list of numpy.ndarray): The images (see :func:`show_image`).
        title (str): Their title; with more than one image each title ends with the
            image's index (``'input 0'``, ``'input 1'``, ...).
        comparisons (list of numpy.ndarray): Images to show below them, such as
            predictions under the ground truth.
        comparison_title (str): The comparisons' title, numbered in the same way.
        is_gray (bool): Draw ``(H, W)`` images in gray levels.
        vertical (bool): Lay the images out in a column, with the comparisons in a
            second column to the right.
        save_path (str or bool): As in :func:`show_image`.

    Returns:
        str or None: The file saved, or None when the images were only shown.

    Raises:
        ValueError: ``images`` is empty or holds something that is not an image,
            or ``comparisons`` holds more images than ``images``.
        TypeError: ``images`` or ``comparisons`` is not a list of images, a title
            is not a str, or ``is_gray`` or ``vertical`` is not a bool.

    Example:

        >>> import os, tempfile
        >>> import numpy as np
        >>> from researchutils.image import viewer
        >>> truth = [np.zeros((8, 8, 3)), np.ones((8, 8, 3))]
        >>> prediction = [np.full((8, 8, 3), 0.1), np.full((8, 8, 3), 0.9)]
        >>> path = os.path.join(tempfile.mkdtemp(), 'compare.png')
        >>> viewer.show_images(truth, 'truth', prediction, 'prediction',
        ...                    save_path=path) == path
        True
    """
    images = _images('images', images)
    comparisons = [] if comparisons is None else _images('comparisons', comparisons,
                                                         allow_empty=True)
    if len(comparisons) > len(images):
        raise ValueError('comparisons must hold at most one image per image ({}), got {}: each '
                         'comparison is shown under its image'.format(len(images),
                                                                     len(comparisons)))
    title = check_str(title, 'title')
    comparison_title = check_str(comparison_title, 'comparison_title')
    is_gray = check_bool(is_gray, 'is_gray')
    vertical = check_bool(vertical, 'vertical')
    save_path = _figures.check_save_path('save_path', save_path,
                                           _figures.figure_extensions())
    plt = _figures.pyplot()
    rows, columns = (2 if comparisons else 1), max(len(images), len(comparisons))
    if vertical:
        rows, columns = columns, rows
    figure = plt.figure()
    try:
        for row, (group, group_title) in enumerate([(images, title),
                                                     (comparisons, comparison_title)]):
            for position, image in enumerate(group):
                index = position * columns + row + 1 if vertical else row * columns + position + 1
                axes = figure.add_subplot(rows, columns, index)
                _draw(axes, image, is_gray)
                axes.set_title(group_title if len(group) == 1 else
                               '{} {}'.format(group_title, position))
        saved = _figures.save_figure(figure, save_path, 'figure.png') if save_path else None
        if _figures.has_display():
            plt.show()
        elif saved is None:
            saved = _figures.save_figure(figure, True, 'figure.png')
            _figures.warn_saved_without_display('figure', saved)
        return saved
    finally:
        plt.close(figure)


def animate(images: ArrayLike, comparisons: ArrayLike | None = None,
            titles: _Titles | None = None, is_gray: bool = False, fps: float = 15,
            repeat: bool = False, save_gif: SavePath = False, save_mp4: SavePath = False,
            auto_close: bool = False) -> list[str]:
    """Plays a video, optionally beside comparison videos, or saves it as a GIF.

    Args:
        images (list of numpy.ndarray): The video: frames of one shape, ``(H, W)``,
            ``(H, W, 3)`` or ``(H, W, 4)``, or one array ``(T, H, W[, C])``.
        comparisons (numpy.ndarray or list): One video of the same kind to play to its
            right, or a list of such videos, played side by side, all with the same number
            of frames.
        titles (list): One title per video, in order: a str (shown with the frame
            number) or a list with one title per frame.
        is_gray (bool): Draw ``(H, W)`` frames in gray levels. Each ``(H, W)`` video
            is drawn on one scale, from its smallest to its largest value.
        fps (float): Frames per second, when played and in the files saved.
        repeat (bool): Start over at the end, when shown in a window.
        save_gif (bool or str): Save a GIF (Pillow, which matplotlib brings): True
            saves to a new ``anim.gif`` in the current folder (the original's name),
            a path ending in ``.gif`` saves there, replacing the file.
        save_mp4 (bool or str): Save an MP4 in the same way (``anim.mp4``); needs
            the ``ffmpeg`` program.
        auto_close (bool): On a display, play the animation once without blocking,
            then close its window.

    Returns:
        list of str: The files saved (empty when the animation was only shown).

    Raises:
        ValueError: A video is not a sequence of images, the videos differ in
            length, or an argument is out of range.
        TypeError: A title is not a str, or a flag (``is_gray``, ``repeat``,
            ``auto_close``) is not a bool.
        RuntimeError: ``save_mp4`` was asked for and ffmpeg is missing (raised
            before anything is drawn or saved).

    Example:

        >>> import os, tempfile
        >>> import numpy as np
        >>> from researchutils.image import viewer
        >>> truth = np.random.rand(10, 16, 16)
        >>> prediction = truth + 0.1 * np.random.rand(10, 16, 16)
        >>> path = os.path.join(tempfile.mkdtemp(), 'clip.gif')
        >>> viewer.animate(truth, prediction, titles=['truth', 'prediction'], is_gray=True,
        ...                save_gif=path) == [path]
        True
    """
    video = _video_array(images)
    videos = [video]
    if comparisons is not None:
        if (isinstance(comparisons, (list, tuple)) and len(comparisons) > 0
                and np.ndim(comparisons[0]) == video.ndim):
            videos.extend(comparisons)
        else:
            stacked = np.asarray(comparisons)
            if stacked.ndim == video.ndim:
                videos.append(stacked)
            elif stacked.ndim == video.ndim + 1:
                videos.extend(stacked)
            else:
                raise ValueError(
                    'comparisons must be one video shaped like images {} or a list of them, '
                    'got shape {}'.format(video.shape, stacked.shape))
    return animate_in_matrix_form(videos, titles=titles, is_gray=is_gray, fps=fps,
                                  images_per_row=len(videos), repeat=repeat,
                                  save_gif=save_gif, save_mp4=save_mp4, auto_close=auto_close)


def animate_in_matrix_form(images: Iterable[ArrayLike] | None = None,
                           titles: _Titles | None = None, is_gray: bool = False,
                           fps: float = 15, images_per_row: int | None = None,
                           repeat: bool = False, save_gif: SavePath = False,
                           save_mp4: SavePath = False, auto_close: bool = False,
                           remove_axis: bool = False) -> list[str]:
    """Plays several videos at once in a grid, row by row, or saves them as one GIF.

    Args:
        images (list): The videos, each as in :func:`animate`, all with the same
            number of frames (their frame sizes may differ).
        titles (list): One title per video, as in :func:`animate`.
        is_gray (bool): Draw ``(H, W)`` frames in gray levels.
        fps (float): Frames per second.
        images_per_row (int): Videos per row; None puts all in one row.
        repeat (bool): Start over at the end, when shown in a window.
        save_gif (bool or str): As in :func:`animate`.
        save_mp4 (bool or str): As in :func:`animate`.
        auto_close (bool): As in :func:`animate`.
        remove_axis (bool): Hide the axes and their ticks.

    Returns:
        list of str: The files saved.

    Raises:
        ValueError: ``images`` is missing or empty, a video is not a sequence of
            images, the videos differ in length, or an argument is out of range.
        TypeError: A title is not a str, or a flag is not a bool.
        RuntimeError: ``save_mp4`` was asked for and ffmpeg is missing.

    Example:

        >>> import os, tempfile
        >>> import numpy as np
        >>> from researchutils.image import viewer
        >>> videos = [np.random.rand(5, 8, 8, 3) for _ in range(4)]
        >>> path = os.path.join(tempfile.mkdtemp(), 'grid.gif')
        >>> viewer.animate_in_matrix_form(videos, images_per_row=2, remove_axis=True,
        ...                               save_gif=path) == [path]
        True
    """
    videos = _videos(images)
    is_gray = check_bool(is_gray, 'is_gray')
    repeat = check_bool(repeat, 'repeat')
    auto_close = check_bool(auto_close, 'auto_close')
    remove_axis = check_bool(remove_axis, 'remove_axis')
    frame_count = len(videos[0])
    titles = _titles(titles, len(videos), frame_count)
    fps = _positive_number('fps', fps)
    per_row = _images_per_row(images_per_row, len(videos))
    save_gif = _figures.check_save_path('save_gif', save_gif, ('.gif',))
    save_mp4 = _figures.check_save_path('save_mp4', save_mp4, ('.mp4',))
    from matplotlib import animation
    if save_mp4 and not animation.writers.is_available('ffmpeg'):
        import matplotlib
        raise RuntimeError(
            'save_mp4 needs the ffmpeg program, which matplotlib did not find '
            '(rcParams["animation.ffmpeg_path"] = {!r}): install ffmpeg (Debian/Ubuntu: '
            'apt-get install ffmpeg; conda: conda install ffmpeg), or save a GIF with '
            'save_gif, which needs only Pillow'.format(
                matplotlib.rcParams['animation.ffmpeg_path']))
    plt = _figures.pyplot()
    figure = plt.figure()
    try:
        rows = int(math.ceil(len(videos) / per_row))
        pictures, all_axes = [], []
        for index, video in enumerate(videos):
            axes = figure.add_subplot(rows, per_row, index + 1)
            if remove_axis:
                axes.axis('off')
            scale = {'vmin': video.min(), 'vmax': video.max()} if video.ndim == 3 else {}
            pictures.append(_draw(axes, video[0], is_gray, **scale))
            all_axes.append(axes)

        def update(frame: int) -> list[AxesImage]:
            for picture, video in zip(pictures, videos):
                picture.set_data(video[frame])
            for axes, title in zip(all_axes, titles):
                axes.set_title(title[frame] if isinstance(title, (list, tuple)) else
                               '{} frame: {}'.format(title, frame))
            return pictures

        update(0)
        movie = animation.FuncAnimation(figure, update, frames=frame_count,
                                        interval=1000.0 / fps, repeat=repeat)
        saved = []
        if save_gif:
            saved.append(_figures.publish(
                _figures.animation_bytes(movie, 'gif', animation.PillowWriter(fps=fps)),
                save_gif, 'anim.gif'))
        if save_mp4:
            saved.append(_figures.publish(
                _figures.animation_bytes(movie, 'mp4',
                                         animation.FFMpegWriter(fps=fps, bitrate=1800)),
                save_mp4, 'anim.mp4'))
        if _figures.has_display():
            if auto_close:
                plt.show(block=False)
                plt.pause(frame_count / fps)
            else:
                plt.show()
        elif not saved:
            path = _figures.publish(
                _figures.animation_bytes(movie, 'gif', animation.PillowWriter(fps=fps)),
                True, 'anim.gif')
            _figures.warn_saved_without_display('animation', path)
            saved.append(path)
        return saved
    finally:
        plt.close(figure)


def _draw(axes: Axes, image: NDArray[Any], is_gray: bool, **scale: Any) -> AxesImage:
    return axes.imshow(image, cmap='gray' if is_gray else None, **scale)


_IMAGE_SHAPES = '(H, W), (H, W, 3) or (H, W, 4) with H, W >= 1'


def _is_image(array: NDArray[Any]) -> bool:
    """The one rule for what an image (or a video's frame) is: drawable, so not 0 x 0."""
    return ((array.ndim == 2 or (array.ndim == 3 and array.shape[-1] in (3, 4)))
            and array.shape[0] > 0 and array.shape[1] > 0)


def _video_array(video: ArrayLike) -> NDArray[Any]:
    try:
        return np.asarray(video)
    except ValueError:  # frames of several shapes (NumPy >= 1.24)
        raise ValueError('images must be a video: frames of one shape, {}'.format(
            _IMAGE_SHAPES)) from None


def _images(name: str, images: Iterable[ArrayLike],
            allow_empty: bool = False) -> list[NDArray[Any]]:
    if isinstance(images, (str, bytes)) or not isinstance(images, Iterable):
        raise TypeError('{} must be a list of images, got {!r}'.format(name, images))
    arrays = [np.asarray(image) for image in images]
    if not arrays and not allow_empty:
        raise ValueError('{} is empty: there is nothing to show'.format(name))
    for index, array in enumerate(arrays):
        if not _is_image(array):
            raise ValueError('{}[{}] must be an image {}, got shape {}'.format(
                name, index, _IMAGE_SHAPES, array.shape))
    return arrays


def _videos(images: Iterable[ArrayLike] | None) -> list[NDArray[Any]]:
    if images is None:
        raise ValueError('images is required: a list of videos, each a sequence of frames')
    if isinstance(images, (str, bytes)) or not isinstance(images, Iterable):
        raise TypeError('images must be a list of videos, got {!r}'.format(images))
    videos = [np.asarray(video) for video in images]
    if not videos:
        raise ValueError('images is empty: there is no video to animate')
    for index, video in enumerate(videos):
        if video.ndim < 3 or len(video) == 0 or not _is_image(video[0]):
            raise ValueError('images[{}] must be a video: frames {}, at least one; got '
                             'shape {}'.format(index, _IMAGE_SHAPES, video.shape))
        if len(video) != len(videos[0]):
            raise ValueError('images[{}] has {} frames, images[0] {}: the videos must have '
                             'one length'.format(index, len(video), len(videos[0])))
    return videos


def _titles(titles: _Titles | None, video_count: int,
            frame_count: int) -> list[str | Sequence[str]]:
    if titles is None:
        return []
    if isinstance(titles, str):
        titles = [titles]
    if not isinstance(titles, Iterable):
        raise TypeError('titles must be a str or a list of them, got {!r}'.format(titles))
    titles = list(titles)
    if len(titles) > video_count:
        raise ValueError('titles has {} titles for {} videos'.format(len(titles), video_count))
    for index, title in enumerate(titles):
        if not isinstance(title, (str, list, tuple)) or (
                isinstance(title, (list, tuple))
                and not all(isinstance(text, str) for text in title)):
            raise TypeError('titles[{}] must be a str or a list of them, got {!r}'.format(
                index, title))
        if isinstance(title, (list, tuple)) and len(title) != frame_count:
            raise ValueError('titles[{}] has {} titles for {} frames: give one per frame, or '
                             'one str'.format(index, len(title), frame_count))
    return titles


def _positive_number(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError('{} must be a positive number, got {!r}'.format(name, value))
    if not 0 < value < math.inf:
        raise ValueError('{} must be a positive number, got {!r}'.format(name, value))
    return value


def _images_per_row(images_per_row: int | None, video_count: int) -> int:
    if images_per_row is None:
        return video_count
    if isinstance(images_per_row, bool) or not isinstance(images_per_row, numbers.Integral) \
            or images_per_row < 1:
        raise ValueError('images_per_row must be None or a positive integer, got {!r}'.format(
            images_per_row))
    return min(int(images_per_row), video_count)

