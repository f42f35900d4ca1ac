"""The main demo's training epoch in PyTorch against the same epoch in Chainer, on the CPU.

The demo's model at its size (``VideoPredictor``: 16x16 frames, 256 LSTM units, the
gradient-clipping LSTM) is trained with Adam on the same batches in both frameworks, in one
process: Chainer's model and optimizer, and its PyTorch port from
``examples/pytorch/continue_video_prediction.py`` (``torch.nn.Linear``, the toolkit's torch
``GradClipLSTM``, the forward written by hand) with Chainer's Adam carried over by
``from_chainer_optimizer``. An epoch is the demo's: 4000 clips in batches of 32, 125
updates, at the horizon of the demo's last third (k = 5). The clips are rendered once
beforehand (rendering is the same NumPy code for both, and not what is compared), and the
updates cycle through them. Epochs alternate between the frameworks; medians are compared.

No target: the figure says what moving a run to PyTorch costs or saves on a CPU, with each
framework's default threads (printed).
Usage: ``python benchmarks/bench_pytorch_demo.py [--quick]`` (a tenth of an epoch, 2 rounds).
"""
import os
import sys

import chainer
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(REPO, 'examples', 'pytorch')]
from _timing import compare  # noqa: E402

CLIPS, BATCH, HIDDEN, K_STEP, RENDERED_BATCHES = 4000, 32, 256, 5, 16


def main(argv):
    try:
        import torch
    except ImportError:
        print('skipped: needs the torch extra (pip install researchutils[torch])')
        return 0
    import continue_video_prediction as example
    from model import VideoPredictor, k_step_loss

    from researchutils.pytorch import from_chainer_optimizer, load_chainer_weights

    quick = '--quick' in argv
    updates = CLIPS // BATCH // (10 if quick else 1)
    args = example.parse_args(['--hidden', str(HIDDEN), '--k-step', str(K_STEP),
                               '--batch-size', str(BATCH), '--clips', str(CLIPS)])
    iterator = example.make_iterator(args)
    batches = []
    for _ in range(RENDERED_BATCHES):
        batch = iterator.next()
        batches.append((np.stack([clip['data'] for clip in batch]),
                        np.stack([clip['label'] for clip in batch])))

    np.random.seed(0)
    chainer_model = VideoPredictor(frame_size=args.frame_size, n_hidden=HIDDEN)
    chainer_model.k_step = K_STEP
    chainer_optimizer = chainer.optimizers.Adam(alpha=args.alpha)
    chainer_optimizer.setup(chainer_model)
    torch_model = load_chainer_weights(example.TorchVideoPredictor(args.frame_size, HIDDEN),
                                       chainer_model)
    torch_model.k_step = K_STEP
    torch_optimizer = from_chainer_optimizer(chainer_optimizer, torch_model)
    torch_batches = [(torch.as_tensor(data), torch.as_tensor(label))
                     for data, label in batches]

    def chainer_loss(data, label):
        return k_step_loss(chainer_model(data)['pred'], label)

    def chainer_epoch():
        for update in range(updates):
            chainer_optimizer.update(chainer_loss, *batches[update % RENDERED_BATCHES])

    def torch_epoch():
        for update in range(updates):
            data, label = torch_batches[update % RENDERED_BATCHES]
            torch_optimizer.zero_grad()
            example.torch_k_step_loss(torch_model(data), label).backward()
            torch_optimizer.step()

    print('cores usable: {}, load average {}; torch {} with {} threads'.format(
        len(os.sched_getaffinity(0)), ' '.join('{:.2f}'.format(x) for x in os.getloadavg()),
        torch.__version__, torch.get_num_threads()))
    medians = compare({'Chainer': chainer_epoch, 'PyTorch': torch_epoch},
                      repeat=2 if quick else 5, number=1, warmup=1)
    print('demo epoch ({} updates of batch {}, 256 units, k = {}), median s per epoch:'.format(
        updates, BATCH, K_STEP))
    for name, seconds in medians.items():
        print('   {:10s} {:8.3f} s   {:6.2f} ms per update'.format(
            name, seconds, seconds / updates * 1e3))
    print('   PyTorch / Chainer: {:.3f}x'.format(medians['PyTorch'] / medians['Chainer']))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
