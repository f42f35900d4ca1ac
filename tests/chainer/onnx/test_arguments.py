"""researchutils.chainer.onnx._arguments, through export: names that would wire a wrong graph,
a Variable given twice or with a history, and arguments the model's forward does not take
are refused, naming them, before the model runs and before anything is written."""
import chainer
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.onnx import export
from tests.chainer.onnx.test_export import TOLERANCE, _run

pytest.importorskip('onnx', reason='the onnx extra: pip install researchutils[onnx]')
pytest.importorskip('onnxruntime', reason='the onnx extra')

X = np.arange(6, dtype=np.float32).reshape(2, 3)
CLASH = 'each input and output of the graph needs a name of its own'


class _Difference(chainer.Chain):
    """a - 2 * b: an input wired to the other shows."""

    def forward(self, a, b):
        return a - 2 * b


class _Counted(chainer.Chain):
    """Counts its forward passes: a refusal "before the model runs" leaves 0."""

    def __init__(self, inner):
        super().__init__()
        self.calls = 0
        with self.init_scope():
            self.inner = inner

    def forward(self, *args):
        self.calls += 1
        return self.inner(*args)


class _MLP(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.layer = L.Linear(3, 2)

    def forward(self, x):
        return self.layer(x)


def _lstm_with_state():
    link = L.LSTM(3, 2)
    link(X)
    return link


def _refused(tmp_path, error, match, model, args, **kwargs):
    counted = _Counted(model)
    with pytest.raises(error, match=match):
        export(counted, args, tmp_path / 'model.onnx', **kwargs)
    assert counted.calls == 0
    assert list(tmp_path.iterdir()) == []


def test_two_inputs_named_alike_are_refused_not_merged(tmp_path):
    _refused(tmp_path, ValueError, "the name 'y' is given to input 0 \\(input_names\\) and to "
             "input 1 \\(input_names\\): " + CLASH, _Difference(), (X, X), input_names=['y', 'y'])


def test_distinct_names_keep_the_inputs_apart(tmp_path):
    export(_Difference(), (X, X), tmp_path / 'd.onnx', input_names=['y', 'z'])
    got = _run(tmp_path / 'd.onnx', {'y': X, 'z': X + 1})['output']
    np.testing.assert_allclose(got, X - 2 * (X + 1), **TOLERANCE)


def test_an_input_named_as_a_state_is_refused(tmp_path):
    link = _lstm_with_state()
    with pytest.raises(ValueError, match="the name 'c' is given to input 0 \\(input_names\\) "
                                         "and to the state c of '/' \\(states\\): " + CLASH):
        export(link, X, tmp_path / 'step.onnx', states=['/'], input_names=['c'])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('name', ['c_out', 'h_out'])
def test_an_output_named_as_a_state_output_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="the name '{0}' is given to output 0 "
                                         "\\(output_names\\) and to the state output {0} of "
                                         "'/' \\(states\\)".format(name)):
        export(_lstm_with_state(), X, tmp_path / 'step.onnx', states=['/'],
               output_names=[name])


def test_a_states_names_keep_the_links_name_whole(tmp_path):
    model = chainer.Chain()
    with model.init_scope():
        model.Xcell = L.LSTM(3, 2)
    model.forward = lambda x: model.Xcell(x)
    model.Xcell(X)
    proto = export(model, X, tmp_path / 'step.onnx', states=['/Xcell'])
    assert [value.name for value in proto.graph.input] == ['input', 'Xcell/c', 'Xcell/h']
    assert [value.name for value in proto.graph.output] == ['output', 'Xcell/c_out',
                                                            'Xcell/h_out']


@pytest.mark.parametrize('kwargs,match', [
    ({'output_names': ['input']},
     "^the name 'input' is given to input 0 and to output 0 \\(output_names\\): " + CLASH),
    ({'input_names': ['a'], 'output_names': ['a']},
     "the name 'a' is given to input 0 \\(input_names\\) and to output 0 \\(output_names\\)"),
    ({'input_names': ['']}, 'input 0 \\(input_names\\) has an empty name'),
    ({'output_names': ['']}, 'output 0 \\(output_names\\) has an empty name'),
])
def test_an_output_named_as_an_input_or_an_empty_name_is_refused(tmp_path, kwargs, match):
    _refused(tmp_path, ValueError, match, L.Linear(3, 2), X, **kwargs)


def test_a_default_output_name_given_to_an_input_is_refused_before_conversion(tmp_path):
    # The outputs' names are known once the model returns (a dict's keys), so this one
    # is found after the forward pass, still before anything is converted or written.
    with pytest.raises(ValueError, match="the name 'output' is given to input 0 "
                                         "\\(input_names\\) and to output 0: " + CLASH):
        export(L.Linear(3, 2), X, tmp_path / 'model.onnx', input_names=['output'])
    assert list(tmp_path.iterdir()) == []


def test_the_same_variable_twice_is_refused(tmp_path):
    x = chainer.Variable(X)
    _refused(tmp_path, ValueError, 'args\\[0\\] and args\\[1\\] are the same Variable',
             _Difference(), (x, x))


def test_the_same_array_twice_gives_two_inputs(tmp_path):
    export(_Difference(), (X, X), tmp_path / 'd.onnx')
    got = _run(tmp_path / 'd.onnx', {'input_0': X, 'input_1': X + 1})['output']
    np.testing.assert_allclose(got, X - 2 * (X + 1), **TOLERANCE)


def test_a_variable_with_a_history_is_refused(tmp_path):
    computed = chainer.Variable(X) * 2
    _refused(tmp_path, ValueError, 'args\\[1\\] is a Variable computed by MulConstant \\(it '
             'has a history\\)', _Difference(), (X, computed))


def test_a_classifier_given_only_the_inputs_names_its_predictor(tmp_path):
    # Issue 49: Classifier's forward takes (*args), then calls its predictor with none.
    classifier = L.Classifier(_MLP())
    message = ('cannot export Classifier: its forward takes more arguments than the 1 given, '
               'and calls /predictor (_MLP) with 0 argument(s), which _MLP.forward does not '
               'take (missing a required argument: \'x\'). To export what /predictor computes '
               'alone, export model.predictor')
    with pytest.raises(TypeError) as raised:
        export(classifier, X, tmp_path / 'model.onnx')
    assert str(raised.value) == message
    assert list(tmp_path.iterdir()) == []
    export(classifier.predictor, X, tmp_path / 'model.onnx')    # as the message says
    np.testing.assert_allclose(_run(tmp_path / 'model.onnx', {'input': X})['output'],
                               classifier.predictor(X).array, **TOLERANCE)


def test_a_nested_link_called_wrongly_is_named_with_its_path(tmp_path):
    outer = chainer.Chain()
    with outer.init_scope():
        outer.block = L.Classifier(_MLP())
    outer.forward = lambda x: outer.block(x)
    with pytest.raises(TypeError, match='calls /block/predictor \\(_MLP\\) with 0 argument'
                                        '.*export model.block.predictor$'):
        export(outer, X, tmp_path / 'model.onnx')


@pytest.mark.parametrize('args,match', [
    ((X, X), 'args: _MLP.forward does not take the 2 argument\\(s\\) given \\(too many '
             'positional arguments\\)'),
    ((), 'args: _MLP.forward does not take the 0 argument\\(s\\) given \\(missing a '
         'required argument: \'x\'\\)'),
])
def test_a_forward_that_does_not_take_the_args_names_the_models_class(tmp_path, args, match):
    model = _MLP()
    with pytest.raises(TypeError, match=match):
        export(model, args, tmp_path / 'model.onnx')
    assert list(tmp_path.iterdir()) == []


class _TwoParts(chainer.Chain):
    """Calls /first rightly with one of its two arguments, then /second with none."""

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.first = L.Linear(3, 2)
            self.second = _MLP()

    def forward(self, a, b):
        self.first(a)
        return self.second()


def test_the_link_to_export_is_the_one_called_wrongly_not_one_that_ran_before(tmp_path):
    with pytest.raises(TypeError, match='its forward takes more arguments than the 2 given, '
                                        'and calls /second \\(_MLP\\) with 0 argument.*'
                                        'export model.second$'):
        export(_TwoParts(), (X, X), tmp_path / 'model.onnx')
