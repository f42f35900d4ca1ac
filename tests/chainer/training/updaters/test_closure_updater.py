"""ClosureUpdater: one model.closure step per iteration."""

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest
from chainer.training import extensions as chainer_extensions

from researchutils.chainer.data_loading import DataManager, SequentialSampler
from researchutils.chainer.models import AbstractChainerNetwork
from researchutils.chainer.training.updaters import ClosureUpdater
from tests.chainer.training import tasks
from tests.chainer.training.tasks import experiment, read_log


def test_train_metrics_run_in_the_closure_on_backend_arrays(tmp_path):
    seen = set()

    def metric(pred, label):
        seen.add((type(pred), type(label)))
        return chainer.functions.mean_absolute_error(pred, label)

    exp = experiment(tmp_path, tasks.make_params(num_epochs=1, train_metrics={'MAE': metric}))
    exp.run(*tasks.make_managers())
    assert seen == {(chainer.Variable, np.ndarray)}
    assert 'main/MAE' in read_log(exp)[0]


class LinearNet(AbstractChainerNetwork):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.fc = L.Linear(tasks.NUM_INPUTS, tasks.NUM_OUTPUTS)

    def forward(self, x):
        return {'pred': self.fc(x)}


def one_batch_updater(model, lr=0.1, **kwargs):
    dataset = tasks.LinearTask(8)
    optimizer = chainer.optimizers.SGD(lr=lr).setup(model)
    iterator = DataManager(dataset, 8, sampler_cls=SequentialSampler).get_iterator()
    return dataset, ClosureUpdater(iterator, model, {'default': optimizer},
                                   {'MSE': F.mean_squared_error}, **kwargs)


def test_one_update_is_an_sgd_step_on_the_mean_squared_error():
    model = LinearNet()
    weight, bias = model.fc.W.array.copy(), model.fc.b.array.copy()
    dataset, updater = one_batch_updater(model, lr=0.1)
    updater.update()
    # d/dW of mean((x W^T + b - y)^2) over all N * outputs entries, in NumPy.
    error = dataset.data @ weight.T + bias - dataset.labels
    scale = 2.0 / error.size
    np.testing.assert_allclose(model.fc.W.array, weight - 0.1 * scale * error.T @ dataset.data,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.fc.b.array, bias - 0.1 * scale * error.sum(axis=0),
                               rtol=1e-5, atol=1e-6)


def test_losses_are_reported_as_main_names_on_a_plain_trainer(tmp_path):
    model = LinearNet()
    _, updater = one_batch_updater(model)
    trainer = chainer.training.Trainer(updater, (2, 'iteration'), out=str(tmp_path))
    trainer.extend(chainer_extensions.LogReport(trigger=(1, 'iteration')))
    trainer.run()
    assert [sorted(key for key in entry if key.startswith('main/')) for entry in
            read_log(str(tmp_path))] == [['main/MSE'], ['main/MSE']]


def test_the_default_optimizer_is_the_updaters_main_one_and_the_others_keep_their_names():
    model = LinearNet()
    default, other = chainer.optimizers.SGD().setup(model), chainer.optimizers.SGD()
    updater = ClosureUpdater(DataManager(tasks.LinearTask(8), 4).get_iterator(), model,
                             {'default': default, 'other': other},
                             {'MSE': F.mean_squared_error})
    assert updater.get_all_optimizers() == {'main': default, 'other': other}


def test_optimizers_without_a_default_are_refused():
    model = LinearNet()
    optimizer = chainer.optimizers.SGD().setup(model)
    with pytest.raises(TypeError, match='"default"'):
        ClosureUpdater(DataManager(tasks.LinearTask(8), 4).get_iterator(), model,
                       {'main': optimizer}, {'MSE': F.mean_squared_error})


def _updater_arguments(**changes):
    model = LinearNet()
    arguments = dict(iterator=DataManager(tasks.LinearTask(8), 4).get_iterator(), model=model,
                     optimizers={'default': chainer.optimizers.SGD().setup(model)},
                     losses={'MSE': F.mean_squared_error})
    arguments.update(changes)
    return arguments


class _Wrapper:
    """What ChainerMN's multi-node optimizer is: no chainer.Optimizer, but its update and
    target."""

    def __init__(self, optimizer, update=True, target=True):
        if update:
            self.update = optimizer.update
        if target:
            self.target = optimizer.target


@pytest.mark.parametrize('update,target', [(False, True), (True, False)])
def test_a_wrapper_without_update_or_target_is_refused_naming_it(update, target):
    model = LinearNet()
    wrapper = _Wrapper(chainer.optimizers.SGD().setup(model), update, target)
    with pytest.raises(TypeError, match=r"^optimizers\['default'\] must be a chainer.Optimizer "
                                        r"\(or a wrapper of one, such as ChainerMN's multi-node "
                                        r"optimizer\), got <.*_Wrapper object at"):
        ClosureUpdater(**_updater_arguments(model=model, optimizers={'default': wrapper}))


def test_a_wrapper_with_update_and_target_trains_as_chainermns_does():
    model = LinearNet()
    updater = ClosureUpdater(**_updater_arguments(model=model, optimizers={
        'default': _Wrapper(chainer.optimizers.SGD(lr=0.1).setup(model))}))
    weight = model.fc.W.array.copy()
    updater.update()
    assert not np.array_equal(model.fc.W.array, weight)


@pytest.mark.parametrize('changes, error, message', [
    ({'iterator': None}, TypeError, r'^iterator must be a chainer.dataset.Iterator \(such as '
                                    r'DataManager.get_iterator\(\)\), got None$'),
    ({'iterator': [1, 2]}, TypeError, r'^iterator must be a chainer.dataset.Iterator .*, got '
                                      r'\[1, 2\]$'),
    ({'model': None}, TypeError, '^model must be an AbstractChainerNetwork'),
    ({'model': 5}, TypeError, r'^model must be an AbstractChainerNetwork \(with closure and '
                              r'prepare_batch\), got 5$'),
    ({'losses': {5: F.mean_squared_error}}, TypeError, '^losses names must be a str, got 5$'),
    ({'optimizers': {'main': 5}}, TypeError, r'^optimizers must be a dict with a "default" '
                                             r"optimizer, got \{'main': 5\}$"),
    ({'device': 'nosuchdevice'}, ValueError, "^device must be a Chainer device .*, got "
                                             "'nosuchdevice': (?!None$)."),
    ({'optimizers': {'default': 5}}, TypeError, r"^optimizers\['default'\] must be .*got 5$"),
    ({'losses': {}}, ValueError, '^losses must not be empty'),
    ({'losses': None}, TypeError, '^losses must be a mapping'),
    ({'losses': {'MSE': 5}}, TypeError, r"^losses\['MSE'\] must be a callable, got 5"),
    ({'metrics': {'acc': 'accuracy'}}, TypeError, r"^metrics\['acc'\] must be a callable"),
    ({'metrics': [F.mean_squared_error]}, TypeError, '^metrics must be a mapping'),
    ({'device': 'nosuchdevice'}, ValueError, "^device must be a Chainer device .*'nosuchdevice'"),
    ({'device': 1.5}, ValueError, '^device must be a Chainer device'),
    ({'optimizers': {'default': 5}}, TypeError, r"^optimizers\['default'\] must be a chainer"),
])
def test_bad_arguments_are_refused_when_made_naming_them(changes, error, message):
    with pytest.raises(error, match=message):
        ClosureUpdater(**_updater_arguments(**changes))


def test_no_metrics_is_taken():
    updater = ClosureUpdater(**_updater_arguments(metrics={}))
    updater.update()
    assert updater.iteration == 1


def test_every_optimizer_counts_the_epochs_as_chainers_updaters_do(tmp_path):
    # Schedules and hooks read optimizer.epoch: it grows by one at each epoch's last
    # iteration (8 examples, batches of 4: every second iteration), for each optimizer.
    model = LinearNet()
    default = chainer.optimizers.SGD().setup(model)
    other = chainer.optimizers.SGD().setup(LinearNet())
    updater = ClosureUpdater(DataManager(tasks.LinearTask(8), 4).get_iterator(), model,
                             {'default': default, 'other': other},
                             {'MSE': F.mean_squared_error})
    trainer = chainer.training.Trainer(updater, (3, 'epoch'), out=str(tmp_path))
    seen = []
    trainer.extend(lambda _: seen.append((updater.iteration, default.epoch, other.epoch)),
                   trigger=(1, 'iteration'))
    trainer.run()
    assert seen == [(1, 0, 0), (2, 1, 1), (3, 1, 1), (4, 2, 2), (5, 2, 2), (6, 3, 3)]
