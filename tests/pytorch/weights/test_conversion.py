"""from_chainer (researchutils/pytorch/weights/conversion.py) on the connection links, the
batch normalization, the containers, and links it must refuse: each converted module equals
its Chainer link on random weights, in the output (1e-6) and every gradient (1e-5)."""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import pytest

torch = pytest.importorskip('torch')

from researchutils.pytorch.nn.containers import Chain  # noqa: E402
from researchutils.pytorch.weights import conversion, from_chainer  # noqa: E402
from tests.pytorch.weights.ported import (  # noqa: E402
    assert_close,
    assert_gradients_equal,
    assert_outputs_equal,
    backward_both,
    both,
    check_ported,
    randomize,
)


def _floats(*shape, seed=2):
    return numpy.random.RandomState(seed).standard_normal(shape).astype(numpy.float32)


# (id, link factory, input arrays): each a case where the option acts.
CASES = [
    ('linear', lambda: L.Linear(3, 4), [_floats(5, 3)]),
    ('linear_flattens', lambda: L.Linear(6, 4), [_floats(5, 2, 3)]),
    ('linear_nobias', lambda: L.Linear(3, 4, nobias=True), [_floats(5, 3)]),
    ('convolution_2d', lambda: L.Convolution2D(4, 6, 3, stride=2, pad=1, groups=2),
     [_floats(2, 4, 7, 6)]),
    ('convolution_2d_dilate', lambda: L.Convolution2D(3, 2, (3, 2), pad=(2, 1), dilate=2),
     [_floats(2, 3, 7, 6)]),
    ('dilated_convolution_2d', lambda: L.DilatedConvolution2D(3, 2, 3, pad=2, dilate=2),
     [_floats(2, 3, 8, 8)]),
    ('convolution_1d', lambda: L.ConvolutionND(1, 3, 4, 3, stride=2, pad=1), [_floats(2, 3, 9)]),
    ('convolution_3d', lambda: L.ConvolutionND(3, 2, 3, 2, nobias=True),
     [_floats(2, 2, 4, 3, 3)]),
    ('deconvolution_2d', lambda: L.Deconvolution2D(3, 4, 3, stride=2, pad=1),
     [_floats(2, 3, 4, 5)]),
    ('deconvolution_2d_outsize', lambda: L.Deconvolution2D(3, 2, 3, stride=2, outsize=(10, 12)),
     [_floats(2, 3, 4, 5)]),
    ('deconvolution_2d_groups', lambda: L.Deconvolution2D(4, 6, 2, groups=2),
     [_floats(2, 4, 3, 3)]),
    ('depthwise_convolution_2d', lambda: L.DepthwiseConvolution2D(3, 2, 3, stride=1, pad=1),
     [_floats(2, 3, 5, 4)]),
    ('highway', lambda: L.Highway(4), [_floats(5, 4)]),
    ('highway_tanh_nobias', lambda: L.Highway(4, nobias=True, activate=F.tanh), [_floats(5, 4)]),
    ('maxout', lambda: L.Maxout(3, 4, 3), [_floats(5, 3)]),
    ('sequential', lambda: chainer.Sequential(L.Linear(3, 4), F.relu, L.Linear(4, 5), F.tanh,
                                              L.Maxout(5, 2, 2)), [_floats(5, 3)]),
]


@pytest.mark.parametrize('make_link, arrays', [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_converted_link_equals_chainer_in_output_and_every_gradient(make_link, arrays):
    link = randomize(make_link())
    compared = check_ported(link, from_chainer(link), *arrays)
    assert compared  # every parameter, by name


def test_sequential_names_its_links_as_chainer_does():
    # Chainer 7's append numbers the third link '1' and the second '2'
    model = chainer.Sequential(L.Linear(3, 4), F.relu, L.Linear(4, 5), L.Linear(5, 2))
    assert [getattr(layer, 'name', None) for layer in model] == ['0', None, '2', '1']
    module = from_chainer(model)
    assert dict(module.named_children())['2'].weight.shape == (5, 4)
    assert dict(module.named_children())['1'].weight.shape == (2, 5)


@pytest.mark.parametrize('ignore_label', [-1, 2])
def test_embed_id_gives_zeros_and_no_gradient_for_ignore_label(ignore_label):
    link = randomize(L.EmbedID(5, 3, ignore_label=ignore_label))
    ids = numpy.array([[0, ignore_label, 4], [ignore_label, 2 if ignore_label != 2 else 1, 3]],
                      dtype=numpy.int32)
    module = from_chainer(link)
    chainer_out = link(ids)
    torch_out = module(torch.from_numpy(ids))
    assert_outputs_equal(chainer_out, torch_out)
    assert not torch_out[ids == ignore_label].any()
    backward_both(chainer_out, torch_out)
    assert_gradients_equal(link, module)
    if ignore_label == 2:
        assert not module.weight.grad[2].any()


def _batch_norm_steps(link, module, shape, steps, train):
    module.train(train)
    for step in range(steps):
        link.cleargrads()
        module.zero_grad()
        x_chainer, x_torch = both(_floats(*shape, seed=10 + step) * 3 + 1)
        with chainer.using_config('train', train):
            chainer_out = link(x_chainer)
        torch_out = module(x_torch)
        assert_outputs_equal(chainer_out, torch_out, 'step {}'.format(step))
        backward_both(chainer_out, torch_out)
        assert_gradients_equal(link, module, [(x_chainer, x_torch)])
        assert_close(module.running_mean, link.avg_mean, 1e-6, 'running mean')
        assert_close(module.running_var, link.avg_var, 1e-6, 'running variance')


@pytest.mark.parametrize('shape', [(6, 3), (4, 3, 5, 2), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize('decay', [0.9, 0.5])
def test_batch_normalization_train_steps_update_statistics_as_chainer(shape, decay):
    link = randomize(L.BatchNormalization(3, decay=decay, eps=1e-3))
    link.avg_mean[...] = _floats(3, seed=5)
    link.avg_var[...] = numpy.abs(_floats(3, seed=6)) + 0.5
    module = from_chainer(link)
    assert module.momentum == pytest.approx(1 - decay)
    _batch_norm_steps(link, module, shape, steps=3, train=True)
    # the statistics moved: the comparison above was of real updates
    assert not numpy.allclose(link.avg_mean, _floats(3, seed=5))
    _batch_norm_steps(link, module, shape, steps=2, train=False)


@pytest.mark.parametrize('use_gamma, use_beta', [(False, True), (True, False), (False, False)])
def test_batch_normalization_without_gamma_or_beta(use_gamma, use_beta):
    link = randomize(L.BatchNormalization(3, use_gamma=use_gamma, use_beta=use_beta))
    module = from_chainer(link)
    assert (module.weight is None) != use_gamma and (module.bias is None) != use_beta
    _batch_norm_steps(link, module, (5, 3, 2), steps=2, train=True)


class _Encoder(chainer.Chain):

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.conv = L.Convolution2D(2, 3, 3)
            self.norm = L.BatchNormalization(2)
            self.layers = chainer.ChainList(L.Linear(3, 4), L.Linear(4, 2))
            self.scale = chainer.Parameter(numpy.float32(2.0), ())

    def forward(self, x):
        h = F.mean(F.relu(self.conv(self.norm(x))), axis=(2, 3))
        return self.layers[1](self.layers[0](h)) * self.scale


def test_chain_becomes_its_tree_without_a_forward():
    link = randomize(_Encoder())
    module = from_chainer(link)
    assert isinstance(module, Chain)
    assert sorted(name for name, _ in module.named_children()) == ['conv', 'layers', 'norm']
    assert isinstance(module.layers, torch.nn.ModuleList) and len(module.layers) == 2
    with pytest.raises(NotImplementedError, match='_Encoder has its children'):
        module(torch.zeros(1, 2, 5, 5))

    class Port(torch.nn.Module):  # the forward a user writes over the converted tree

        def __init__(self, tree):
            super().__init__()
            self.tree = tree

        def forward(self, x):
            tree = self.tree
            h = torch.relu(tree.conv(tree.norm(x))).mean(dim=(2, 3))
            return tree.layers[1](tree.layers[0](h)) * tree.scale

    port = Port(module)
    x = _floats(3, 2, 5, 5)
    pair = both(x)
    chainer_out, torch_out = link(pair[0]), port(pair[1])
    assert_outputs_equal(chainer_out, torch_out)
    backward_both(chainer_out, torch_out)
    assert sorted(assert_gradients_equal(link, module, [pair])) == sorted(
        ['conv.weight', 'conv.bias', 'norm.weight', 'norm.bias', 'layers.0.weight',
         'layers.0.bias', 'layers.1.weight', 'layers.1.bias', 'scale'])


def test_link_without_conversion_is_refused_by_path_and_type_before_building(monkeypatch):
    built = []
    monkeypatch.setitem(conversion.CONVERTERS, L.Linear, conversion.Converter(
        lambda link, children: built.append(link)))
    model = chainer.Sequential(L.Linear(3, 3), chainer.Sequential(L.Linear(3, 3),
                                                                  L.Scale(axis=1, W_shape=(3,))))
    # Scale is a Chain of Chainer's own: refused, not taken for a tree without a forward
    with pytest.raises(TypeError, match=r"'/1/1' of type chainer\.links\.connection\.scale\."
                                        r"Scale has no conversion"):
        from_chainer(model)
    assert built == []


def test_subclass_with_its_own_forward_is_not_taken_for_its_base():
    class Doubled(L.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    with pytest.raises(TypeError, match=r"'/' of type .*Doubled has no conversion"):
        from_chainer(Doubled(3, 2))

    class Plain(L.Linear):  # same forward: a Linear
        pass

    link = randomize(Plain(3, 2))
    check_ported(link, from_chainer(link), _floats(4, 3))


@pytest.mark.parametrize('link, message', [
    (L.ConvolutionND(2, 3, 2, 3, cover_all=True), 'cover_all=True'),
    (L.BatchNormalization(3, axis=(0,)), 'axis='),
    (L.Linear(None, 3), 'never initialized'),
    (L.Highway(3, activate=lambda x: x * 2), 'activate'),
    (chainer.Sequential(L.Linear(3, 3), lambda x: x * 2), 'layer 1'),
])
def test_options_torch_cannot_compute_are_refused_naming_the_link(link, message):
    with pytest.raises(TypeError, match="'/'.*{}".format(message)):
        from_chainer(link)


def test_not_a_link_is_refused():
    with pytest.raises(TypeError, match='link must be a chainer.Link'):
        from_chainer(torch.nn.Linear(3, 2))


def test_classifier_becomes_a_tree_with_its_predictor():
    link = randomize(L.Classifier(L.Linear(3, 2)))
    module = from_chainer(link)
    assert isinstance(module, Chain) and module.chainer_class == 'chainer.links.Classifier'
    check_ported(link.predictor, module.predictor, _floats(4, 3))


@pytest.mark.parametrize('arguments', [dict(ksize=4, stride=2, pad=1),
                                       dict(ksize=3, stride=(2, 3), nobias=True),
                                       dict(ksize=3, stride=2, outsize=(10, 12))])
def test_deconvolution_ps_becomes_its_twin(arguments):
    from researchutils.chainer.links import DeconvolutionPS as ChainerDeconvolutionPS
    from researchutils.pytorch.nn.deconvolution_ps import DeconvolutionPS

    link = randomize(ChainerDeconvolutionPS(3, 2, **arguments))
    module = from_chainer(link)
    assert isinstance(module, DeconvolutionPS)
    check_ported(link, module, _floats(2, 3, 4, 5))
