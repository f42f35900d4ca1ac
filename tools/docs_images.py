"""Makes the documentation's pictures in docs/images, small: ``make docs-images``.

* ``frames.png`` and ``loss.png``: the predicted frames and the loss curve of a run of the
  main example, exactly as ``make demo`` runs it (the default options, 24 epochs: about two
  minutes on two free cores), or of a run already made (``--demo-run
  result/video_prediction``); shown on the front page and in
  docs/tutorials/video_prediction.rst.
* ``search_history.png`` and ``search_importances.png``: the figures the search writes
  itself, from the small search docs/tutorials/search.rst describes (the tests' linear
  regression, a log-range learning rate and two hidden sizes, 20 trials of 5 epochs,
  ``TPESampler(seed=0)``; a few minutes on two busy cores). The trials whose weights
  overflow print Chainer's traceback as they stop: that is the search pruning them.
* ``decorated_batch.png``: a batch that ``previous_four`` of
  docs/tutorials/decorable_iterators.rst decorates, from a video of bouncing balls.
* ``pytorch_continued_losses.png``: the losses of Chainer's and PyTorch's continuations of
  one snapshot, from a run of examples/pytorch/continue_video_prediction.py with its
  defaults (half a minute on two busy cores; needs the ``torch`` extra); shown in
  docs/tutorials/pytorch.rst.

Each picture is written as a palette PNG of a few grey levels or colours, which keeps it to
tens of kilobytes (tests/test_docs.py holds the limit). Needs the ``plot`` and ``search``
extras (matplotlib and Optuna) and Pillow, which matplotlib brings.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATIC = os.path.join(ROOT, 'docs', 'images')
DEMO = os.path.join(ROOT, 'examples', 'video_prediction')
sys.path[:0] = [ROOT, DEMO]


def save_small_png(source, name, colours, width=None):
    """Writes ``source`` (a PNG file or a PIL image) to docs/images/``name`` as a palette
    PNG of ``colours`` colours, scaled down to ``width`` pixels when it is wider."""
    from PIL import Image

    image = source if isinstance(source, Image.Image) else Image.open(source)
    image = image.convert('RGB')
    if width is not None and image.width > width:
        height = round(image.height * width / image.width)
        image = image.resize((width, height), Image.LANCZOS)
    # Octree quantizing keeps the few coloured pixels of a plot (its points and lines),
    # which a median cut would merge into the greys around them.
    small = image.quantize(colors=colours, method=Image.Quantize.FASTOCTREE,
                           dither=Image.Dither.NONE)
    path = os.path.join(STATIC, name)
    handle, temporary = tempfile.mkstemp(suffix='.png', dir=STATIC)
    os.close(handle)
    try:
        small.save(temporary, optimize=True)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    print('{}: {}x{}, {} bytes'.format(os.path.relpath(path, ROOT), small.width,
                                       small.height, os.path.getsize(path)))


def demo_images(run):
    """frames.png of the demo run in the folder ``run``, and its loss curves."""
    for name in ('frames.png', 'log'):
        if not os.path.isfile(os.path.join(run, name)):
            raise FileNotFoundError('{} has no {}: is it a finished run of the main example '
                                    '(result/video_prediction)?'.format(run, name))
    save_small_png(os.path.join(run, 'frames.png'), 'frames.png', colours=16)
    loss_image(os.path.join(run, 'log'))


def loss_image(log_path):
    """The run's training loss and held-out error per epoch, from its LogReport log.

    Drawn from the log rather than copied from PlotReport's ``loss.png``: the log is the
    same for a run that was stopped and resumed, and both curves fit in one small picture,
    with the epochs at which the horizon ``k`` grows marked.
    """
    import json

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from PIL import Image

    with open(log_path, encoding='utf-8') as f:
        log = json.load(f)
    epochs = [entry['epoch'] for entry in log]
    # Optuna's figures switch pyplot to a style of their own for the whole process.
    plt.style.use('default')
    figure, axes = plt.subplots(2, 1, sharex=True, figsize=(4.8, 3.6))
    curves = [('main/k_step_error', 'training loss (k-step error)'),
              ('val/k_step_error', 'validation 5-step error')]
    for ax, (key, label) in zip(axes, curves):
        ax.plot(epochs, [entry[key] for entry in log], marker='.', color='tab:blue')
        ax.set_ylabel(label, fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        for before, entry in zip(log, log[1:]):
            if entry['k_step'] != before['k_step']:
                ax.axvline(before['epoch'] + 0.5, color='tab:orange', linestyle='--',
                           linewidth=1)
    for before, entry in zip(log, log[1:]):
        if entry['k_step'] != before['k_step']:
            axes[0].annotate('k = {:g}'.format(entry['k_step']),
                             (before['epoch'] + 0.7, 0.9), xycoords=('data', 'axes fraction'),
                             fontsize=7, color='tab:orange')
    axes[1].set_xlabel('epoch', fontsize=7)
    figure.tight_layout()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, 'loss.png')
        figure.savefig(path, dpi=100)
        plt.close(figure)
        save_small_png(Image.open(path), 'loss.png', colours=32)


def run_demo(out):
    """Runs the main example as ``make demo`` does, into ``out``; returns its run folder."""
    subprocess.run([sys.executable, os.path.join(DEMO, 'train.py'), '--out', out],
                   check=True, cwd=ROOT)
    return os.path.join(out, 'video_prediction')


def search_images(folder):
    """The search's own figures, from the search of docs/tutorials/search.rst."""
    import chainer
    import optuna

    from researchutils.chainer.training import ChainerExperiment, FloatRange
    from tests.chainer.training import tasks

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    params = tasks.make_params(
        num_epochs=5, optimizer_cls=chainer.optimizers.SGD, optimizer_params={},
        variable={'training': {'optimizer_params': {'lr': FloatRange(1e-3, 100.0, log=True)}},
                  'model': {'num_hidden': [8, 32]}})
    experiment = ChainerExperiment(params, tasks.Regressor, name='lr_search',
                                   save_path=folder, val_score_key='MSE', seed=0)
    summary = experiment.search(*tasks.make_managers(), n_trials=20,
                                sampler=optuna.samplers.TPESampler(seed=0))
    states = [trial['state'] for trial in summary['trials']]
    # The tutorial's text gives these counts: check them there when they change.
    print('search: {} trials completed, {} pruned'.format(states.count('COMPLETE'),
                                                           states.count('PRUNED')))
    for name in ('search_history.png', 'search_importances.png'):
        save_small_png(os.path.join(experiment.output_dir, name), name, colours=32,
                       width=560)


def previous_four(dataset, index):
    """The ``decor_fun`` of docs/tutorials/decorable_iterators.rst, as it is written there."""
    picks = [max(index - k, 0) for k in (3, 2, 1, 0)]
    return dataset[picks].reshape(-1, *dataset.shape[2:]), dataset[index + 1]


def decorated_batch_image():
    """The first batch of previous_four's examples from a bouncing-balls video, one a row:
    indices 0 to 3, where the video's first frame stands in for the frames before it."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from bouncing_balls import render_clip
    from PIL import Image

    from researchutils.chainer.iterators import DecorableSerialIterator

    plt.style.use('default')
    frames = render_clip(np.arange(1), 0, n_frames=40)[:, None]      # (T, C, H, W)
    iterator = DecorableSerialIterator(frames, batch_size=4, decor_fun=previous_four,
                                       end_index=len(frames) - 1, shuffle=False)
    batch = iterator.next()
    figure, axes = plt.subplots(len(batch), 6, figsize=(6 * 0.8, len(batch) * 0.95),
                                gridspec_kw={'width_ratios': [1, 1, 1, 1, 0.25, 1]})
    for row, (inputs, target) in enumerate(batch):
        cells = list(inputs) + [None, target[0]]
        for column, cell in enumerate(cells):
            ax = axes[row, column]
            ax.set_xticks([])
            ax.set_yticks([])
            if cell is None:
                ax.axis('off')
                continue
            ax.imshow(cell, cmap='gray', vmin=0, vmax=1, interpolation='nearest')
        axes[row, 0].set_ylabel('index {}'.format(row), fontsize=7)
    titles = ['index - 3', 'index - 2', 'index - 1', 'index', '', 'label:\nindex + 1']
    for column, title in enumerate(titles):
        axes[0, column].set_title(title, fontsize=7)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, 'batch.png')
        figure.savefig(path, dpi=100, bbox_inches='tight', pad_inches=0.05)
        plt.close(figure)
        save_small_png(Image.open(path), 'decorated_batch.png', colours=16)


def continued_run_image(folder):
    """Runs examples/pytorch/continue_video_prediction.py as documented and keeps its plot."""
    plot = os.path.join(folder, 'continued_losses.png')
    subprocess.run([sys.executable, os.path.join(ROOT, 'examples', 'pytorch',
                                                 'continue_video_prediction.py'),
                    '--plot', plot, '--torch-threads', '1'], check=True)
    save_small_png(plot, 'pytorch_continued_losses.png', colours=16, width=600)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--demo-run', help='a finished run of the main example to take '
                        'its pictures from (result/video_prediction); without it the demo '
                        'runs first, as make demo runs it')
    parser.add_argument('--skip-demo', action='store_true',
                        help='leave frames.png and loss.png as they are')
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix='researchutils-docs-images-') as folder:
        decorated_batch_image()
        continued_run_image(folder)
        search_images(os.path.join(folder, 'search'))
        if args.demo_run:
            demo_images(args.demo_run)
        elif not args.skip_demo:
            demo_images(run_demo(os.path.join(folder, 'demo')))


if __name__ == '__main__':
    main()
