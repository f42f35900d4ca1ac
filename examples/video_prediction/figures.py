"""The demo's picture: ground truth above prediction, for several clips, k steps ahead."""
import os
import tempfile


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

    clips, k_step = truth.shape[:2]
    columns = k_step + (context_frame is not None)
    figure, axes = plt.subplots(2 * clips, columns, figsize=(1.1 * columns, 1.1 * 2 * clips),
                                squeeze=False)
    for clip in range(clips):
        for row, (label, frames) in enumerate((('truth', truth), ('prediction', prediction))):
            offset = 0
            ax_row = axes[2 * clip + row]
            if context_frame is not None:
                if row == 0:
                    ax_row[0].imshow(context_frame[clip], cmap='gray', vmin=0, vmax=1)
                else:
                    ax_row[0].set_frame_on(False)
                offset = 1
            for step in range(k_step):
                ax_row[offset + step].imshow(frames[clip, step], cmap='gray', vmin=0, vmax=1)
                if clip == 0 and row == 0:
                    ax_row[offset + step].set_title('t+{}'.format(step + 1), fontsize=8)
            ax_row[offset if row else 0].set_ylabel(label, fontsize=7)
    if context_frame is not None:
        axes[0][0].set_title('last seen', fontsize=8)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    figure.tight_layout(pad=0.3)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(suffix='.png', dir=folder)
    os.close(handle)
    try:
        figure.savefig(temporary, dpi=80)
        os.replace(temporary, path)
    finally:
        plt.close(figure)
        if os.path.exists(temporary):
            os.remove(temporary)
