"""Video predictors in the spirit of Oh et al. (2015): encode, recur, decode.

:class:`VideoPredictor` (action-free) encodes each frame, advances a
:class:`~researchutils.chainer.links.GradClipLSTM` (derivative clipping on), and decodes the
next frame. It first reads ``context`` real frames, then predicts ``k_step`` frames, each
from its own previous prediction. :class:`ActionConditionedVideoPredictor` does the same
with the action taken at each frame fused into the recurrence
(:class:`~researchutils.chainer.links.ActionConditionedLSTM`) and frames decoded by
sub-pixel convolutions (:class:`~researchutils.chainer.links.DeconvolutionPS`).
"""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

from researchutils.chainer.functions import average_k_step_squared_error
from researchutils.chainer.links import ActionConditionedLSTM, DeconvolutionPS, GradClipLSTM
from researchutils.chainer.models import AbstractChainerNetwork


class VideoPredictor(AbstractChainerNetwork):
    """Frame predictor; ``forward(frames)`` returns ``{"pred": (B, k_step, H * W)}``.

    In training mode it predicts :attr:`k_step` frames (set by a curriculum); in evaluation
    mode (``chainer.config.train`` False) it predicts ``eval_k_step`` frames.

    Args:
        frame_size (int): Height and width of the square frames.
        n_hidden (int): Width of the encoding and of the LSTM state.
        context (int): Real frames read before predicting.
        clip (float): Derivative-clipping bound of the LSTM's gate gradients.
        eval_k_step (int): Frames predicted in evaluation mode.
    """

    def __init__(self, frame_size=16, n_hidden=256, context=3, clip=1.0, eval_k_step=5):
        super().__init__(frame_size=frame_size, n_hidden=n_hidden, context=context,
                         clip=clip, eval_k_step=eval_k_step)
        self.n_pixels = frame_size * frame_size
        self.context = context
        # Steps predicted per training forward pass; raised during training by a curriculum.
        self.k_step = 1
        # Steps predicted in evaluation mode (validation, figures).
        self.eval_k_step = eval_k_step
        with self.init_scope():
            self.encoder = L.Linear(self.n_pixels, n_hidden)
            self.lstm = GradClipLSTM(n_hidden, n_hidden, clip_min=-clip, clip_max=clip)
            self.decoder = L.Linear(n_hidden, self.n_pixels)

    def step(self, frame):
        """Reads one frame of shape (B, H * W) and returns the predicted next frame."""
        return F.sigmoid(self.decoder(self.lstm(F.relu(self.encoder(frame)))))

    def forward(self, frames, k_step=None):
        """Reads ``context`` frames of ``frames`` (B, T, H, W), predicts ``k_step`` more.

        Args:
            frames: Array of shape ``(B, T, H, W)`` with ``T >= context``.
            k_step (int or None): Steps to predict; None uses :attr:`k_step` in training
                mode and :attr:`eval_k_step` in evaluation mode.

        Returns:
            dict: ``{"pred": Variable of shape (B, k_step, H * W)}``.
        """
        if k_step is None:
            k_step = self.k_step if chainer.config.train else self.eval_k_step
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


class ActionConditionedVideoPredictor(AbstractChainerNetwork):
    """Action-conditioned frame predictor; ``forward(steps)`` returns ``{"pred": (B, k, H * W)}``.

    A clip comes as one array ``steps`` of shape ``(B, T, H * W + n_actions)``: row ``t``
    holds frame ``t`` (zeros after the ``context`` observed frames) followed by the one-hot
    action taken at frame ``t``, the action that leads to frame ``t + 1``. (The training
    closure hands the network the single batch entry ``"data"``, so frames and actions
    travel together.) Each step encodes a frame, advances an
    :class:`~researchutils.chainer.links.ActionConditionedLSTM` with that frame's action,
    and decodes the next frame by a linear layer to a ``(channels, H / 4, W / 4)`` map and
    two :class:`~researchutils.chainer.links.DeconvolutionPS` layers that double its size.

    With ``use_actions=False`` every action is replaced by the same constant (the uniform
    mixture ``1 / n_actions``): the same network, blind to the actions, for comparison.

    Args:
        frame_size (int): Height and width of the square frames, a multiple of 4.
        n_actions (int): Number of discrete actions.
        n_hidden (int): Width of the encoding and of the LSTM state.
        context (int): Real frames read before predicting.
        clip (float): Derivative-clipping bound of the LSTM's gate gradients.
        eval_k_step (int): Frames predicted in evaluation mode.
        use_actions (bool): False replaces the actions by a constant.
        channels (int): Channels of the smallest decoded feature map.
    """

    def __init__(self, frame_size=16, n_actions=5, n_hidden=256, context=3, clip=1.0,
                 eval_k_step=5, use_actions=True, channels=32):
        super().__init__(frame_size=frame_size, n_actions=n_actions, n_hidden=n_hidden,
                         context=context, clip=clip, eval_k_step=eval_k_step,
                         use_actions=use_actions, channels=channels)
        if frame_size % 4:
            raise ValueError('frame_size must be a multiple of 4, got {}'.format(frame_size))
        self.frame_size = frame_size
        self.n_pixels = frame_size * frame_size
        self.n_actions = n_actions
        self.context = context
        self.use_actions = use_actions
        self.channels = channels
        self.k_step = 1
        self.eval_k_step = eval_k_step
        with self.init_scope():
            self.encoder = L.Linear(self.n_pixels, n_hidden)
            self.lstm = ActionConditionedLSTM(n_hidden, n_hidden, action_size=n_actions,
                                              clip_min=-clip, clip_max=clip)
            self.decoder = L.Linear(n_hidden, channels * (frame_size // 4) ** 2)
            self.upsample = DeconvolutionPS(channels, channels // 2, ksize=4, stride=2, pad=1)
            self.to_frame = DeconvolutionPS(channels // 2, 1, ksize=4, stride=2, pad=1)

    def step(self, frame, action):
        """Reads a frame (B, H * W) and its action (B or 1, n_actions): the next frame."""
        h = self.lstm(F.relu(self.encoder(frame)), action)
        side = self.frame_size // 4
        h = F.reshape(F.relu(self.decoder(h)), (len(h), self.channels, side, side))
        h = self.to_frame(F.relu(self.upsample(h)))
        return F.sigmoid(F.reshape(h, (len(h), self.n_pixels)))

    def forward(self, steps, k_step=None):
        """Reads ``context`` frames of ``steps``, predicts ``k_step`` more, under actions.

        Args:
            steps: Array of shape ``(B, T, H * W + n_actions)`` with
                ``T >= context + k_step - 1``.
            k_step (int or None): Steps to predict; None uses :attr:`k_step` in training
                mode and :attr:`eval_k_step` in evaluation mode.

        Returns:
            dict: ``{"pred": Variable of shape (B, k_step, H * W)}``.
        """
        if k_step is None:
            k_step = self.k_step if chainer.config.train else self.eval_k_step
        self.lstm.reset_state()
        frames = steps[:, :self.context, :self.n_pixels]
        if self.use_actions:
            actions = steps[:, :, self.n_pixels:]
        else:
            actions = self.xp.full((1, steps.shape[1], self.n_actions),
                                   1 / self.n_actions, steps.dtype)
        for t in range(self.context - 1):
            self.step(frames[:, t], actions[:, t])
        frame = frames[:, self.context - 1]
        predictions = []
        for t in range(self.context - 1, self.context - 1 + k_step):
            frame = self.step(frame, actions[:, t])
            predictions.append(frame)
        return {'pred': F.stack(predictions, axis=1)}


def k_step_loss(pred, future):
    """Average k-step squared error of ``pred`` (B, k, P) against the first k future frames."""
    k_step = pred.shape[1]
    future = F.reshape(future, (len(future), -1, pred.shape[2]))[:, :k_step]
    return average_k_step_squared_error(pred, future, k_step)


def k_step_error(pred, future):
    """Validation metric on NumPy arrays: the k-step error per clip, k = ``pred.shape[1]``."""
    k_step = pred.shape[1]
    future = np.asarray(future, np.float64).reshape(len(future), -1, pred.shape[2])[:, :k_step]
    return float(((pred - future) ** 2).sum() / (2 * k_step) / len(pred))


def repeat_last_frame_error(observed, future, k_step):
    """The baseline's k-step error per clip: the last observed frame, repeated."""
    observed = np.asarray(observed, np.float64)
    last = observed[:, -1:].reshape(len(observed), 1, -1)
    repeated = np.repeat(last, k_step, axis=1)
    return k_step_error(repeated, future)
