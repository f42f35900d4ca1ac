"""researchutils.pytorch.optim.schedules: ExponentialShift and LinearShift set the values that
Chainer's extensions set, call after call, and keep Chainer's state."""
import chainer
import numpy
import pytest

torch = pytest.importorskip('torch')

from researchutils.pytorch import (  # noqa: E402 (after the skip)
    ChainerAdam,
    ExponentialShift,
    LinearShift,
)

shifts = chainer.training.extensions
CALLS = 40


def chainer_values(extension, optimizer, attr):
    """The values Chainer's ``extension`` sets, called by hand on a real Trainer."""
    optimizer.setup(chainer.links.Linear(1, 1))
    updater = chainer.training.updaters.StandardUpdater(
        chainer.iterators.SerialIterator([numpy.zeros(1, numpy.float32)], 1), optimizer)
    trainer = chainer.training.Trainer(updater, (1, 'iteration'))
    extension.initialize(trainer)
    values = [getattr(optimizer, attr)]
    for _ in range(CALLS):
        extension(trainer)
        values.append(getattr(optimizer, attr))
    return values


def torch_values(schedule, optimizer, key):
    values = [optimizer.param_groups[0][key]]
    for _ in range(CALLS):
        schedule.step()
        values.append(optimizer.param_groups[0][key])
    return values


def sgd(lr=0.1, momentum=0.5):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr, momentum=momentum)


@pytest.mark.parametrize('rate, target', [(0.9, None), (0.9, 0.02), (1.1, 0.3), (1.1, None)])
def test_exponential_shift_sets_chainers_values(rate, target):
    chainer_optimizer = chainer.optimizers.SGD(lr=0.1)
    expected = chainer_values(shifts.ExponentialShift('lr', rate, target=target),
                              chainer_optimizer, 'lr')
    optimizer = sgd()
    assert torch_values(ExponentialShift(optimizer, 'lr', rate, target=target), optimizer,
                        'lr') == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize('value_range, time_range', [((0.5, 0.95), (10, 30)),
                                                     ((0.9, 0.1), (0, 25))])
def test_linear_shift_sets_chainers_values(value_range, time_range):
    chainer_optimizer = chainer.optimizers.MomentumSGD(lr=0.1, momentum=0.5)
    expected = chainer_values(shifts.LinearShift('momentum', value_range, time_range),
                              chainer_optimizer, 'momentum')
    optimizer = sgd()
    assert torch_values(LinearShift(optimizer, 'momentum', value_range, time_range),
                        optimizer, 'momentum') == pytest.approx(expected, rel=1e-12)


def test_every_param_group_is_set():
    optimizer = torch.optim.SGD([{'params': [torch.nn.Parameter(torch.zeros(1))]},
                                 {'params': [torch.nn.Parameter(torch.zeros(1))]}], lr=0.1)
    ExponentialShift(optimizer, 'lr', 0.5).step()
    assert [group['lr'] for group in optimizer.param_groups] == [0.05, 0.05]


def test_state_dict_resumes_at_the_same_value():
    first = sgd()
    schedule = ExponentialShift(first, 'lr', 0.5)
    for _ in range(3):
        schedule.step()
    second = sgd()
    resumed = ExponentialShift(second, 'lr', 0.5, init=0.1)
    resumed.load_state_dict(schedule.state_dict())
    assert second.param_groups[0]['lr'] == first.param_groups[0]['lr'] == 0.1 / 8
    schedule.step()
    resumed.step()
    assert second.param_groups[0]['lr'] == first.param_groups[0]['lr']


@pytest.mark.parametrize('make, error, message', [
    (lambda: ExponentialShift(sgd(), 'alpha', 0.9), ValueError,
     r"attr 'alpha' is not a number of every param group of SGD; they have \[.*'lr'"),
    (lambda: ExponentialShift(ChainerAdam([torch.nn.Parameter(torch.zeros(1))]), 'betas',
                              0.9), ValueError, r"attr 'betas' is not a number"),
    (lambda: ExponentialShift(sgd(), 'lr', -0.5), ValueError, r'rate must be .*-0.5'),
    (lambda: LinearShift(sgd(), 'lr', (0.1, 0.2), (5, 5)), ValueError,
     r'time_range must have start < end, got \(5, 5\)'),
    (lambda: LinearShift(sgd(), 'lr', 0.1, (0, 5)), TypeError,
     r'value_range must be a pair \(first, last\), got 0.1'),
    (lambda: LinearShift(sgd(), 'lr', (0.1, 0.2), (0, 2.5)), TypeError,
     r'time_range\[1\] must be .*2.5'),
])
def test_bad_arguments_are_refused_by_name(make, error, message):
    with pytest.raises(error, match=message):
        make()
