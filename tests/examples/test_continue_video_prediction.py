"""examples/pytorch/continue_video_prediction.py: a Chainer run of the demo's model, continued
in PyTorch from its Trainer snapshot, has Chainer's own continuation's losses."""
import os
import sys

import numpy
import pytest

torch = pytest.importorskip('torch')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'examples', 'pytorch'))

import continue_video_prediction as example  # noqa: E402

from researchutils.pytorch import ChainerAdam  # noqa: E402

pytestmark = pytest.mark.slow(reason='trains the demo model 205 iterations in Chainer and 100 '
                                     'in torch: 6 s of CPU, more on a busy machine')
ARGS = ['--warm-up', '5', '--iterations', '100', '--torch-threads', '1']


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """Both continuations of one snapshot (kept in the run's folder)."""
    threads = torch.get_num_threads()
    out = str(tmp_path_factory.mktemp('continued'))
    try:
        chainer_losses, torch_losses = example.main(ARGS + ['--out', out])
    finally:
        torch.set_num_threads(threads)
    return out, numpy.array(chainer_losses), numpy.array(torch_losses)


def relative(first, second):
    return numpy.abs(first - second) / numpy.abs(second)


def test_torch_losses_equal_chainers_at_every_iteration(run):
    _, chainer_losses, torch_losses = run
    assert len(chainer_losses) == len(torch_losses) == 100
    assert relative(torch_losses, chainer_losses).max() < 1e-4


def test_the_losses_compared_are_of_different_batches_and_training(run):
    # The equality means something: consecutive batches' losses differ far more than 1e-4,
    # so reading one batch off (the iterator's position lost) would be seen.
    _, chainer_losses, _ = run
    assert relative(chainer_losses[1:], chainer_losses[:-1]).min() > 1e-3


def test_without_adams_state_the_continuation_leaves_chainers(run):
    # The optimizer's state matters here: fresh Adam moments on the same weights and
    # batches go elsewhere (Adam's first steps are its largest).
    out, chainer_losses, _ = run
    args = example.parse_args(ARGS + ['--out', out])
    model, _, iterator = example.torch_resume(args, os.path.join(out, 'snapshot'))
    fresh = ChainerAdam(model.parameters(), lr=args.alpha)
    losses = numpy.array(example.torch_train(model, fresh, iterator, 10))
    assert losses[0] == pytest.approx(chainer_losses[0], rel=1e-5)  # same weights and batch
    assert relative(losses[1:], chainer_losses[1:10]).max() > 1e-4
