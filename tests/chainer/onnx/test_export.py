"""researchutils.chainer.onnx.export: every link exported and run in onnxruntime matches
Chainer's forward pass; bad input is refused before anything is written."""
import errno
import os
import subprocess
import sys

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.links import (
    ActionConditionedLSTM,
    ConvLSTM,
    DeconvolutionPS,
    GradClipLSTM,
)
from researchutils.chainer.onnx import export

onnx = pytest.importorskip('onnx', reason='the onnx extra: pip install researchutils[onnx]')
onnxruntime = pytest.importorskip('onnxruntime', reason='the onnx extra')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# float32: what the issue asks of every exported model, absolute and relative.
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def _session(path):
    """onnxruntime's CPU session of the file, after onnx's full check read it back."""
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=['CPUExecutionProvider'])


def _run(path, feeds):
    """{output name: array} of the file run on ``feeds``."""
    session = _session(path)
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def _random(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _state_feeds(link, prefix=''):
    return {prefix + 'c': link.c.array.copy(), prefix + 'h': link.h.array.copy()}


def _check_step(tmp_path, link, args, inputs):
    """Exports one step of ``link`` with its state, runs it in onnxruntime, and compares the
    output and the new state with Chainer's step from the same state."""
    path = tmp_path / 'step.onnx'
    feeds = dict(zip(inputs, args), **_state_feeds(link))
    export(link, args, path, states=['/'], input_names=inputs)
    got = _run(path, feeds)
    with chainer.using_config('train', False):
        y = link(*args)
    np.testing.assert_allclose(got['output'], y.array, **TOLERANCE)
    np.testing.assert_allclose(got['c_out'], link.c.array, **TOLERANCE)
    np.testing.assert_allclose(got['h_out'], link.h.array, **TOLERANCE)
    return got


# --- the LSTM step ---------------------------------------------------------------------

class _LSTMFunction(chainer.Chain):
    """F.lstm itself, the function no exporter knew."""

    def forward(self, c_prev, x):
        return F.lstm(c_prev, x)


@pytest.mark.parametrize('state_rows', [3, 5])
def test_f_lstm_matches_chainer_with_its_interleaved_gates(tmp_path, state_rows):
    rng = np.random.RandomState(0)
    # Gates far apart, so that a wrong gate order (a, i, f, o) changes every value.
    x = (_random(rng, 3, 4 * 4) * np.tile([3, 1, -2, 0.5], 4)).astype(np.float32)
    c_prev = _random(rng, state_rows, 4)
    export(_LSTMFunction(), (c_prev, x), tmp_path / 'lstm.onnx')
    got = _run(tmp_path / 'lstm.onnx', {'input_0': c_prev, 'input_1': x})
    c, h = F.lstm(c_prev, x)
    np.testing.assert_allclose(got['output_0'], c.array, **TOLERANCE)
    np.testing.assert_allclose(got['output_1'], h.array, **TOLERANCE)
    np.testing.assert_array_equal(got['output_0'][3:], c_prev[3:])


@pytest.mark.parametrize('opset_version', [7, 9, 10, 12])
def test_f_lstm_in_every_opset_its_operators_changed_in(tmp_path, opset_version):
    # Slice took attributes before opset 10; Constant held floats only before 9.
    rng = np.random.RandomState(10)
    x, c_prev = _random(rng, 3, 4 * 4), _random(rng, 5, 4)
    export(_LSTMFunction(), (c_prev, x), tmp_path / 'lstm.onnx', opset_version=opset_version)
    got = _run(tmp_path / 'lstm.onnx', {'input_0': c_prev, 'input_1': x})
    c, h = F.lstm(c_prev, x)
    np.testing.assert_allclose(got['output_0'], c.array, **TOLERANCE)
    np.testing.assert_allclose(got['output_1'], h.array, **TOLERANCE)


def test_l_lstm_step_takes_and_gives_its_state(tmp_path):
    rng = np.random.RandomState(1)
    link = L.LSTM(3, 4)
    link(_random(rng, 2, 3))
    _check_step(tmp_path, link, (_random(rng, 2, 3),), ['x'])


@pytest.mark.parametrize('batch', [3, 2])
def test_grad_clip_lstm_step_exports_as_the_lstm_step(tmp_path, batch):
    # batch 2 < 3 rows of state: the rows past the batch keep their state.
    rng = np.random.RandomState(2)
    link = GradClipLSTM(3, 4, clip_min=-0.1, clip_max=0.1)
    link(_random(rng, 3, 3))
    _check_step(tmp_path, link, (_random(rng, batch, 3),), ['x'])


def test_action_conditioned_lstm_step(tmp_path):
    rng = np.random.RandomState(3)
    link = ActionConditionedLSTM(3, 4, action_size=2, clip_min=-1.0, clip_max=1.0)
    link(_random(rng, 2, 3), _random(rng, 2, 2))
    _check_step(tmp_path, link, (_random(rng, 2, 3), _random(rng, 2, 2)), ['x', 'a'])


def test_conv_lstm_step_with_its_peepholes(tmp_path):
    rng = np.random.RandomState(4)
    link = ConvLSTM(2, 3, 3, clip_min=-1.0, clip_max=1.0)
    link(_random(rng, 2, 2, 5, 6))
    for peephole in (link.Wci, link.Wcf, link.Wco):       # created zero: make them count
        peephole.array[...] = _random(rng, *peephole.shape) * 2
    got = _check_step(tmp_path, link, (_random(rng, 2, 2, 5, 6),), ['x'])
    without = ConvLSTM(2, 3, 3)
    without.copyparams(link)
    for peephole in (without.Wci, without.Wcf, without.Wco):
        peephole.array[...] = 0
    assert not np.allclose(got['h_out'], without(*(_random(rng, 2, 2, 5, 6),)).array)


def test_a_stack_of_two_lstm_steps_run_step_by_step(tmp_path):
    rng = np.random.RandomState(5)
    model = chainer.Sequential(L.LSTM(3, 5), GradClipLSTM(5, 4, clip_min=-1, clip_max=1))
    steps = [_random(rng, 2, 3) for _ in range(4)]
    model(steps[0])
    path = tmp_path / 'stack.onnx'
    export(model, steps[1], path, states=['/0', '/1'])
    session_feeds = dict(_state_feeds(model[0], '0/'), **_state_feeds(model[1], '1/'))
    session = _session(path)
    names = [output.name for output in session.get_outputs()]
    assert names == ['output', '0/c_out', '0/h_out', '1/c_out', '1/h_out']
    for x in steps[1:]:                        # the state fed back, as a runtime would
        got = dict(zip(names, session.run(names, dict(session_feeds, input=x))))
        expected = model(x).array
        np.testing.assert_allclose(got['output'], expected, **TOLERANCE)
        session_feeds = {name: got[name + '_out'] for name in ('0/c', '0/h', '1/c', '1/h')}


# --- the other links, and plain Chainer ---------------------------------------------------

@pytest.mark.parametrize('in_channels,out_channels,stride', [
    (4, 3, 2),        # Chainer's convolution, then depth2space
    (8, 1, 2),        # on the CPU: a flipped kernel's deconvolution (col2im)
    (4, 2, (2, 1)),   # unequal strides: the shuffle by reshape and transpose
])
def test_deconvolution_ps(tmp_path, in_channels, out_channels, stride):
    rng = np.random.RandomState(6)
    link = DeconvolutionPS(in_channels, out_channels, ksize=4, stride=stride, pad=1)
    x = _random(rng, 2, in_channels, 5, 6)
    export(link, x, tmp_path / 'up.onnx')
    got = _run(tmp_path / 'up.onnx', {'input': x})
    np.testing.assert_allclose(got['output'], link(x).array, **TOLERANCE)


def test_a_plain_chainer_model_keeps_exporting(tmp_path):
    rng = np.random.RandomState(7)
    model = chainer.Sequential(L.Convolution2D(2, 4, 3, pad=1), F.relu,
                               L.Deconvolution2D(4, 2, 4, stride=2, pad=1),
                               lambda h: F.max_pooling_2d(h, 2), L.Linear(None, 5), F.softmax)
    x = _random(rng, 2, 2, 6, 6)
    y = model(x).array
    export(model, x, tmp_path / 'plain.onnx', input_names=['image'], output_names=['probs'])
    np.testing.assert_allclose(_run(tmp_path / 'plain.onnx', {'image': x})['probs'], y,
                               **TOLERANCE)


# --- the demo's video predictor ------------------------------------------------------------

def _video_prediction():
    sys.path.insert(0, os.path.join(ROOT, 'examples', 'video_prediction'))
    import bouncing_balls
    import model
    return bouncing_balls, model


def test_the_demos_trained_video_predictor_feeding_back_its_predictions(tmp_path):
    # Trained briefly (30 Adam steps of a small model, about a second): weights that
    # learned something, not the initializer's.
    bouncing_balls, model_module = _video_prediction()
    np.random.seed(0)
    predictor = model_module.VideoPredictor(frame_size=16, n_hidden=32, eval_k_step=5)
    optimizer = chainer.optimizers.Adam(1e-2)
    optimizer.setup(predictor)
    losses = []
    for step in range(30):
        clips = np.stack([bouncing_balls.render_clip([step * 8 + i], 0, n_frames=6)
                          for i in range(8)])
        pred = predictor(clips[:, :3])['pred']
        loss = model_module.k_step_loss(pred, clips[:, 3:])
        predictor.cleargrads()
        loss.backward()
        optimizer.update()
        losses.append(float(loss.array))
    assert max(losses[-5:]) < 0.5 * losses[0]     # it learned (from about 225 to 35)

    frames = np.stack([bouncing_balls.render_clip([10 ** 6 + i], 0, n_frames=3)
                       for i in range(2)])
    path = tmp_path / 'video_predictor.onnx'
    export(predictor, frames, path, input_names=['frames'])
    with chainer.using_config('train', False):
        expected = predictor(frames)['pred'].array
    got = _run(path, {'frames': frames})['pred']
    assert got.shape == (2, 5, 16 * 16)        # five frames, each from the one before
    np.testing.assert_allclose(got, expected, **TOLERANCE)


# --- names, state, and bad input ---------------------------------------------------------

def test_export_leaves_the_models_state_as_it_was(tmp_path):
    rng = np.random.RandomState(8)
    link = GradClipLSTM(3, 4)
    link(_random(rng, 2, 3))
    c, h = link.c, link.h
    export(link, _random(rng, 2, 3), tmp_path / 'step.onnx', states=['/'])
    assert link.c is c and link.h is h
    fresh = L.LSTM(3, 4)
    export(fresh, _random(rng, 2, 3), tmp_path / 'first.onnx')
    assert fresh.c is None and fresh.h is None


def test_the_graph_has_no_parameter_among_its_inputs_and_returns_the_checked_model(tmp_path):
    proto = export(L.Linear(3, 2), np.zeros((1, 3), np.float32), tmp_path / 'linear.onnx')
    assert [value.name for value in proto.graph.input] == ['input']
    assert sorted(tensor.name for tensor in proto.graph.initializer) == ['param_W', 'param_b']
    assert onnx.load(str(tmp_path / 'linear.onnx')) == proto


class _Custom(chainer.function_node.FunctionNode):
    def forward(self, inputs):
        return inputs[0] * 2,


class _Block(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.inner = L.Linear(3, 3)

    def forward(self, x):
        return _Custom().apply((self.inner(x),))[0]


def _model_with_an_unknown_function():
    model = chainer.Chain()
    with model.init_scope():
        model.first = L.Linear(3, 3)
        model.block = _Block()
    model.forward = lambda x: model.block(F.relu(model.first(x)))
    return model


def test_a_function_without_converter_is_named_with_its_place_and_nothing_is_written(
        tmp_path):
    path = tmp_path / 'model.onnx'
    with pytest.raises(ValueError, match=r'^cannot export Chain to ONNX: no converter for '
                                         r'_Custom \(called in /block \(_Block\)\)\. Pass '
                                         r'converters=\{name: converter\} to export \(see the '
                                         r'ONNX tutorial of researchutils\), or compute this '
                                         r'part another way$'):
        export(_model_with_an_unknown_function(), np.zeros((1, 3), np.float32), path)
    assert os.listdir(tmp_path) == []


class _OldStyle(chainer.Function):
    """A chainer.Function (Chainer's older kind), which FunctionAdapter wraps."""

    def forward(self, inputs):
        return inputs[0] * 2,


def test_an_old_style_function_without_converter_is_named_by_its_class(tmp_path):
    with pytest.raises(ValueError, match=r'no converter for _OldStyle \(called in / '
                                         r'\(Sequential\)\)'):
        export(chainer.Sequential(_OldStyle()), np.zeros((1, 3), np.float32),
               tmp_path / 'model.onnx')


def test_an_input_returned_unchanged_is_an_output_of_its_own(tmp_path):
    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    export(chainer.Sequential(lambda a: {'same': a, 'double': a * 2}), x,
           tmp_path / 'model.onnx')
    got = _run(tmp_path / 'model.onnx', {'input': x})
    assert sorted(got) == ['double', 'same']
    np.testing.assert_array_equal(got['same'], x)
    np.testing.assert_array_equal(got['double'], 2 * x)


def test_a_function_without_converter_beside_an_input_is_found(tmp_path):
    # The graph is walked whole: an input met first does not end the walk.
    model = chainer.Sequential(lambda a: _Custom().apply((a,))[0] + a)
    with pytest.raises(ValueError, match=r'no converter for _Custom \(called in / '
                                         r'\(Sequential\)\)'):
        export(model, np.zeros((1, 3), np.float32), tmp_path / 'model.onnx')


def test_a_parameter_the_forward_never_initialized_is_left_out_with_onnx_chainers_warning(
        tmp_path):
    model = chainer.Chain()
    with model.init_scope():
        model.used = L.Linear(3, 2)
        model.unused = L.Linear(None, 2)
    model.forward = model.used
    with pytest.warns(UserWarning, match="The parameter '/unused/W' is not initialized, skip"):
        proto = export(model, np.zeros((1, 3), np.float32), tmp_path / 'model.onnx')
    # The bias exists (its size is known); the weight waits for its input size.
    assert sorted(tensor.name for tensor in proto.graph.initializer) == [
        'param_unused_b', 'param_used_W', 'param_used_b']


def test_a_failed_export_leaves_an_existing_file_as_it_was(tmp_path):
    path = tmp_path / 'model.onnx'
    path.write_bytes(b'the previous model')
    with pytest.raises(ValueError, match='_Custom'):
        export(_model_with_an_unknown_function(), np.zeros((1, 3), np.float32), path)
    assert path.read_bytes() == b'the previous model'
    assert os.listdir(tmp_path) == ['model.onnx']


def test_a_write_that_fails_midway_leaves_the_existing_file_whole_and_names_it(tmp_path):
    # A real failing write: the file size limit (RLIMIT_FSIZE) of a process of its own is
    # below the model's size, so the write stops with EFBIG, as on a full disk.
    path = tmp_path / 'model.onnx'
    path.write_bytes(b'the previous model')
    code = ('import resource, signal, sys\n'
            'import numpy, chainer.links as L\n'
            'from researchutils.chainer.onnx import export\n'
            'signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n'
            'resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n'
            'try:\n'
            '    export(L.Linear(200, 200), numpy.zeros((1, 200), numpy.float32), sys.argv[1])\n'
            'except OSError as e:\n'
            '    print(e.errno, e.__notes__)\n')
    out = subprocess.run([sys.executable, '-c', code, str(path)], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    assert out.strip() == '{} {!r}'.format(
        errno.EFBIG, ['while writing the ONNX file {!r}'.format(str(path))])
    assert path.read_bytes() == b'the previous model'
    assert os.listdir(tmp_path) == ['model.onnx']


def test_a_converter_given_by_the_user_exports_the_unknown_function(tmp_path):
    def double(params):
        from onnx_chainer import onnx_helper
        two = params.context.add_const(np.array(2, np.float32), 'two')
        return onnx_helper.make_node('Mul', [params.input_names[0], two],
                                     params.output_names),

    model = _model_with_an_unknown_function()
    x = np.random.RandomState(9).uniform(-1, 1, (2, 3)).astype(np.float32)
    export(model, x, tmp_path / 'model.onnx', converters={'_Custom': double})
    np.testing.assert_allclose(_run(tmp_path / 'model.onnx', {'input': x})['output'],
                               model(x).array, **TOLERANCE)


def test_without_onnx_the_error_names_the_extra(tmp_path):
    code = ('import sys\n'
            'sys.modules["onnx"] = None\n'
            'import numpy, chainer.links as L\n'
            'from researchutils.chainer.onnx import export\n'
            'try:\n'
            '    export(L.Linear(3, 2), numpy.zeros((1, 3), numpy.float32), sys.argv[1])\n'
            'except ImportError as e:\n'
            '    print("ImportError:", e)\n')
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path / 'm.onnx')], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    assert 'needs onnx: pip install researchutils[onnx]' in out
    assert os.listdir(tmp_path) == []
