"""researchutils.pytorch.optim.optimizers: each rule's updates equal Chainer's own rule's, on
one parameter whose gradients are given (the same on both sides), step after step."""
import chainer
import numpy
import pytest

torch = pytest.importorskip('torch')

from researchutils.pytorch import (  # noqa: E402 (after the skip)
    ChainerAdam,
    ChainerMomentumSGD,
    ChainerRMSprop,
)

STEPS = 30


def gradients(seed=0, scale=1.0):
    rng = numpy.random.RandomState(seed)
    return [(rng.standard_normal((3, 4)) * scale).astype(numpy.float32) for _ in range(STEPS)]


def run_both(chainer_optimizer, torch_class, torch_kwargs, grads, change=None):
    """Feeds ``grads`` to Chainer's rule and to ours; ``change(t)`` returns a learning rate
    to set before step ``t``, or None."""
    start = numpy.random.RandomState(1).standard_normal((3, 4)).astype(numpy.float32)
    link = chainer.Link()
    with link.init_scope():
        link.p = chainer.Parameter(start.copy())
    chainer_optimizer.setup(link)
    param = torch.nn.Parameter(torch.tensor(start))
    optimizer = torch_class([param], **torch_kwargs)
    for t, grad in enumerate(grads):
        lr = change(t) if change is not None else None
        if lr is not None:
            chainer_optimizer.lr = lr
            optimizer.param_groups[0]['lr'] = lr
        link.p.grad = grad.copy()
        chainer_optimizer.update()
        param.grad = torch.tensor(grad)
        optimizer.step()
    return link.p.array, param.detach().numpy()


@pytest.mark.parametrize('chainer_optimizer, torch_class, torch_kwargs', [
    (chainer.optimizers.MomentumSGD(lr=0.1, momentum=0.9), ChainerMomentumSGD,
     {'lr': 0.1, 'momentum': 0.9}),
    (chainer.optimizers.Adam(alpha=0.05), ChainerAdam, {'lr': 0.05}),
    (chainer.optimizers.Adam(alpha=0.05, beta1=0.8, beta2=0.99, eps=1e-3, eta=0.7,
                             weight_decay_rate=0.1, amsgrad=True), ChainerAdam,
     {'lr': 0.05, 'betas': (0.8, 0.99), 'eps': 1e-3, 'eta': 0.7, 'weight_decay_rate': 0.1,
      'amsgrad': True}),
    (chainer.optimizers.RMSprop(lr=0.01, alpha=0.9, eps=1e-3), ChainerRMSprop,
     {'lr': 0.01, 'alpha': 0.9, 'eps': 1e-3}),
    (chainer.optimizers.RMSprop(lr=0.01, alpha=0.9, eps=1e-3, eps_inside_sqrt=True),
     ChainerRMSprop, {'lr': 0.01, 'alpha': 0.9, 'eps': 1e-3, 'eps_inside_sqrt': True}),
], ids=['MomentumSGD', 'Adam', 'Adam-every-option', 'RMSprop', 'RMSprop-eps-inside-sqrt'])
def test_steps_equal_chainers_rule(chainer_optimizer, torch_class, torch_kwargs):
    theirs, ours = run_both(chainer_optimizer, torch_class, torch_kwargs, gradients())
    numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)


def test_adam_with_small_gradients_still_equals_chainers():
    # Where eps and sqrt(v) are of one size, eps's place in the rule shows most.
    theirs, ours = run_both(chainer.optimizers.Adam(alpha=0.01, eps=1e-6), ChainerAdam,
                            {'lr': 0.01, 'eps': 1e-6}, gradients(scale=1e-6))
    numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-9)


def test_torch_adam_differs_where_gradients_are_small():
    theirs, ours = run_both(chainer.optimizers.Adam(alpha=0.01, eps=1e-6), torch.optim.Adam,
                            {'lr': 0.01, 'eps': 1e-6}, gradients(scale=1e-6))
    assert not numpy.allclose(ours, theirs, rtol=1e-3, atol=0)


def halving_lr(t):
    return 0.1 / 2 ** (t // 5) if t % 5 == 0 else None


def test_momentum_sgd_keeps_the_old_rate_in_its_velocity_when_lr_changes():
    theirs, ours = run_both(chainer.optimizers.MomentumSGD(lr=0.1, momentum=0.9),
                            ChainerMomentumSGD, {'lr': 0.1, 'momentum': 0.9}, gradients(),
                            change=halving_lr)
    numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)


def test_torch_sgd_with_momentum_differs_once_lr_changes():
    theirs, ours = run_both(chainer.optimizers.MomentumSGD(lr=0.1, momentum=0.9),
                            torch.optim.SGD, {'lr': 0.1, 'momentum': 0.9}, gradients(),
                            change=halving_lr)
    assert not numpy.allclose(ours, theirs, rtol=1e-3, atol=0)


def test_a_parameter_without_gradient_is_left_alone():
    used, unused = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    for optimizer_class in (ChainerAdam, ChainerMomentumSGD, ChainerRMSprop):
        optimizer = optimizer_class([used, unused], lr=0.1)
        used.grad = torch.ones(2)
        optimizer.step()
        assert unused not in optimizer.state and bool((unused.detach() == 1).all())


def test_step_returns_the_closures_loss():
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = ChainerAdam([param])

    def closure():
        optimizer.zero_grad()
        loss = (param ** 2).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == 2.0


@pytest.mark.parametrize('make, error, message', [
    (lambda params: ChainerAdam(params, lr=-1.0), ValueError, r'lr must be .*, got -1.0'),
    (lambda params: ChainerAdam(params, betas=(0.9,)), TypeError,
     r'betas must be a pair \(beta1, beta2\), got \(0.9,\)'),
    (lambda params: ChainerAdam(params, betas=(0.9, 1.5)), ValueError, r'betas\[1\] must be'),
    (lambda params: ChainerAdam(params, amsgrad='yes'), TypeError, "amsgrad must be .*'yes'"),
    (lambda params: ChainerAdam(params, eta=-0.5), ValueError, r'eta must be .*-0.5'),
    (lambda params: ChainerMomentumSGD(params, momentum=1.5), ValueError,
     r'momentum must be .*1.5'),
    (lambda params: ChainerRMSprop(params, eps=-1e-8), ValueError, r'eps must be .*-1e-08'),
])
def test_bad_hyper_parameters_are_refused_by_name(make, error, message):
    with pytest.raises(error, match=message):
        make([torch.nn.Parameter(torch.zeros(2))])
