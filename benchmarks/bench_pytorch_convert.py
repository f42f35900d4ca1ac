"""The demo's video predictor converted to PyTorch (researchutils.pytorch.convert) against
Chainer's own, forward and backward, on the CPU.

The model is examples/video_prediction's VideoPredictor at its default size (16x16 frames,
256 LSTM units; 3 frames read, 5 predicted from its own predictions), in evaluation mode
(the trace and the timing), the loss the sum of the predictions. Batch 1 and 64 (the demo's
validation batch). Both sides compute on one thread (NumPy's BLAS and torch's), as
bench_pytorch_pieces.py does: on a loaded 2-core machine torch's second thread made the
converted module 10x slower at batch 1. No target: how fast the converted module trains
where Chainer did.
"""
import os
import sys

for _variable in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ[_variable] = '1'

import chainer  # noqa: E402
import chainer.functions as F  # noqa: E402
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'examples', 'video_prediction'))
from _timing import compare, report  # noqa: E402
from model import VideoPredictor  # noqa: E402

from researchutils.pytorch import convert  # noqa: E402


def bench_video_predictor(batch):
    import torch

    torch.set_num_threads(1)
    rng = np.random.RandomState(0)
    predictor = VideoPredictor(frame_size=16, n_hidden=256, context=3, eval_k_step=5)
    frames = rng.uniform(0, 1, (batch, 3, 16, 16)).astype(np.float32)
    module = convert(predictor, frames).eval()
    tensor = torch.from_numpy(frames)

    def chainer_step():
        predictor.cleargrads()
        with chainer.using_config('train', False):
            prediction = predictor(frames)['pred']
        F.sum(prediction).backward()
        return prediction.array, predictor.encoder.W.grad

    def torch_step():
        module.zero_grad()
        prediction = module(tensor)['pred']
        prediction.sum().backward()
        return prediction.detach().numpy(), module.encoder.weight.grad.numpy()

    (chainer_y, chainer_grad), (torch_y, torch_grad) = chainer_step(), torch_step()
    # Relative to the largest value: sums of many small terms differ in order by thread.
    for found, reference in ((torch_y, chainer_y), (torch_grad, chainer_grad)):
        assert np.abs(found - reference).max() <= 1e-5 * np.abs(reference).max()
    medians = compare({'converted module (torch)': torch_step,
                       'Chainer forward + backward': chainer_step}, repeat=9, number=5)
    report('video predictor (16x16, 256 units, 3 read + 5 predicted), forward + backward, '
           'batch {}'.format(batch), medians, 'Chainer forward + backward')


def main():
    for batch in (1, 64):
        bench_video_predictor(batch)


if __name__ == '__main__':
    main()
