"""Action-free video prediction on procedurally generated bouncing balls (the main demo).

In the spirit of Oh et al. (2015): a network reads a few frames of a clip, then predicts the
next ``k`` frames from its own predictions, trained with the average k-step squared error
while ``k`` grows (1, then 3, then 5). It uses the whole toolkit:

* clips rendered on the fly by a ``decor_fun(dataset, index)`` from a per-clip seed, in
  worker processes of the ``DecorableMultiprocessIterator`` behind a seeded ``DataManager``;
* a :class:`~researchutils.chainer.links.GradClipLSTM` (derivative clipping on) and
  :func:`~researchutils.chainer.functions.average_k_step_squared_error`;
* :class:`~researchutils.chainer.training.ChainerExperiment` (Chainer's Trainer, LogReport,
  PlotReport, ProgressBar, snapshots for ``--resume``), ``save_model`` for the final model;
  a SIGTERM or SIGUSR1 (a cluster ending the job) stops the run at the end of the
  iteration with a snapshot and exit status 75, and ``--resume`` continues it to the same
  final errors as a run never stopped;
* TensorBoard event files of the training (``ChainerExperiment(tracking='tensorboard')``:
  ``tensorboard --logdir result``), unless ``--no-tensorboard``;
* a :class:`~researchutils.chainer.training.extensions.SlackReport` when ``SLACK_BOT_TOKEN``
  and ``SLACK_CHANNEL`` are set.

With ``--actions`` it runs the paper's own setting instead: every clip's balls are pushed
by a known random action at each frame (drawn from the clip's seed), and it trains an
:class:`~model.ActionConditionedVideoPredictor` twice, once with the actions and once with
them replaced by a constant, the same way and from the same seed, then compares their
held-out errors.

Run ``python examples/video_prediction/train.py --help`` for the options.
"""
import argparse
import collections
import os
import sys
import time

import chainer
import numpy as np

# The script's folder is on sys.path when it runs as a script: its helper modules.
from bouncing_balls import ACTION_DIRECTIONS, FRAME_SIZE, render_clip, render_pushed_clip
from figures import save_frames_png
from model import (
    ActionConditionedVideoPredictor,
    VideoPredictor,
    k_step_error,
    k_step_loss,
    repeat_last_frame_error,
)

from researchutils._files import write_atomically
from researchutils.chainer.data_loading import (
    AbstractDataset,
    DataManager,
    RandomSampler,
    SequentialSampler,
)
from researchutils.chainer.iterators import UnmodifiableDecorableList
from researchutils.chainer.onnx import export
from researchutils.chainer.serializers import save_model
from researchutils.chainer.training import ChainerExperiment, Parameters, Predictor, load_json

CONTEXT = 3
MAX_K_STEP = 5
EXPERIMENT_NAME = 'video_prediction'
# The --actions comparison: the same network with and without the actions.
WITH_ACTIONS, WITHOUT_ACTIONS = 'video_prediction_with_actions', 'video_prediction_without_actions'
N_PIXELS = FRAME_SIZE * FRAME_SIZE
N_ACTIONS = len(ACTION_DIRECTIONS)
# Held-out clips use seeds far from the training seeds.
HELD_OUT_SEED_OFFSET = 10 ** 8


def render_example(seeds, index):
    """``decor_fun``: renders clip ``index`` from its seed, randomly mirrored.

    Mirroring a whole clip keeps its physics valid; the draw comes from ``numpy.random``,
    which the seeded DataManager makes a function of (seed, epoch, batch).
    """
    frames = render_clip(seeds, index, n_frames=CONTEXT + MAX_K_STEP)
    if np.random.uniform() < 0.5:
        frames = frames[:, :, ::-1]
    if np.random.uniform() < 0.5:
        frames = frames[:, ::-1, :]
    frames = np.ascontiguousarray(frames)
    return {'data': frames[:CONTEXT], 'label': frames[CONTEXT:]}


def render_plain(seeds, index):
    """``decor_fun`` for held-out clips: rendered as they are."""
    frames = render_clip(seeds, index, n_frames=CONTEXT + MAX_K_STEP)
    return {'data': frames[:CONTEXT], 'label': frames[CONTEXT:]}


def _mirror_table(axis):
    """Action index to the action that mirroring a clip along ``axis`` (0: y, 1: x) makes."""
    mirrored = ACTION_DIRECTIONS * np.where(np.arange(2) == axis, -1, 1)
    return np.array([np.flatnonzero((ACTION_DIRECTIONS == row).all(axis=1))[0]
                     for row in mirrored])


MIRRORED_ACTION_Y, MIRRORED_ACTION_X = _mirror_table(0), _mirror_table(1)


def steps_example(frames, actions):
    """A pushed clip as ``{"data": steps, "label": future}``, for the action-conditioned
    model.

    Row ``t`` of ``steps`` (``(CONTEXT + MAX_K_STEP - 1, H * W + N_ACTIONS)``) holds frame
    ``t`` while it is observed (zeros after) and the one-hot action taken at frame ``t``.
    """
    steps = np.zeros((len(actions), N_PIXELS + N_ACTIONS), np.float32)
    steps[:CONTEXT, :N_PIXELS] = frames[:CONTEXT].reshape(CONTEXT, N_PIXELS)
    steps[np.arange(len(actions)), N_PIXELS + actions] = 1
    return {'data': steps, 'label': np.ascontiguousarray(frames[CONTEXT:])}


def render_pushed_example(seeds, index):
    """``decor_fun`` of the --actions runs: a pushed clip, randomly mirrored, actions too.

    Mirroring the frames along an axis turns each push along that axis around.
    """
    frames, actions = render_pushed_clip(seeds, index, n_frames=CONTEXT + MAX_K_STEP)
    if np.random.uniform() < 0.5:
        frames, actions = frames[:, :, ::-1], MIRRORED_ACTION_X[actions]
    if np.random.uniform() < 0.5:
        frames, actions = frames[:, ::-1, :], MIRRORED_ACTION_Y[actions]
    return steps_example(frames, actions)


def render_pushed_plain(seeds, index):
    """``decor_fun`` for held-out pushed clips: rendered as they are."""
    return steps_example(*render_pushed_clip(seeds, index, n_frames=CONTEXT + MAX_K_STEP))


class BouncingBallsClips(AbstractDataset):
    """Clips as dicts ``{"data": ..., "label": (MAX_K_STEP, H, W)}`` from ``decor_fun``.

    Nothing is stored but the seeds: each example is rendered when it is read.
    """

    def __init__(self, first_seed, n_clips, decor_fun):
        super().__init__()
        self.clips = UnmodifiableDecorableList(
            range(first_seed, first_seed + n_clips), decor_fun=decor_fun)

    def __getitem__(self, index):
        return self.clips[index]

    def __len__(self):
        return len(self.clips)


class KStepCurriculum(chainer.training.Extension):
    """Sets the model's prediction horizon from the epoch: k = 1, then 3, then 5.

    Stateless in the epoch, so a resumed run picks up the right k at once.
    """

    trigger = 1, 'epoch'
    priority = chainer.training.PRIORITY_WRITER

    def __init__(self, num_epochs):
        self.num_epochs = num_epochs

    def k_step_at(self, epoch):
        """The horizon trained in epoch ``epoch`` (0-based): thirds of the run."""
        third = epoch * 3 // max(self.num_epochs, 1)
        return (1, 3, 5)[min(third, 2)]

    def initialize(self, trainer):
        model = trainer.updater.get_optimizer('main').target
        model.k_step = self.k_step_at(trainer.updater.epoch)

    def __call__(self, trainer):
        model = trainer.updater.get_optimizer('main').target
        # Logged with the epoch that trained it, then set for the next epoch.
        chainer.reporter.report({'k_step': model.k_step})
        model.k_step = self.k_step_at(trainer.updater.epoch)


class FinalFigures(chainer.training.Extension):
    """At the last epoch: writes ``frames.png`` and copies PlotReport's plot to
    ``final_loss.png``, so that a SlackReport uploads each once, at the end.

    Its priority is a reader's and it is registered after PlotReport and before
    SlackReport, so it sees this epoch's plot and SlackReport sees its files.
    """

    priority = chainer.training.PRIORITY_READER

    def __init__(self, clips, last_seen):
        self.clips = clips
        self.last_seen = last_seen

    def __call__(self, trainer):
        model = trainer.updater.get_optimizer('main').target
        write_frames_png(os.path.join(trainer.out, 'frames.png'), model, self.clips,
                         self.last_seen)
        plot = os.path.join(trainer.out, 'loss.png')
        if os.path.exists(plot):
            with open(plot, 'rb') as source:
                data = source.read()
            write_atomically(os.path.join(trainer.out, 'final_loss.png'),
                             lambda file: file.write(data))


def write_frames_png(path, model, clips, last_seen):
    data = np.stack([clip['data'] for clip in clips])
    future = np.stack([clip['label'] for clip in clips])
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        pred = model(model.xp.asarray(data))['pred']
    pred = chainer.backends.cuda.to_cpu(pred.array).reshape(future.shape)
    save_frames_png(path, future, pred, context_frame=last_seen(data))


def write_onnx(path, model, clip, input_name):
    """Writes ``model`` as ONNX, for one clip shaped as ``clip["data"]``; returns a line
    saying where (or, without the onnx extra, how to get the file)."""
    try:
        import onnx  # noqa: F401  (the extra, which export needs)
    except ImportError:
        return 'ONNX: pip install researchutils[onnx] to also write {}'.format(path)
    if model.xp is not np:
        model = model.copy(mode='copy')
        model.to_cpu()
    data = np.asarray(clip['data'])[None]
    export(model, data, path, input_names=[input_name])
    return ('ONNX: wrote {} (input {!r} of shape {}, output "pred"; docs/tutorials/onnx.rst '
            'runs it in onnxruntime)'.format(path, input_name, data.shape))


def last_frames(data):
    """The last observed frame of each action-free clip of ``data`` (B, CONTEXT, H, W)."""
    return np.asarray(data)[:, -1]


def last_frames_of_steps(data):
    """The last observed frame of each pushed clip of ``data`` (B, steps, H * W + actions)."""
    return np.asarray(data)[:, CONTEXT - 1, :N_PIXELS].reshape(-1, FRAME_SIZE, FRAME_SIZE)


# What the runs differ in: the folder, the model, its argument fed with batch["data"], the
# decor_fun of the training and the held-out clips, and where a clip's last seen frame is.
RunSetup = collections.namedtuple('RunSetup', [
    'name', 'model_cls', 'model_params', 'key_mapping', 'train_render', 'held_out_render',
    'last_seen'])


def run_setups(args):
    """The main demo's one run, or with ``--actions`` the two runs it compares."""
    model_params = {'frame_size': FRAME_SIZE, 'n_hidden': args.hidden, 'context': CONTEXT,
                    'clip': 1.0, 'eval_k_step': MAX_K_STEP}
    if not args.actions:
        return [RunSetup(EXPERIMENT_NAME, VideoPredictor, model_params,
                         {'frames': 'data'}, render_example, render_plain, last_frames)]
    return [RunSetup(name, ActionConditionedVideoPredictor,
                     dict(model_params, n_actions=N_ACTIONS, use_actions=use_actions),
                     {'steps': 'data'}, render_pushed_example, render_pushed_plain,
                     last_frames_of_steps)
            for name, use_actions in ((WITH_ACTIONS, True), (WITHOUT_ACTIONS, False))]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--epochs', type=int, default=None,
                        help='training epochs (24; 12 for each of the two --actions runs)')
    parser.add_argument('--out', default='result',
                        help='folder of the run; the experiment lives in OUT/{}'.format(
                            EXPERIMENT_NAME))
    parser.add_argument('--gpu', type=int, default=-1, help='GPU id; -1 trains on the CPU')
    parser.add_argument('--resume', action='store_true',
                        help='continue the run in --out from its last snapshot (after a '
                        'crash, or exactly where a SIGTERM/SIGUSR1 stopped it)')
    parser.add_argument('--seed', type=int, default=0, help='seed of weights and data (0)')
    parser.add_argument('--train-clips', type=int, default=4000)
    parser.add_argument('--val-clips', type=int, default=256)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--hidden', type=int, default=256, help='LSTM units (256)')
    parser.add_argument('--workers', type=int, default=2,
                        help='worker processes rendering clips (2)')
    parser.add_argument('--no-tensorboard', dest='tensorboard', action='store_false',
                        help='write no TensorBoard events (by default each run writes them '
                        'in its folder, tensorboard/)')
    parser.add_argument('--actions', action='store_true',
                        help='balls pushed by known actions: train the action-conditioned '
                        'model and the same model without actions (in OUT/{} and OUT/{}) and '
                        'compare them'.format(WITH_ACTIONS, WITHOUT_ACTIONS))
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 12 if args.actions else 24
    for name in ('epochs', 'train_clips', 'val_clips', 'batch_size', 'hidden'):
        if getattr(args, name) < 1:
            parser.error('--{} must be at least 1, got {}'.format(
                name.replace('_', '-'), getattr(args, name)))
    if args.workers < 0:
        parser.error('--workers must be 0 or more, got {}'.format(args.workers))
    return args


def _finished_epoch(run_dir):
    """The last epoch of a finished run in ``run_dir``; None if it has not finished."""
    state = os.path.join(run_dir, 'run_state.json')
    if not os.path.exists(state):
        return None
    state = load_json(state)
    return state['epoch'] if state.get('finished') else None


def _prepare_outputs(args, names):
    """The runs' folders in ``args.out``. With --resume, runs that finished are reused and
    the others continue (or start); without it, earlier runs are moved aside."""
    run_dirs = [os.path.join(args.out, name) for name in names]
    if args.resume:
        if not any(os.path.isdir(run_dir) for run_dir in run_dirs):
            sys.exit('--resume: there is no run to continue in {}'.format(
                ' or '.join(run_dirs)))
        epochs = [_finished_epoch(run_dir) for run_dir in run_dirs]
        if all(epoch is not None for epoch in epochs):
            sys.exit('--resume: {}; start a new run without --resume'.format('; '.join(
                'the run in {} already finished (epoch {})'.format(run_dir, epoch)
                for run_dir, epoch in zip(run_dirs, epochs))))
        return run_dirs
    for run_dir in run_dirs:
        _move_aside(run_dir)
    return run_dirs


def _move_aside(run_dir):
    if os.path.exists(run_dir):
        # A fresh run never trains on top of an old one, and never deletes it.
        stamp = '{}-{}'.format(run_dir, time.strftime('%Y%m%d-%H%M%S'))
        kept, number = stamp, 1
        while os.path.exists(kept):
            number += 1
            kept = '{}-{}'.format(stamp, number)
        os.replace(run_dir, kept)
        print('moved the previous run to {} (use --resume to continue a run)'.format(kept))


def _tracking(args):
    """TensorBoard, unless --no-tensorboard or tensorboardX is missing (then said so)."""
    if not args.tensorboard:
        return None
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        print('TensorBoard: no events written: pip install researchutils[tensorboard]')
        return None
    print('TensorBoard: tensorboard --logdir {} shows the training'.format(args.out))
    return 'tensorboard'


def _slack_extensions(args):
    token, channel = os.environ.get('SLACK_BOT_TOKEN'), os.environ.get('SLACK_CHANNEL')
    if not (token and channel):
        print('Slack: set SLACK_BOT_TOKEN and SLACK_CHANNEL to post this run into a Slack '
              'thread (pip install researchutils[slack]).')
        return []
    from researchutils.chainer.training.extensions import SlackReport
    client = token
    if os.environ.get('SLACK_API_URL'):
        # Another Web API endpoint, e.g. a Slack-compatible test server.
        import slack_sdk
        client = slack_sdk.WebClient(token=token, base_url=os.environ['SLACK_API_URL'])
    report = SlackReport(client, channel=channel, upload=['final_loss.png', 'frames.png'],
                         entries=['epoch', 'k_step', 'main/k_step_error',
                                  'val/k_step_error', 'elapsed_time'])
    return [(report, (1, 'epoch'))]


def train_and_evaluate(args, setup, run_dir):
    """Trains (or resumes, or reloads) one run, writes its outputs, and returns the held-out
    ``MAX_K_STEP``-step errors per clip of its model and of the repeat-last-frame baseline."""
    params = Parameters(fixed_params={
        'model': setup.model_params,
        'training': {
            'batch_size': args.batch_size, 'num_epochs': args.epochs,
            'optimizer_cls': chainer.optimizers.Adam, 'optimizer_params': {'alpha': 1e-3},
            'losses': {'k_step_error': k_step_loss},
            'val_metrics': {'k_step_error': k_step_error},
            'lr_sched_cls': None, 'lr_sched_params': {},
        },
    })
    train = DataManager(BouncingBallsClips(0, args.train_clips, setup.train_render),
                        args.batch_size, sampler_cls=RandomSampler,
                        sampler_kwargs={'seed': args.seed}, n_process_augmentation=args.workers,
                        drop_last=True, seed=args.seed)
    held_out = BouncingBallsClips(HELD_OUT_SEED_OFFSET, args.val_clips, setup.held_out_render)
    val = DataManager(held_out, 64, sampler_cls=SequentialSampler)
    figure_clips = [held_out[i] for i in range(min(4, len(held_out)))]
    extensions = [(KStepCurriculum(args.epochs), (1, 'epoch')),
                  (FinalFigures(figure_clips, setup.last_seen),
                   chainer.training.triggers.ManualScheduleTrigger([args.epochs], 'epoch'))]
    extensions += _slack_extensions(args)
    experiment = ChainerExperiment(
        params, setup.model_cls, name=setup.name, save_path=args.out,
        key_mapping=setup.key_mapping, gpu_ids=[args.gpu] if args.gpu >= 0 else [],
        extensions=extensions, seed=args.seed, tracking=_tracking(args))
    if not os.path.exists(os.path.join(run_dir, 'experiment.json')):
        experiment.save()
    model = experiment.run(train, val)

    # The final weights: the same ones the figure shows and the errors below measure.
    save_model(os.path.join(run_dir, 'video_predictor.npz'), model)
    print(write_onnx(os.path.join(run_dir, 'video_predictor.onnx'), model, figure_clips[0],
                     next(iter(setup.key_mapping))))
    write_frames_png(os.path.join(run_dir, 'frames.png'), model, figure_clips,
                     setup.last_seen)

    model_error = Predictor(model, setup.key_mapping).evaluate(
        val, {'k_step_error': k_step_error})['k_step_error']
    batches = list(val)
    baseline = float(np.average(
        [repeat_last_frame_error(setup.last_seen(batch['data'])[:, None], batch['label'],
                                 MAX_K_STEP) for batch in batches],
        weights=[len(batch['data']) for batch in batches]))
    return model_error, baseline


def main(argv=None):
    args = parse_args(argv)
    started = time.time()
    setups = run_setups(args)
    run_dirs = _prepare_outputs(args, [setup.name for setup in setups])
    errors = [train_and_evaluate(args, setup, run_dir)
              for setup, run_dir in zip(setups, run_dirs)]
    if args.actions:
        return _compare_actions(errors, run_dirs, time.time() - started)
    (model_error, baseline), = errors
    print('held-out {}-step error per clip: model {:.4f}, repeat-last-frame baseline {:.4f}'
          .format(MAX_K_STEP, model_error, baseline))
    print('outputs in {}: video_predictor.npz, video_predictor.onnx, frames.png, loss.png, '
          'log, snapshots '
          '({:.0f} s)'.format(run_dirs[0], time.time() - started))
    if not model_error < baseline:
        print('the model did NOT beat the baseline; train longer (--epochs)')
        return 1
    print('the model beats the baseline by {:.0%}'.format(1 - model_error / baseline))
    return 0


def _compare_actions(errors, run_dirs, seconds):
    (with_actions, baseline), (without_actions, _) = errors
    print('held-out {}-step error per clip: with actions {:.4f}, without actions {:.4f}, '
          'repeat-last-frame baseline {:.4f}'.format(MAX_K_STEP, with_actions,
                                                     without_actions, baseline))
    print('outputs in {} and {}: video_predictor.npz, video_predictor.onnx, frames.png, '
          'loss.png, log, snapshots '
          '({:.0f} s)'.format(run_dirs[0], run_dirs[1], seconds))
    if not with_actions < min(without_actions, baseline):
        print('the model with actions did NOT beat both the model without them and the '
              'baseline; train longer (--epochs)')
        return 1
    print('the actions lower the error by {:.0%} (and the baseline\'s by {:.0%})'.format(
        1 - with_actions / without_actions, 1 - with_actions / baseline))
    return 0


if __name__ == '__main__':
    sys.exit(main())
