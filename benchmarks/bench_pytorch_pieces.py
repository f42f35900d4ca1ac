"""The toolkit's pieces in torch against their Chainer twins: forward and backward on the CPU.

Each row times one training step of a piece, forward and backward, in Chainer
(``researchutils.chainer``) and in torch (``researchutils.pytorch``), the two given the same
weights and inputs, in alternating rounds in one process; the ratio is torch's time over
Chainer's (below 1: torch is faster). The recurrent pieces run a short sequence that carries
the state, with the clip active. Both sides compute on one thread (NumPy's BLAS and torch's
intra-op pool), so the ratio compares the code, not how each uses a shared machine's cores.
Needs torch (``pip install researchutils[torch]``).
"""
import os
import sys

for _variable in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ[_variable] = '1'

import chainer  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _timing import compare, report  # noqa: E402

import researchutils.chainer.functions as chainer_functions  # noqa: E402
import researchutils.chainer.links as chainer_links  # noqa: E402
from tests.support.torch_twins import copy_chainer_parameters  # noqa: E402

try:
    import torch

    import researchutils.pytorch as pieces
except ImportError as error:
    sys.exit('bench_pytorch_pieces needs torch: {}'.format(error))

CLIP = 0.01


def _tensor(array, requires_grad=False):
    return torch.tensor(array, requires_grad=requires_grad)


def _recurrent_pair(link, module, inputs):
    """Step functions running ``inputs`` through the link and the module from a reset state."""
    copy_chainer_parameters(link, module)
    torch_inputs = [tuple(_tensor(part) for part in step) for step in inputs]

    def chainer_step():
        link.reset_state()
        link.cleargrads()
        sum(chainer.functions.sum(link(*step)) for step in inputs).backward()

    def torch_step():
        module.reset_state()
        module.zero_grad()
        sum(module(*step).sum() for step in torch_inputs).backward()

    return chainer_step, torch_step


def grad_clip_lstm_case(rng):
    c_prev = rng.randn(64, 256).astype(np.float32)
    x = rng.randn(64, 1024).astype(np.float32)
    c_tensor, x_tensor = _tensor(c_prev, True), _tensor(x, True)

    def chainer_step():
        c_var, x_var = chainer.Variable(c_prev), chainer.Variable(x)
        c, h = chainer_functions.grad_clip_lstm(c_var, x_var, -CLIP, CLIP)
        (chainer.functions.sum(c) + chainer.functions.sum(h)).backward()

    def torch_step():
        c_tensor.grad = x_tensor.grad = None
        c, h = pieces.grad_clip_lstm(c_tensor, x_tensor, -CLIP, CLIP)
        (c.sum() + h.sum()).backward()

    return chainer_step, torch_step


def loss_case(rng):
    x1 = rng.randn(32, 10, 3, 32, 32).astype(np.float32)
    x2 = rng.randn(*x1.shape).astype(np.float32)
    t1, t2 = _tensor(x1, True), _tensor(x2)

    def chainer_step():
        variable = chainer.Variable(x1)
        chainer_functions.average_k_step_squared_error(variable, x2, 10).backward()

    def torch_step():
        t1.grad = None
        pieces.average_k_step_squared_error(t1, t2, 10).backward()

    return chainer_step, torch_step


def grad_clip_lstm_link_case(rng):
    inputs = [(rng.randn(32, 128).astype(np.float32),) for _ in range(5)]
    return _recurrent_pair(chainer_links.GradClipLSTM(128, 256, clip_min=-CLIP, clip_max=CLIP),
                           pieces.GradClipLSTM(128, 256, clip_min=-CLIP, clip_max=CLIP), inputs)


def action_conditioned_lstm_case(rng):
    inputs = [(rng.randn(32, 128).astype(np.float32), rng.randn(32, 8).astype(np.float32))
              for _ in range(5)]
    arguments = dict(action_size=8, clip_min=-CLIP, clip_max=CLIP)
    return _recurrent_pair(chainer_links.ActionConditionedLSTM(128, 256, **arguments),
                           pieces.ActionConditionedLSTM(128, 256, **arguments), inputs)


def conv_lstm_case(rng):
    inputs = [(rng.randn(4, 16, 32, 32).astype(np.float32),) for _ in range(3)]
    link = chainer_links.ConvLSTM(16, 32, 3, clip_min=-CLIP, clip_max=CLIP)
    module = pieces.ConvLSTM(16, 32, 3, clip_min=-CLIP, clip_max=CLIP)
    link(inputs[0][0])  # makes the peepholes, whose size the first step fixes
    module(_tensor(inputs[0][0]))
    return _recurrent_pair(link, module, inputs)


def deconvolution_ps_case(rng):
    x = rng.randn(8, 64, 32, 32).astype(np.float32)
    link = chainer_links.DeconvolutionPS(64, 32, ksize=4, stride=2, pad=1)
    module = pieces.DeconvolutionPS(64, 32, ksize=4, stride=2, pad=1)
    copy_chainer_parameters(link, module)
    tensor = _tensor(x, True)

    def chainer_step():
        link.cleargrads()
        chainer.functions.sum(link(chainer.Variable(x))).backward()

    def torch_step():
        module.zero_grad()
        tensor.grad = None
        module(tensor).sum().backward()

    return chainer_step, torch_step


# (title, case, calls per round): a step of a millisecond is timed over more calls.
CASES = [
    ('grad_clip_lstm (B=64, U=256)', grad_clip_lstm_case, 30),
    ('average_k_step_squared_error (32x10x3x32x32)', loss_case, 10),
    ('GradClipLSTM (5 steps, B=32, 128->256)', grad_clip_lstm_link_case, 3),
    ('ActionConditionedLSTM (5 steps, B=32, 128->256)', action_conditioned_lstm_case, 3),
    ('ConvLSTM (3 steps, B=4, 16->32, 32x32)', conv_lstm_case, 1),
    ('DeconvolutionPS (B=8, 64->32, 32x32, x2)', deconvolution_ps_case, 1),
]


def main():
    torch.set_num_threads(1)
    print('torch {} ({} thread), chainer {}, numpy {}; CPU; forward + backward, the clip '
          'active'.format(torch.__version__, torch.get_num_threads(), chainer.__version__,
                          np.__version__))
    for title, case, number in CASES:
        chainer_step, torch_step = case(np.random.RandomState(0))
        medians = compare({'chainer': chainer_step, 'torch': torch_step},
                          repeat=7, number=number, warmup=1)
        report(title, medians, 'chainer')


if __name__ == '__main__':
    main()
