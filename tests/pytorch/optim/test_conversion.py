"""researchutils.pytorch.optim.conversion: a Chainer optimizer, hooks and schedules go on in torch.

The reference is always Chainer's own run: a real Trainer trains a small model a few
iterations (so each rule's state is not trivial) and writes a snapshot; a second Trainer
resumes that snapshot for 100 iterations, and torch, started from the same snapshot, makes
the same 100 updates on the same batches: the parameters must agree to 1e-5 relative.
"""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import pytest
from chainer import training
from chainer.datasets import TupleDataset
from chainer.iterators import SerialIterator

torch = pytest.importorskip('torch')

from researchutils.pytorch import (  # noqa: E402 (after the skip)
    ChainerAdam,
    ChainerMomentumSGD,
    ChainerRMSprop,
    from_chainer_optimizer,
    from_chainer_schedule,
    load_chainer_weights,
)
from researchutils.pytorch.weights._rules import plan  # noqa: E402 (the weights' layouts)

WARM_UP, STEPS, BATCH = 5, 100, 6
hooks = chainer.optimizer_hooks
shifts = training.extensions


class TwoLayers(chainer.Chain):
    """A small deterministic regression model: l2(tanh(l1(x)))."""

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(4, 8, initialW=chainer.initializers.Normal(0.5))
            self.l2 = L.Linear(8, 3, initialW=chainer.initializers.Normal(0.5))

    def forward(self, x):
        return self.l2(F.tanh(self.l1(x)))


class TorchTwoLayers(torch.nn.Module):
    """The same model in torch, its parameters named as Chainer's (``l1.W``, ``l1.b``...)."""

    def __init__(self, chainer_model):
        super().__init__()
        for name in ('l1', 'l2'):
            layer = torch.nn.Module()
            link = getattr(chainer_model, name)
            layer.W = torch.nn.Parameter(torch.tensor(link.W.array))
            layer.b = torch.nn.Parameter(torch.tensor(link.b.array))
            setattr(self, name, layer)

    def forward(self, x):
        h = torch.tanh(x @ self.l1.W.T + self.l1.b)
        return h @ self.l2.W.T + self.l2.b


def data():
    rng = numpy.random.RandomState(1)
    count = (WARM_UP + STEPS + 1) * BATCH
    return (rng.standard_normal((count, 4)).astype(numpy.float32),
            rng.standard_normal((count, 3)).astype(numpy.float32))


def chainer_loss(model):
    return lambda x, y: F.mean_squared_error(model(x), y) * 10


class Run(object):
    """One Chainer configuration: its Trainer, the snapshot after WARM_UP iterations."""

    def __init__(self, tmp_path, make_optimizer, make_hooks=list, make_schedule=None,
                 model_class=None):
        self.tmp_path = tmp_path
        self.model_class = TwoLayers if model_class is None else model_class
        self.make_optimizer, self.make_hooks = make_optimizer, make_hooks
        self.make_schedule = make_schedule
        self.trainer = self.build(WARM_UP)
        self.trainer.extend(shifts.snapshot(filename='snapshot'), trigger=(WARM_UP, 'iteration'))
        self.trainer.run()
        self.snapshot = str(tmp_path / 'snapshot')

    def build(self, stop):
        numpy.random.seed(0)
        model = self.model_class()
        optimizer = self.make_optimizer()
        optimizer.setup(model)
        for hook in self.make_hooks():
            optimizer.add_hook(hook)
        iterator = SerialIterator(TupleDataset(*data()), BATCH, shuffle=False)
        updater = training.updaters.StandardUpdater(iterator, optimizer,
                                                    loss_func=chainer_loss(model))
        trainer = training.Trainer(updater, (stop, 'iteration'), out=str(self.tmp_path))
        if self.make_schedule is not None:
            trainer.extend(self.make_schedule(), trigger=(1, 'iteration'))
        return trainer

    @property
    def model(self):
        return self.trainer.updater.get_optimizer('main').target

    def chainer_continuation(self):
        """Chainer's own 100 iterations from the snapshot: the reference model."""
        trainer = self.build(WARM_UP + STEPS)
        chainer.serializers.load_npz(self.snapshot, trainer)
        trainer.run()
        return trainer.updater.get_optimizer('main').target

    def fresh_optimizer(self):
        """The Chainer optimizer as the user's script builds it again: set up, hooks added."""
        optimizer = self.make_optimizer()
        numpy.random.seed(0)
        optimizer.setup(self.model_class())
        for hook in self.make_hooks():
            optimizer.add_hook(hook)
        return optimizer


def chainer_gradients(module, twin, x, y):
    """Sets ``module``'s gradients to what Chainer computes at ``module``'s parameters.

    The optimizers are what is compared, so both sides get the gradients of one
    computation: gradients that torch computes differ from Chainer's in the last bits, and
    the small model's training amplifies such differences past 1e-5 within 100 steps. The
    weights' rules carry parameters and gradients between the layouts.
    """
    chainer_params = dict(twin.namedparams())
    rules = [rule for rule in plan(module) if rule.chainer_names]
    for rule in rules:
        arrays = rule.split(module.get_parameter(rule.torch_name).detach())
        for name, array in zip(rule.chainer_names, arrays):
            chainer_params['/' + name].array[...] = array.numpy()
    twin.cleargrads()
    chainer_loss(twin)(x, y).backward()
    for rule in rules:
        grads = [torch.as_tensor(chainer_params['/' + name].grad) for name in rule.chainer_names]
        module.get_parameter(rule.torch_name).grad = rule.combine(grads).clone()


def torch_continuation(module, optimizer, schedule=None, steps=STEPS, model_class=TwoLayers):
    x, y = data()
    twin = model_class()
    for iteration in range(WARM_UP, WARM_UP + steps):
        rows = slice(iteration * BATCH, (iteration + 1) * BATCH)
        chainer_gradients(module, twin, x[rows], y[rows])
        optimizer.step()
        if schedule is not None:
            schedule.step()


def assert_same_parameters(model, module):
    chainer_params = dict(model.namedparams())
    compared = set()
    for rule in plan(module):
        if not rule.chainer_names:
            continue
        arrays = rule.split(module.get_parameter(rule.torch_name).detach())
        for name, array in zip(rule.chainer_names, arrays):
            numpy.testing.assert_allclose(array.numpy(), chainer_params['/' + name].array,
                                          rtol=1e-5, atol=1e-7, err_msg=name)
            compared.add('/' + name)
    assert compared == set(chainer_params)


def continued_in_torch(run, from_snapshot=True, module=None):
    """torch's 100 iterations from the snapshot; returns the module and its optimizer."""
    module = TorchTwoLayers(run.model) if module is None else module
    if from_snapshot:
        optimizer = from_chainer_optimizer(run.fresh_optimizer(), module,
                                           snapshot=run.snapshot)
    else:
        optimizer = from_chainer_optimizer(run.trainer.updater.get_optimizer('main'), module)
    schedule = None
    if run.make_schedule is not None:
        schedule = from_chainer_schedule(run.make_schedule(), optimizer, snapshot=run.snapshot)
    torch_continuation(module, optimizer, schedule, model_class=run.model_class)
    return module, optimizer


OPTIMIZERS = {
    'SGD': (lambda: chainer.optimizers.SGD(lr=0.05), torch.optim.SGD),
    'MomentumSGD': (lambda: chainer.optimizers.MomentumSGD(lr=0.02, momentum=0.8),
                    ChainerMomentumSGD),
    'Adam': (lambda: chainer.optimizers.Adam(alpha=0.01), ChainerAdam),
    'Adam-amsgrad-decay-eta': (lambda: chainer.optimizers.Adam(
        alpha=0.01, amsgrad=True, weight_decay_rate=0.01, eta=0.5, eps=1e-4), ChainerAdam),
    'RMSprop': (lambda: chainer.optimizers.RMSprop(lr=0.01, alpha=0.9), torch.optim.RMSprop),
    'RMSprop-eps-inside-sqrt': (lambda: chainer.optimizers.RMSprop(
        lr=0.01, alpha=0.9, eps=1e-4, eps_inside_sqrt=True), ChainerRMSprop),
    'AdaGrad': (lambda: chainer.optimizers.AdaGrad(lr=0.05), torch.optim.Adagrad),
}


@pytest.mark.parametrize('name', sorted(OPTIMIZERS))
def test_100_updates_from_a_snapshot_equal_chainers(tmp_path, name):
    make_optimizer, torch_type = OPTIMIZERS[name]
    run = Run(tmp_path, make_optimizer)
    module, optimizer = continued_in_torch(run)
    assert type(optimizer) is torch_type
    assert_same_parameters(run.chainer_continuation(), module)


@pytest.mark.parametrize('name', ['MomentumSGD', 'Adam-amsgrad-decay-eta'])
def test_100_updates_from_a_live_optimizer_equal_chainers(tmp_path, name):
    run = Run(tmp_path, OPTIMIZERS[name][0])
    module, _ = continued_in_torch(run, from_snapshot=False)
    assert_same_parameters(run.chainer_continuation(), module)


class LSTMModel(chainer.Chain):
    """A Chainer LSTM (interleaved gates) read twice, then a Linear."""

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.lstm = L.LSTM(4, 5)
            self.out = L.Linear(5, 3)

    def forward(self, x):
        self.lstm.reset_state()
        self.lstm(x)
        return self.out(self.lstm(x * 0.5))


class TorchLSTMModel(torch.nn.Module):
    """Its torch port with torch's own modules: weights and state in torch's layouts."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTMCell(4, 5)
        self.out = torch.nn.Linear(5, 3)


@pytest.mark.parametrize('name', ['MomentumSGD', 'Adam-amsgrad-decay-eta'])
def test_state_follows_the_weights_layout_lstm_gates_included(tmp_path, name):
    run = Run(tmp_path, OPTIMIZERS[name][0], model_class=LSTMModel)
    module = load_chainer_weights(TorchLSTMModel(), run.snapshot)
    module, optimizer = continued_in_torch(run, module=module)
    # LSTMCell's second bias, which Chainer lacks, is left out, and stays zero.
    assert all(param is not module.lstm.bias_hh for param in optimizer.param_groups[0]['params'])
    assert not module.lstm.bias_hh.detach().any()
    assert_same_parameters(run.chainer_continuation(), module)


def test_the_comparison_sees_one_update_too_many(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    module = TorchTwoLayers(run.model)
    optimizer = from_chainer_optimizer(run.fresh_optimizer(), module, snapshot=run.snapshot)
    torch_continuation(module, optimizer, steps=STEPS + 1)
    with pytest.raises(AssertionError):
        assert_same_parameters(run.chainer_continuation(), module)


def test_adam_state_carries_step_count_and_moments(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam-amsgrad-decay-eta'][0])
    module = TorchTwoLayers(run.model)
    optimizer = from_chainer_optimizer(run.fresh_optimizer(), module, snapshot=run.snapshot)
    state = optimizer.state[module.l1.W]
    rule = run.model.l1.W.update_rule
    assert state['step'] == WARM_UP == rule.t
    for name in ('m', 'v', 'vhat'):
        numpy.testing.assert_array_equal(state[name].numpy(), rule.state[name])


def test_torch_adam_leaves_chainers_path(tmp_path):
    # Why ChainerAdam exists: torch's Adam, in the same state, ends elsewhere.
    run = Run(tmp_path, lambda: chainer.optimizers.Adam(alpha=0.01, eps=1e-3))
    module = TorchTwoLayers(run.model)
    ours = from_chainer_optimizer(run.fresh_optimizer(), module, snapshot=run.snapshot)
    theirs = torch.optim.Adam(module.parameters(), lr=0.01, eps=1e-3)
    for param in module.parameters():
        state = ours.state[param]
        theirs.state[param] = {'step': torch.tensor(float(state['step'])),
                               'exp_avg': state['m'].clone(), 'exp_avg_sq': state['v'].clone()}
    torch_continuation(module, theirs)
    with pytest.raises(AssertionError):
        assert_same_parameters(run.chainer_continuation(), module)


HOOKS = {
    'WeightDecay': lambda: [hooks.WeightDecay(0.01)],
    'GradientClipping': lambda: [hooks.GradientClipping(0.5)],
    'both-in-order': lambda: [hooks.WeightDecay(0.05), hooks.GradientClipping(0.3)],
}


@pytest.mark.parametrize('hook_name', sorted(HOOKS))
@pytest.mark.parametrize('name', ['MomentumSGD', 'Adam'])
def test_hooks_act_as_chainers(tmp_path, hook_name, name):
    run = Run(tmp_path, OPTIMIZERS[name][0], HOOKS[hook_name])
    module, optimizer = continued_in_torch(run)
    assert len(optimizer._optimizer_step_pre_hooks) == len(HOOKS[hook_name]())
    assert_same_parameters(run.chainer_continuation(), module)


def test_gradient_clipping_acts_in_the_hook_test(tmp_path):
    # The clipping test means something only if the gradients' norm exceeds the threshold.
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    model = run.model
    x, y = data()
    model.cleargrads()
    chainer_loss(model)(x[:BATCH], y[:BATCH]).backward()
    norm = numpy.sqrt(sum(float((param.grad ** 2).sum()) for param in model.params()))
    assert norm > 0.5


SCHEDULES = {
    'Exponential-lr-MomentumSGD': (lambda: shifts.ExponentialShift('lr', 0.97),
                                   'MomentumSGD'),
    'Exponential-alpha-target-Adam': (
        lambda: shifts.ExponentialShift('alpha', 0.95, target=0.002), 'Adam'),
    'Exponential-eta-Adam': (lambda: shifts.ExponentialShift('eta', 0.98), 'Adam'),
    'Linear-momentum': (lambda: shifts.LinearShift('momentum', (0.5, 0.95), (10, 60)),
                        'MomentumSGD'),
    'Linear-lr-SGD': (lambda: shifts.LinearShift('lr', (0.05, 0.001), (0, 50)), 'SGD'),
}


@pytest.mark.parametrize('schedule_name', sorted(SCHEDULES))
def test_schedules_act_as_chainers(tmp_path, schedule_name):
    make_schedule, name = SCHEDULES[schedule_name]
    run = Run(tmp_path, OPTIMIZERS[name][0], make_schedule=make_schedule)
    module, _ = continued_in_torch(run)
    assert_same_parameters(run.chainer_continuation(), module)


def test_schedule_state_is_the_snapshots(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0],
              make_schedule=lambda: shifts.ExponentialShift('alpha', 0.9))
    optimizer = from_chainer_optimizer(run.fresh_optimizer(), TorchTwoLayers(run.model),
                                       snapshot=run.snapshot)
    schedule = from_chainer_schedule(shifts.ExponentialShift('alpha', 0.9), optimizer,
                                     snapshot=run.snapshot)
    assert schedule.t == WARM_UP
    assert optimizer.param_groups[0]['lr'] == pytest.approx(0.01 * 0.9 ** WARM_UP)


class OneLayer(torch.nn.Module):
    """A torch model that is not TwoLayers: it lacks ``l2``."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Module()
        self.l1.W = torch.nn.Parameter(torch.zeros(8, 4))
        self.l1.b = torch.nn.Parameter(torch.zeros(8))


def test_a_snapshot_of_another_model_is_refused_naming_the_first_key(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    with pytest.raises(ValueError, match=r"optimizer parameter /l2/W fits no parameter of "
                                         r"module"):
        from_chainer_optimizer(run.fresh_optimizer(), OneLayer(), snapshot=run.snapshot)


def test_a_module_parameter_chainer_lacks_is_refused(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    module = TorchTwoLayers(run.model)
    module.l1.extra = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match=r"module parameter 'l1.extra' needs the optimizer "
                                         r"state of Chainer parameter /l1/extra, which"):
        from_chainer_optimizer(run.fresh_optimizer(), module, snapshot=run.snapshot)


def test_a_state_of_another_shape_is_refused_naming_both(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    module = TorchTwoLayers(run.model)
    module.l2.b = torch.nn.Parameter(torch.zeros(5))
    with pytest.raises(ValueError, match=r"state /l2/b/m makes shape \(3,\), but module "
                                         r"parameter 'l2.b' has \(5,\)"):
        from_chainer_optimizer(run.fresh_optimizer(), module, snapshot=run.snapshot)


def test_a_key_missing_from_the_snapshot_is_named(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    with pytest.raises(ValueError, match=r"no key under 'updater/optimizer:other/'"):
        from_chainer_optimizer(run.fresh_optimizer(), TorchTwoLayers(run.model),
                               snapshot=run.snapshot, key='updater/optimizer:other/')


def test_a_corrupt_snapshot_is_refused_naming_it(tmp_path):
    run = Run(tmp_path, OPTIMIZERS['Adam'][0])
    corrupt = tmp_path / 'corrupt'
    corrupt.write_bytes((tmp_path / 'snapshot').read_bytes()[:200])
    with pytest.raises(ValueError, match="snapshot '.*corrupt' cannot be read as an npz file"):
        from_chainer_optimizer(run.fresh_optimizer(), TorchTwoLayers(run.model),
                               snapshot=str(corrupt))


def test_a_missing_snapshot_is_a_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        from_chainer_optimizer(chainer.optimizers.SGD(), OneLayer(),
                               snapshot=str(tmp_path / 'missing'))


def test_a_hook_without_twin_is_refused_by_name(tmp_path):
    optimizer = chainer.optimizers.SGD(0.1)
    optimizer.setup(TwoLayers())
    optimizer.add_hook(hooks.Lasso(0.1))
    with pytest.raises(ValueError, match=r"hook 'Lasso' \(Lasso\) has no torch twin"):
        from_chainer_optimizer(optimizer, TorchTwoLayers(optimizer.target))


@pytest.mark.parametrize('optimizer, error, message', [
    (chainer.optimizers.AdaDelta(), TypeError, 'got AdaDelta'),
    (chainer.optimizers.Adam(adabound=True), ValueError, 'adabound=True'),
    ('adam', TypeError, "optimizer must be a Chainer optimizer, got 'adam'"),
])
def test_optimizers_without_twin_are_refused(optimizer, error, message):
    model = TwoLayers()
    if not isinstance(optimizer, str):
        optimizer.setup(model)
    with pytest.raises(error, match=message):
        from_chainer_optimizer(optimizer, TorchTwoLayers(model))


def test_an_optimizer_neither_set_up_nor_with_snapshot_is_refused():
    with pytest.raises(ValueError, match='not set up and no snapshot'):
        from_chainer_optimizer(chainer.optimizers.SGD(), OneLayer())
