"""Action-free video predictor in the spirit of Oh et al. (2015): encode, recur, decode.

The network encodes each frame, advances a :class:`~researchutils.chainer.links.GradClipLSTM`
(derivative clipping on), and decodes the next frame. It first reads ``context`` real frames,
then predicts ``k_step`` frames, each from its own previous prediction.
"""
import chainer.functions as F
import chainer.links as L

from researchutils.chainer.functions import average_k_step_squared_error
from researchutils.chainer.links import GradClipLSTM
from researchutils.chainer.models import AbstractChainerNetwork


class VideoPredictor(AbstractChainerNetwork):
    """Frame predictor; ``forward(frames)`` returns ``{"pred": (B, k_step, H * W)}``.

    Args:
        frame_size (int): Height and width of the square frames.
        n_hidden (int): Width of the encoding and of the LSTM state.
        context (int): Real frames read before predicting.
        clip (float): Derivative-clipping bound of the LSTM's gate gradients.
    """

    def __init__(self, frame_size=16, n_hidden=256, context=3, clip=1.0):
        super().__init__(frame_size=frame_size, n_hidden=n_hidden, context=context,
                         clip=clip)
        self.n_pixels = frame_size * frame_size
        self.context = context
        # Steps predicted per forward pass; raised during training by a curriculum.
        self.k_step = 1
        with self.init_scope():
            self.encoder = L.Linear(self.n_pixels, n_hidden)
            self.lstm = GradClipLSTM(n_hidden, n_hidden, clip_min=-clip, clip_max=clip)
            self.decoder = L.Linear(n_hidden, self.n_pixels)

    def step(self, frame):
        """Reads one frame of shape (B, H * W) and returns the predicted next frame."""
        return F.sigmoid(self.decoder(self.lstm(F.relu(self.encoder(frame)))))

    def forward(self, frames, k_step=None):
        """Reads ``context`` frames of ``frames`` (B, T, H, W) and predicts ``k_step`` more.

        Args:
            frames: Array of shape ``(B, T, H, W)`` with ``T >= context``.
            k_step (int or None): Steps to predict; None uses :attr:`k_step`.

        Returns:
            dict: ``{"pred": Variable of shape (B, k_step, H * W)}``.
        """
        k_step = self.k_step if k_step is None else k_step
        self.lstm.reset_state()
        frames = F.reshape(frames, (len(frames), -1, self.n_pixels))
        observed = F.separate(frames[:, :self.context], axis=1)
        for frame in observed[:-1]:
            self.step(frame)
        frame = observed[-1]
        predictions = []
        for _ in range(k_step):
            frame = self.step(frame)
            predictions.append(frame)
        return {'pred': F.stack(predictions, axis=1)}


def k_step_loss(pred, future):
    """Average k-step squared error of ``pred`` (B, k, P) against the first k future frames."""
    k_step = pred.shape[1]
    future = F.reshape(future, (len(future), -1, pred.shape[2]))[:, :k_step]
    return average_k_step_squared_error(pred, future, k_step)


def repeat_last_frame_error(frames, context, k_step):
    """The k-step error of predicting that the last observed frame repeats (the baseline)."""
    import numpy as np
    frames = np.asarray(frames, np.float64).reshape(len(frames), frames.shape[1], -1)
    last = frames[:, context - 1:context]
    future = frames[:, context:context + k_step]
    return float(((future - last) ** 2).sum() / (2 * k_step) / len(frames))
