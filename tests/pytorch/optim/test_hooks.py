"""researchutils.pytorch.optim.hooks: WeightDecay and GradientClipping change the gradients as
Chainer's hooks do, given the same parameters and gradients."""
import chainer
import numpy
import pytest

torch = pytest.importorskip('torch')

from researchutils.pytorch import GradientClipping, WeightDecay  # noqa: E402 (after the skip)


def both(chainer_hook, torch_hook, scale=1.0):
    """Chainer's hook and ours on the same two parameters and gradients; both gradients."""
    rng = numpy.random.RandomState(0)
    arrays = [rng.standard_normal(shape).astype(numpy.float32) for shape in ((3, 4), (4,))]
    grads = [(rng.standard_normal(array.shape) * scale).astype(numpy.float32)
             for array in arrays]
    link = chainer.Link()
    with link.init_scope():
        link.a, link.b = (chainer.Parameter(array.copy()) for array in arrays)
    optimizer = chainer.optimizers.SGD(lr=0.0)
    optimizer.setup(link)
    optimizer.add_hook(chainer_hook)
    link.a.grad, link.b.grad = (grad.copy() for grad in grads)
    optimizer.update()
    params = [torch.nn.Parameter(torch.tensor(array)) for array in arrays]
    torch_optimizer = torch.optim.SGD(params, lr=0.0)
    torch_optimizer.register_step_pre_hook(torch_hook)
    for param, grad in zip(params, grads):
        param.grad = torch.tensor(grad)
    torch_optimizer.step()
    return ([link.a.grad, link.b.grad], [param.grad.numpy() for param in params], grads)


def test_weight_decay_adds_rate_times_parameter():
    theirs, ours, before = both(chainer.optimizer_hooks.WeightDecay(0.1), WeightDecay(0.1))
    for chainer_grad, torch_grad, grad in zip(theirs, ours, before):
        numpy.testing.assert_allclose(torch_grad, chainer_grad, rtol=1e-6)
        assert not numpy.allclose(torch_grad, grad)


def test_gradient_clipping_scales_all_gradients_to_the_threshold():
    theirs, ours, _ = both(chainer.optimizer_hooks.GradientClipping(0.5), GradientClipping(0.5))
    for chainer_grad, torch_grad in zip(theirs, ours):
        numpy.testing.assert_allclose(torch_grad, chainer_grad, rtol=1e-6)
    norm = numpy.sqrt(sum((grad.astype(numpy.float64) ** 2).sum() for grad in ours))
    assert norm == pytest.approx(0.5, rel=1e-6)


def test_gradient_clipping_leaves_gradients_under_the_threshold():
    _, ours, before = both(chainer.optimizer_hooks.GradientClipping(100.0),
                           GradientClipping(100.0), scale=0.01)
    for torch_grad, grad in zip(ours, before):
        numpy.testing.assert_array_equal(torch_grad, grad)


def test_gradient_clipping_leaves_gradients_just_under_the_threshold():
    # A norm of 2/3 of the threshold: scaling up to the threshold would be a bug.
    param = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.SGD([param], lr=0.0)
    optimizer.register_step_pre_hook(GradientClipping(1.5))
    param.grad = torch.tensor([0.6, 0.8])
    optimizer.step()
    assert param.grad.tolist() == pytest.approx([0.6, 0.8], rel=1e-7)


def test_gradient_clipping_of_zero_gradients_leaves_them_zero():
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([param], lr=0.1)
    optimizer.register_step_pre_hook(GradientClipping(1.0))
    param.grad = torch.zeros(3)
    optimizer.step()
    assert not param.grad.any()


def test_hooks_skip_parameters_without_gradient():
    used, unused = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([used, unused], lr=0.0)
    optimizer.register_step_pre_hook(WeightDecay(0.5))
    optimizer.register_step_pre_hook(GradientClipping(0.1))
    used.grad = torch.ones(2)
    optimizer.step()
    assert unused.grad is None
    assert float(used.grad.norm()) == pytest.approx(0.1)


@pytest.mark.parametrize('make, error, message', [
    (lambda: WeightDecay(-0.1), ValueError, r'rate must be .*-0.1'),
    (lambda: WeightDecay('0.1'), TypeError, r"rate must be .*'0.1'"),
    (lambda: GradientClipping(0.0), ValueError, r'threshold must be positive, got 0.0'),
    (lambda: GradientClipping(True), TypeError, r'threshold must be .*True'),
])
def test_bad_arguments_are_refused_by_name(make, error, message):
    with pytest.raises(error, match=message):
        make()
