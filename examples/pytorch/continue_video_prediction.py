"""A Chainer run of the demo's video predictor, continued in PyTorch to the same losses.

The main demo (``examples/video_prediction/train.py``) trains a ``VideoPredictor`` in Chainer.
This script takes such a run, smaller, to PyTorch the way a user would:

1. Chainer trains the model a few iterations with Adam, on clips rendered by the demo's
   ``render_example`` in a seeded ``DecorableSerialIterator``, and writes a Trainer
   snapshot (the run that stopped).
2. Chainer resumes that snapshot and trains ``--iterations`` more: the reference.
3. PyTorch resumes the same snapshot: the model written by hand (:class:`TorchVideoPredictor`,
   its children named as the Chainer model's, its forward the same Python), its weights by
   ``load_chainer_weights``, Chainer's Adam and its state by ``from_chainer_optimizer``, and
   the same iterator class, its position read from the snapshot, so the batches are the
   same. A plain loop trains ``--iterations``.

It prints both losses at each iteration and their largest relative difference (the test
holds it under 1e-4), and with ``--plot`` draws both curves on one figure.

Run ``python examples/pytorch/continue_video_prediction.py --help`` for the options.
Tests: ``tests/examples/test_continue_video_prediction.py``.
"""
import argparse
import os
import sys
import tempfile

import chainer
import numpy as np
import torch
from chainer import training

HERE = os.path.dirname(os.path.abspath(__file__))
# The demo's own pieces: its clips, its model and its loss.
sys.path.insert(0, os.path.join(HERE, '..', 'video_prediction'))
from model import VideoPredictor, k_step_loss  # noqa: E402
from train import CONTEXT, render_example  # noqa: E402

from researchutils.chainer.iterators import DecorableSerialIterator  # noqa: E402
from researchutils.pytorch import (  # noqa: E402
    GradClipLSTM,
    average_k_step_squared_error,
    from_chainer_optimizer,
    load_chainer_weights,
)

ITERATOR_KEY = 'updater/iterator:main/'


class TorchVideoPredictor(torch.nn.Module):
    """``model.VideoPredictor`` written in PyTorch: the same children, the same forward.

    ``encoder`` and ``decoder`` are torch's Linear (``load_chainer_weights`` fills
    ``weight`` from Chainer's ``W``), ``lstm`` the toolkit's torch GradClipLSTM, which keeps
    Chainer's gate layout and clips the gates' gradients as the Chainer link does.
    """

    def __init__(self, frame_size, n_hidden, context=CONTEXT, clip=1.0):
        super().__init__()
        self.n_pixels = frame_size * frame_size
        self.context = context
        self.k_step = 1
        self.encoder = torch.nn.Linear(self.n_pixels, n_hidden)
        self.lstm = GradClipLSTM(n_hidden, n_hidden, clip_min=-clip, clip_max=clip)
        self.decoder = torch.nn.Linear(n_hidden, self.n_pixels)

    def step(self, frame):
        return torch.sigmoid(self.decoder(self.lstm(torch.relu(self.encoder(frame)))))

    def forward(self, frames):
        self.lstm.reset_state()
        frames = frames.reshape(len(frames), -1, self.n_pixels)
        for t in range(self.context - 1):
            self.step(frames[:, t])
        frame = frames[:, self.context - 1]
        predictions = []
        for _ in range(self.k_step):
            frame = self.step(frame)
            predictions.append(frame)
        return torch.stack(predictions, dim=1)


def torch_k_step_loss(pred, future):
    """``model.k_step_loss`` in torch."""
    k_step = pred.shape[1]
    future = future.reshape(len(future), -1, pred.shape[2])[:, :k_step]
    return average_k_step_squared_error(pred, future, k_step)


def make_iterator(args):
    """The demo's clips (seeds ``0..clips-1``), shuffled and rendered from the seed."""
    return DecorableSerialIterator(list(range(args.clips)), args.batch_size,
                                   decor_fun=render_example, seed=args.seed)


def make_trainer(args, stop_iteration, losses=None):
    """The Chainer run: the demo's model, Adam and loss, in a Trainer."""
    chainer.global_config.dtype = np.float32
    np.random.seed(args.seed)
    model = VideoPredictor(frame_size=args.frame_size, n_hidden=args.hidden, context=CONTEXT)
    model.k_step = args.k_step
    optimizer = chainer.optimizers.Adam(alpha=args.alpha)
    optimizer.setup(model)

    def loss_func(data, label):
        loss = k_step_loss(model(data)['pred'], label)
        if losses is not None:
            losses.append(float(loss.array))
        return loss

    updater = training.updaters.StandardUpdater(make_iterator(args), optimizer,
                                                loss_func=loss_func)
    return training.Trainer(updater, (stop_iteration, 'iteration'), out=args.out)


def chainer_runs(args):
    """Trains ``--warm-up`` iterations and snapshots; resumes it for ``--iterations``.

    Returns:
        tuple: The snapshot's path and Chainer's losses after it.
    """
    trainer = make_trainer(args, args.warm_up)
    trainer.extend(training.extensions.snapshot(filename='snapshot'),
                   trigger=(args.warm_up, 'iteration'))
    trainer.run()
    snapshot = os.path.join(args.out, 'snapshot')
    losses = []
    resumed = make_trainer(args, args.warm_up + args.iterations, losses)
    chainer.serializers.load_npz(snapshot, resumed)
    resumed.run()
    return snapshot, losses


def torch_resume(args, snapshot):
    """The model, optimizer and iterator of PyTorch's run, each as ``snapshot`` left it."""
    model = TorchVideoPredictor(args.frame_size, args.hidden)
    model.k_step = args.k_step
    load_chainer_weights(model, snapshot)
    # The Chainer optimizer says the kind and the hyper-parameters; the state is the file's.
    optimizer = from_chainer_optimizer(chainer.optimizers.Adam(alpha=args.alpha), model,
                                       snapshot=snapshot)
    iterator = make_iterator(args)
    with np.load(snapshot, allow_pickle=False) as arrays:
        iterator.serialize(chainer.serializers.NpzDeserializer(arrays, path=ITERATOR_KEY))
    return model, optimizer, iterator


def torch_train(model, optimizer, iterator, iterations):
    """The plain PyTorch loop; returns the loss of each iteration."""
    losses = []
    for _ in range(iterations):
        batch = iterator.next()
        data = torch.as_tensor(np.stack([example['data'] for example in batch]))
        label = torch.as_tensor(np.stack([example['label'] for example in batch]))
        optimizer.zero_grad()
        loss = torch_k_step_loss(model(data), label)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def plot_losses(path, chainer_losses, torch_losses, first_iteration):
    """Both runs' losses against the iteration, on one figure, written to ``path``."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    iterations = np.arange(first_iteration + 1, first_iteration + 1 + len(chainer_losses))
    figure, axes = plt.subplots(figsize=(6, 3.2))
    axes.plot(iterations, chainer_losses, label='Chainer, resumed from the snapshot',
              linewidth=3, alpha=0.5)
    axes.plot(iterations, torch_losses, '--', label='PyTorch, resumed from the snapshot',
              linewidth=1.2, color='black')
    axes.set_xlabel('iteration')
    axes.set_ylabel('k-step loss')
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default=None,
                        help='folder of the Chainer run and its snapshot (a temporary one)')
    parser.add_argument('--warm-up', type=int, default=20,
                        help='Chainer iterations before the snapshot (20)')
    parser.add_argument('--iterations', type=int, default=100,
                        help='iterations after it, in each framework (100)')
    parser.add_argument('--hidden', type=int, default=32, help='LSTM units (32)')
    parser.add_argument('--frame-size', type=int, default=16, help=argparse.SUPPRESS)
    parser.add_argument('--k-step', type=int, default=3, help='frames predicted (3)')
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--clips', type=int, default=64, help='training clips (64)')
    parser.add_argument('--alpha', type=float, default=1e-3, help="Adam's alpha (1e-3)")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--plot', default=None, help='write both loss curves to this PNG')
    parser.add_argument('--torch-threads', type=int, default=None,
                        help="torch's CPU threads (its default); 1 is fastest for this small "
                        'model on a busy machine')
    args = parser.parse_args(argv)
    for name in ('warm_up', 'iterations', 'hidden', 'k_step', 'batch_size', 'clips'):
        if getattr(args, name) < 1:
            parser.error('--{} must be at least 1, got {}'.format(
                name.replace('_', '-'), getattr(args, name)))
    return args


def main(argv=None):
    """Runs both continuations; returns ``(chainer_losses, torch_losses)``."""
    args = parse_args(argv)
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    with tempfile.TemporaryDirectory() as scratch:
        if args.out is None:
            args.out = scratch
        snapshot, chainer_losses = chainer_runs(args)
        torch_losses = torch_train(*torch_resume(args, snapshot), args.iterations)
    difference = np.abs(np.subtract(torch_losses, chainer_losses)) / np.abs(chainer_losses)
    for iteration, (ours, theirs) in enumerate(zip(chainer_losses, torch_losses)):
        print('iteration {:4d}  Chainer {:.7f}  PyTorch {:.7f}'.format(
            args.warm_up + iteration + 1, ours, theirs))
    print('largest relative difference over {} iterations: {:.2e}'.format(
        args.iterations, difference.max()))
    if args.plot:
        plot_losses(args.plot, chainer_losses, torch_losses, args.warm_up)
        print('wrote', args.plot)
    return chainer_losses, torch_losses


if __name__ == '__main__':
    main()
