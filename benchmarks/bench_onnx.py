"""onnxruntime running an exported model against Chainer's own forward pass, on the CPU.

Two models: the demo's video predictor (examples/video_prediction, its default size: 16x16
frames, 256 LSTM units; 3 frames read, 5 predicted from its own predictions) exported whole,
and a GradClipLSTM layer of 256 units run over a 20-step sequence, exported as one step with
its state as inputs and outputs (the state fed back by the caller, as a runtime would).
Each at batch 1 (one request) and 64 (the demo's validation batch). Both sides use every
core (onnxruntime's default threads; NumPy's BLAS). No target: how much faster the file
runs where Chainer is not needed.
"""
import os
import sys
import tempfile

import chainer
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'examples', 'video_prediction'))
from _timing import compare, report  # noqa: E402
from model import VideoPredictor  # noqa: E402

from researchutils.chainer.links import GradClipLSTM  # noqa: E402
from researchutils.chainer.onnx import export  # noqa: E402

STEPS = 20


def _session(path):
    import onnxruntime
    return onnxruntime.InferenceSession(path, providers=['CPUExecutionProvider'])


def bench_video_predictor(folder, batch):
    rng = np.random.RandomState(0)
    predictor = VideoPredictor(frame_size=16, n_hidden=256, context=3, eval_k_step=5)
    frames = rng.uniform(0, 1, (batch, 3, 16, 16)).astype(np.float32)
    path = os.path.join(folder, 'video_predictor_{}.onnx'.format(batch))
    export(predictor, frames, path, input_names=['frames'])
    session = _session(path)

    def chainer_forward():
        with chainer.using_config('train', False), chainer.no_backprop_mode():
            return predictor(frames)['pred'].array

    def onnxruntime_run():
        return session.run(['pred'], {'frames': frames})[0]

    assert np.allclose(onnxruntime_run(), chainer_forward(), rtol=1e-5, atol=1e-5)
    medians = compare({'onnxruntime': onnxruntime_run, 'Chainer forward': chainer_forward},
                      repeat=9, number=10)
    report('video predictor (16x16, 256 units, 3 read + 5 predicted), batch {}'.format(batch),
           medians, 'Chainer forward')


def bench_lstm_sequence(folder, batch):
    rng = np.random.RandomState(1)
    lstm = GradClipLSTM(256, 256, clip_min=-1.0, clip_max=1.0)
    sequence = rng.uniform(-1, 1, (STEPS, batch, 256)).astype(np.float32)
    zeros = np.zeros((batch, 256), np.float32)
    lstm.set_state(chainer.Variable(zeros), chainer.Variable(zeros))
    path = os.path.join(folder, 'lstm_{}.onnx'.format(batch))
    export(lstm, sequence[0], path, states=['/'])
    session = _session(path)

    def chainer_forward():
        lstm.reset_state()
        with chainer.using_config('train', False), chainer.no_backprop_mode():
            for x in sequence:
                y = lstm(x)
        return y.array

    def onnxruntime_run():
        c = h = zeros
        for x in sequence:
            y, c, h = session.run(None, {'input': x, 'c': c, 'h': h})
        return y

    assert np.allclose(onnxruntime_run(), chainer_forward(), rtol=1e-5, atol=1e-5)
    medians = compare({'onnxruntime': onnxruntime_run, 'Chainer forward': chainer_forward},
                      repeat=9, number=5)
    report('GradClipLSTM 256 -> 256 over {} steps, batch {}'.format(STEPS, batch), medians,
           'Chainer forward')


def main():
    with tempfile.TemporaryDirectory() as folder:
        for batch in (1, 64):
            bench_video_predictor(folder, batch)
            bench_lstm_sequence(folder, batch)


if __name__ == '__main__':
    main()
