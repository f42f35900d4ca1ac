"""The demo's picture: ground truth above prediction, for several clips, k steps ahead.

The frames are laid out in one image shown on one set of axes: drawing a grid of 50 small
axes (and fitting their layout) took most of a short run's time, and the picture is the same.
"""
import numpy as np

from researchutils._files import write_atomically

# Pixels between two frames, and the value they show (mid grey, apart from the black and
# white of the balls and the background); the empty cell is the page's white.
GAP = 1
GAP_VALUE = 0.5
EMPTY_VALUE = 1.


def frames_mosaic(truth, prediction, context_frame=None):
    """The frames as one (rows, columns) image: for each clip a row of ground truth, then a
    row of prediction, frames side by side with a gap of ``GAP`` pixels between them.

    Args:
        truth (numpy.ndarray): (clips, k, H, W) true future frames.
        prediction (numpy.ndarray): (clips, k, H, W) predicted frames.
        context_frame (numpy.ndarray or None): (clips, H, W) last observed frame, in a first
            column of the truth rows when given (the prediction rows leave it white).

    Returns:
        numpy.ndarray: The image, float32 in [0, 1].
    """
    clips, k_step, height, width = truth.shape
    columns = k_step + (context_frame is not None)
    image = np.full((2 * clips * (height + GAP) - GAP, columns * (width + GAP) - GAP),
                    GAP_VALUE, np.float32)
    for clip in range(clips):
        for row, frames in enumerate((truth, prediction)):
            cells = list(frames[clip])
            if context_frame is not None:
                cells.insert(0, context_frame[clip] if row == 0 else EMPTY_VALUE)
            top = (2 * clip + row) * (height + GAP)
            for column, cell in enumerate(cells):
                left = column * (width + GAP)
                image[top:top + height, left:left + width] = cell
    return image


def save_frames_png(path, truth, prediction, context_frame=None):
    """Writes a grid of frames: for each clip a row of ground truth and a row of prediction.

    Args:
        path (str): Output PNG file; written atomically.
        truth (numpy.ndarray): (clips, k, H, W) true future frames.
        prediction (numpy.ndarray): (clips, k, H, W) predicted frames.
        context_frame (numpy.ndarray or None): (clips, H, W) last observed frame, shown in
            a first column when given.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    clips, k_step, height, width = truth.shape
    columns = k_step + (context_frame is not None)
    figure, axes = plt.subplots(figsize=(1.1 * columns, 1.1 * 2 * clips))
    axes.imshow(frames_mosaic(truth, prediction, context_frame), cmap='gray', vmin=0, vmax=1,
                interpolation='nearest')
    titles = ['t+{}'.format(step + 1) for step in range(k_step)]
    if context_frame is not None:
        titles.insert(0, 'last seen')
    axes.xaxis.tick_top()
    axes.set_xticks([column * (width + GAP) + (width - 1) / 2 for column in range(columns)],
                    titles, fontsize=8)
    axes.set_yticks([row * (height + GAP) + (height - 1) / 2 for row in range(2 * clips)],
                    ['truth', 'prediction'] * clips, fontsize=7)
    axes.tick_params(length=0)
    try:
        # The project's atomic writer: whole or not at all, and a mode that follows the
        # umask as the run's other files do (a mkstemp file would be 0600).
        write_atomically(path, lambda file: figure.savefig(
            file, format='png', dpi=80, bbox_inches='tight', pad_inches=0.05))
    finally:
        plt.close(figure)
