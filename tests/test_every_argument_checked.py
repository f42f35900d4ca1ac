"""Every public argument is checked: a bad value gives a ValueError or TypeError naming it.

The test walks every public name of every package (``__all__``, down into the modules a
package lists), reads each signature's annotations and calls the name once for each bad
value of a table kept per annotated type, all other arguments valid. Each call must raise a
ValueError or TypeError (Chainer's InvalidType for arrays) whose message names the
argument, within seconds, and leave nothing behind in the output folder or the working
folder. A new public name fails :func:`test_every_public_callable_has_valid_arguments` until
it has a line in VALID; a documented exception to the rule is in EXCEPTIONS, with why.
At the original researchutils' paths, a value the original accepted and did right is no
bad value: :func:`bad_values` leaves out what tests/test_original_contract.py's table says
the original accepted (``load_model('', model)`` returns the model), so the two tests read
one table and cannot disagree.
"""
import importlib
import inspect
import math
import os
import signal
import types

import chainer
import chainer.functions as F
import numpy as np
import pytest
from chainer.utils.type_check import InvalidType

from tests.support.torch_twins import TORCH_INSTALLED
from tests.test_original_contract import original_accepts
from tests.test_public_api import PACKAGES as CHAINER_PACKAGES

# The original researchutils' helpers, then every package of researchutils.chainer (the one
# list test_public_api.py keeps), so a new package is walked the day it lands, and the torch
# side where torch is installed (its names are flat at researchutils.pytorch).
PACKAGES = [
    'researchutils.arrays',
    'researchutils.files',
    'researchutils.image',
    'researchutils.math',
    'researchutils.task',
] + CHAINER_PACKAGES + (['researchutils.pytorch'] if TORCH_INSTALLED else [])

NAN = float('nan')


def public_callables():
    """(qualified name, object) of every public function and class, each once."""
    found = {}

    def visit(module):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                visit(value)
            elif callable(value):
                found.setdefault('{}.{}'.format(value.__module__, value.__qualname__), value)

    for package in PACKAGES:
        visit(importlib.import_module(package))
    return sorted(found.items())


# Bad values by annotation (the annotation's text, None left out: it is added to the bad
# values of an argument whose annotation does not allow it).
_PATH = ['5', 5, True, b'bytes.txt', 'with\0nul', '']
BAD_BY_ANNOTATION = {
    'bool': ['False', 2, 0.5, [True]],
    'int': [True, 1.5, '1', NAN],
    'float': ['1', True, NAN],
    'str': [5, b'bytes', ['a']],
    'str | os.PathLike[str]': _PATH[1:],
    'DTypeLike': ['notadtype'],
    'Initializer': ['abc'],
    'ArrayLike': [['a', 'b']],
    'Iterable[ArrayLike]': [5, [['a', 'b']]],
    'VariableOrArray': [[1, 2]],
    'Dataset': [5],
    'DecorFun': [5],
    'Indices': [5, [0.5], [-1], [True]],
    'Sequence[int]': [5, (True, 2), ('2', 2)],
    'Iterable[int | np.integer[Any]]': [5, ['a']],
    'Iterable[Sequence[_T]]': [5],
    'Sequence[str]': [5, [5]],
    'Mapping[str, Any]': [5, [('a', 1)]],
    'Callable[..., Any]': [5],
    'Tree': [5, ['a']],
    'chainer.Link': [5],
    'chainer.Optimizer': [5],
    'chainer.dataset.Iterator': [5, [1, 2]],
    'AbstractChainerNetwork': [5],
    'Mapping[str, Callable[..., Any]]': [5, {}, {'MSE': 5}],
    'dict[str, Callable[..., float]]': [5, {'MSE': 5}],
    'Iterable[int]': [5, ['SIGTERM']],
    'type[chainer.Link]': [5, int],
    'type[AbstractSampler]': [5, int],
    'Parameters': [5, {}],
    'Predictor': [5],
    'DataManager': [5],
    'SavePath': [5, 'with\0nul.png'],
    '_Titles': [5],
}
# Aliases that hold None themselves.
NONE_ALLOWED = {'SavePath'}


def _split_annotation(annotation):
    """(text without None, whether None is allowed)."""
    parts = [part.strip() for part in str(annotation).split('|')]
    # Keep unions of several types whole: only a trailing None is taken off.
    allows_none = parts[-1] == 'None'
    if allows_none:
        parts = parts[:-1]
    return ' | '.join(parts), allows_none


def bad_values(function, parameter):
    """The bad values an argument is tried with, from its annotation and OVERRIDES."""
    key = (function, parameter.name)
    if key in OVERRIDES:
        return OVERRIDES[key]
    if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
        return []
    text, allows_none = _split_annotation(parameter.annotation)
    values = list(BAD_BY_ANNOTATION.get(text, []))
    if text in BAD_BY_ANNOTATION and not allows_none and text not in NONE_ALLOWED:
        values.append(None)
    return [value for value in values if not original_accepts(function, parameter.name, value)]


BAD_BY_ANNOTATION.update({
    'Mapping[str, str]': [5, {'a': 5}, {5: 'a'}],
    'str | Sequence[str] | dict[str, Any]': [5, 'wandb', ['tensorboard', 5],
                                             {'tensorboard': 'yes'}, {'wandb': True}],
    'int | tuple[int, int]': [True, 1.5, '1', (1, True), (1, 1.5)],
    'tuple[int, int]': [5, (True, 2), (2,)],
    'dict[str, str]': [5, {'x': 5}],
    'Sequence[DeviceSpec]': [5, [True], [1.5]],
    'dict[str, float]': [5],
    'JSONData': [NAN, {1: 'a'}, {'a': NAN}],
    'Transforms': [5],
    'OrderSampler': [5],
    'DeviceSpec': [1.5, [0]],
    'checks.OptimBuilder': [5],
    'int | str | Sequence[int | str]': [True, 1.5, [-1]],
    'Iterable[Any]': [5, [5]],
    'chainer.training.triggers.IntervalTrigger | chainer.training.triggers.ManualScheduleTrigger'
    ' | tuple[float, str]': [5, (0, 'epoch'), (1, 'epochs')],
    'dict[str, Sequence[str]]': [5, {'MSE': 5}],
    'str | slack_sdk.WebClient': [5],
    'str | log_report_module.LogReport': [5],
    'Callable[[dict[str, Any]], dict[str, Any]]': [5],
    'Callable[[dict[str, Array]], Mapping[str, VariableOrArray]]': [5],
    'type': [5],
    'type[chainer.Optimizer]': [5, int],
    'TriggerLike': [5, (0, 'epoch'), (1.5, 'epoch'), (1, 'epochs'), (True, 'epoch')],
    'dict[str, chainer.Optimizer]': [5, {}, {'default': 5}],
    'argparse.Namespace | Mapping[str, object]': [5, ['a']],
    'str | Iterable[str]': [5, ['txt'], [5]],
    'NDArray[_Scalar]': [None, np.zeros(3), 'abc'],
    'ColorType': ['notacolor', None],
    '_Target': [5],
    '_Serializable': [5],
})
# A communicator is duck-typed (ChainerMN's): what is not one is named.
_COMM = [object(), 5]


def _model():
    from tests.chainer.training import tasks
    return tasks.Regressor()


def _optimizer():
    return chainer.optimizers.SGD().setup(_model())


def _manager():
    from researchutils.chainer.data_loading import DataManager
    from tests.chainer.training import tasks
    return DataManager(tasks.LinearTask(4), 2)


def _iterator():
    return _manager().get_iterator()


def _predictor():
    from researchutils.chainer.training import Predictor
    return Predictor(_model(), {'x': 'data'})


def _params():
    from tests.chainer.training import tasks
    return tasks.make_params()


def _regressor_class():
    from tests.chainer.training import tasks
    return tasks.Regressor


def _files(folder):
    """A text file, a pickle and a folder to read."""
    folder.mkdir()
    (folder / 'text.txt').write_text('text')
    import pickle
    (folder / 'data.pkl').write_bytes(pickle.dumps([1]))
    return folder


_VIDEO = np.zeros((2, 3, 3), dtype=np.float32)
_IMAGE = np.zeros((3, 3), dtype=np.float32)
_ARRAY = np.zeros((2, 4), dtype=np.float32)

# Valid arguments (those without a default, and any a check needs) for each public callable:
# VALID[name](inputs, outputs) gives keyword arguments; ``inputs`` holds files to read
# (_files), ``outputs`` is an empty folder to write into.
VALID = {
    'researchutils.arrays.one_hot': lambda i, o: dict(indices=[0, 1], shape=(2, 2)),
    'researchutils.arrays.unzip': lambda i, o: dict(zipped_array=[(1, 2)]),
    'researchutils.files.create_dir_if_not_exist': lambda i, o: dict(outdir=str(o / 'new')),
    'researchutils.files.file_exists': lambda i, o: dict(path=str(i / 'text.txt')),
    'researchutils.files.load_pickle': lambda i, o: dict(file_path=str(i / 'data.pkl')),
    'researchutils.files.prepare_output_dir': lambda i, o: dict(base_dir=str(o), args=None),
    'researchutils.files.read_text_from_file': lambda i, o: dict(file_path=str(i / 'text.txt')),
    'researchutils.files.save_pickle': lambda i, o: dict(file_path=str(o / 'a.pkl'), data=1),
    'researchutils.files.search_all_files_under': lambda i, o: dict(pathstr=str(i)),
    'researchutils.files.write_text_to_file': lambda i, o: dict(file_path=str(o / 'a.txt'),
                                                                data='a'),
    'researchutils.image.converter.chw2hwc': lambda i, o: dict(image=np.zeros((3, 2, 2))),
    'researchutils.image.converter.hwc2chw': lambda i, o: dict(image=np.zeros((2, 2, 3))),
    'researchutils.image.preprocess.compute_mean_image': lambda i, o: dict(frames=[_IMAGE]),
    'researchutils.image.viewer.animate': lambda i, o: dict(
        images=_VIDEO, save_gif=str(o / 'a.gif')),
    'researchutils.image.viewer.animate_in_matrix_form': lambda i, o: dict(
        images=[_VIDEO], save_gif=str(o / 'a.gif')),
    'researchutils.image.viewer.show_image': lambda i, o: dict(
        image=_IMAGE, save_path=str(o / 'a.png')),
    'researchutils.image.viewer.show_images': lambda i, o: dict(
        images=[_IMAGE], save_path=str(o / 'a.png')),
    'researchutils.math.angle.fit_angle_in_deg_range': lambda i, o: dict(angles=[1.0]),
    'researchutils.math.angle.fit_angle_in_rad_range': lambda i, o: dict(angles=[1.0]),
    'researchutils.math.normalization.normalize_by_min_max': lambda i, o: dict(data=[1., 2.]),
    'researchutils.math.normalization.standardize': lambda i, o: dict(data=[1., 2.]),
    'researchutils.task.plotter.draw_task': lambda i, o: dict(
        id=0, start_time=0., end_time=1., color='red', task_name='a', title='b', block=False,
        save_path=str(o / 'a.png')),
    'researchutils.chainer.data_loading.data_manager.DataManager': lambda i, o: dict(
        data=list(range(4)), batch_size=2),
    'researchutils.chainer.data_loading.random_sampler.RandomSampler': lambda i, o: dict(
        indices=[0, 1]),
    'researchutils.chainer.data_loading.sequential_sampler.SequentialSampler': lambda i, o: dict(
        indices=[0, 1]),
    'researchutils.chainer.functions.activation.grad_clip_lstm.GradClipLSTM': lambda i, o: {},
    'researchutils.chainer.functions.activation.grad_clip_lstm.grad_clip_lstm': lambda i, o: dict(
        c_prev=np.zeros((1, 2), np.float32), x=np.zeros((1, 8), np.float32)),
    'researchutils.chainer.functions.loss.average_k_step_squared_error.AverageKStepSquaredError':
        lambda i, o: dict(k_step=1),
    'researchutils.chainer.functions.loss.average_k_step_squared_error.'
    'average_k_step_squared_error': lambda i, o: dict(x1=_ARRAY, x2=_ARRAY, k_step=1),
    'researchutils.chainer.initializers.normal_with_loc.NormalWithLoc': lambda i, o: {},
    'researchutils.chainer.iterators.decorable_multiprocess_iterator.'
    'DecorableMultiprocessIterator': lambda i, o: dict(dataset=[1, 2], batch_size=1,
                                                       n_processes=1),
    'researchutils.chainer.iterators.decorable_multithread_iterator.DecorableMultithreadIterator':
        lambda i, o: dict(dataset=[1, 2], batch_size=1),
    'researchutils.chainer.iterators.decorable_serial_iterator.DecorableSerialIterator':
        lambda i, o: dict(dataset=[1, 2], batch_size=1),
    'researchutils.chainer.iterators.unmodifiable_decorable_list.UnmodifiableDecorableList':
        lambda i, o: dict(items=[1, 2]),
    'researchutils.chainer.links.connection.action_conditioned_lstm.ActionConditionedLSTM':
        lambda i, o: dict(in_size=2, out_size=2, action_size=2),
    'researchutils.chainer.links.connection.conv_lstm.ConvLSTM': lambda i, o: dict(
        in_channels=1, out_channels=1, ksize=3),
    'researchutils.chainer.links.connection.deconvolution_ps.DeconvolutionPS': lambda i, o: dict(
        in_channels=1, out_channels=1, ksize=3),
    'researchutils.chainer.links.connection.grad_clip_lstm.GradClipLSTM': lambda i, o: dict(
        in_size=2, out_size=2),
    'researchutils.chainer.models.data_parallel.DataParallelChainerNetwork': lambda i, o: dict(
        module=_model(), devices=['@numpy']),
    'researchutils.chainer.models.data_parallel_optimizer.DataParallelChainerOptimizer':
        lambda i, o: dict(optimizer=_optimizer()),
    'researchutils.chainer.training.experiment.ChainerExperiment': lambda i, o: dict(
        params=_params(), model_cls=_regressor_class(), name='exp', save_path=str(o)),
    'researchutils.chainer.training.extensions.best_model_saver.BestModelSaver': lambda i, o: dict(
        model=_model(), monitor='val/loss', mode='lowest', path=str(o / 'best.npz')),
    'researchutils.chainer.training.extensions.chainer_pruning_extension.ChainerPruningExtension':
        lambda i, o: dict(trial=_trial(), observation_key='val/loss', pruner_trigger=(1, 'epoch')),
    'researchutils.chainer.training.extensions.predictor_evaluator.PredictorEvaluator':
        lambda i, o: dict(predictor=_predictor(), manager=_manager(), metrics={'a': _metric}),
    'researchutils.chainer.training.extensions.preemption_snapshot.PreemptionSnapshot':
        lambda i, o: {},
    'researchutils.chainer.training.extensions.slack_report.SlackReport': lambda i, o: dict(
        token_or_client='xoxb-test', entries=['epoch']),
    'researchutils.chainer.training.extensions.tensorboard_report.TensorBoardReport':
        lambda i, o: dict(logdir=str(o / 'tensorboard'), entries=['main/loss']),
    'researchutils.chainer.training.extensions.mlflow_report.MLflowReport': lambda i, o: dict(
        tracking_uri='http://127.0.0.1:9', entries=['main/loss']),
    'researchutils.chainer.training.extensions.mlflow_report.send_unsent': lambda i, o: dict(
        path=str(i / 'text.txt'), tracking_uri='http://127.0.0.1:9'),
    'researchutils.chainer.onnx.exporter.export': lambda i, o: dict(
        model=_model(), args=np.zeros((1, 4), np.float32), path=str(o / 'model.onnx')),
    'researchutils.chainer.training.json_values.dumps_json': lambda i, o: dict(value={'a': 1}),
    'researchutils.chainer.training.json_values.from_json_value': lambda i, o: dict(value=1),
    'researchutils.chainer.training.json_values.load_json': lambda i, o: dict(
        path=str(i / 'text.txt')),
    'researchutils.chainer.training.json_values.to_json_value': lambda i, o: dict(value=1),
    'researchutils.chainer.training.parameters.Parameters': lambda i, o: {},
    'researchutils.chainer.training.predictor.Predictor': lambda i, o: dict(
        model=_model(), key_mapping={'x': 'data'}),
    'researchutils.chainer.training.predictor.convert_to_numpy': lambda i, o: dict(value=1),
    'researchutils.chainer.training.references.model_package': lambda i, o: dict(
        model_cls=_regressor_class()),
    'researchutils.chainer.training.references.object_reference': lambda i, o: dict(
        value=F.relu, where='activation'),
    'researchutils.chainer.training.references.resolve_reference': lambda i, o: dict(
        reference='chainer.functions:relu', where='activation'),
    'researchutils.chainer.training.search_space.FloatRange': lambda i, o: dict(low=0., high=1.),
    'researchutils.chainer.training.search_space.IntRange': lambda i, o: dict(low=0, high=1),
    'researchutils.chainer.training.train_utils.atomic_write_text': lambda i, o: dict(
        path=str(o / 'a.txt'), text='a'),
    'researchutils.chainer.training.train_utils.create_optims_default_chainer':
        lambda i, o: dict(model=_model(), optim_cls=chainer.optimizers.SGD),
    'researchutils.chainer.training.triggers.resumable_early_stopping_trigger.'
    'ResumableEarlyStoppingTrigger': lambda i, o: {},
    'researchutils.chainer.training.updaters.closure_updater.ClosureUpdater': lambda i, o: dict(
        iterator=_iterator(), model=_model(), optimizers={'default': _optimizer()},
        losses={'MSE': F.mean_squared_error}),
    'researchutils.chainer.serializers.npz.save_model': lambda i, o: dict(
        path=str(o / 'model.npz'), model=_model()),
    'researchutils.chainer.serializers.npz.load_model': lambda i, o: dict(
        path=str(i / 'model.npz'), model=_model()),
    'researchutils.chainer.serializers.npz.load_model_from_snapshot': lambda i, o: dict(
        path=str(i / 'model.npz'), model=_model()),
}


def _metric(pred, label):
    return 0.


def _trial():
    import optuna
    return optuna.trial.FixedTrial({})


def _torch_valid():
    """VALID's lines for the torch side (researchutils.pytorch), where torch is installed."""
    import torch
    tensor = torch.zeros
    bounds = dict(clip_min=-1.0, clip_max=1.0)
    return {
        'researchutils.pytorch.functions.grad_clip_lstm': lambda i, o: dict(
            c_prev=tensor(1, 2), x=tensor(1, 8), **bounds),
        'researchutils.pytorch.functions.average_k_step_squared_error': lambda i, o: dict(
            x1=tensor(2), x2=tensor(2), k_step=1),
        'researchutils.pytorch.nn.grad_clip_lstm.GradClipLSTM': lambda i, o: dict(
            in_size=3, out_size=2, **bounds),
        'researchutils.pytorch.nn.action_conditioned_lstm.ActionConditionedLSTM':
            lambda i, o: dict(in_size=3, out_size=2, action_size=4, **bounds),
        'researchutils.pytorch.nn.conv_lstm.ConvLSTM': lambda i, o: dict(
            in_channels=2, out_channels=3, ksize=3, **bounds),
        'researchutils.pytorch.nn.deconvolution_ps.DeconvolutionPS': lambda i, o: dict(
            in_channels=2, out_channels=3, ksize=3),
        'researchutils.pytorch.initializers.NormalWithLoc': lambda i, o: {},
        # the twins of Chainer's own links, and the way Chainer weights come in
        **{'researchutils.pytorch.nn.' + name: (lambda i, o: dict(in_size=3, out_size=2))
           for name in ('connection.Linear', 'connection.EmbedID', 'recurrent.LSTM',
                        'recurrent.StatelessLSTM', 'recurrent.StatefulGRU',
                        'recurrent.StatelessGRU')},
        **{'researchutils.pytorch.nn.n_step_rnn.' + name: (
            lambda i, o: dict(n_layers=1, in_size=3, out_size=2, dropout=0.0))
           for name in ('NStepLSTM', 'NStepBiLSTM', 'NStepGRU', 'NStepBiGRU')},
        'researchutils.pytorch.nn.connection.Deconvolution2D': lambda i, o: dict(
            in_channels=2, out_channels=4, ksize=3, outsize=(5, 5), groups=2),
        'researchutils.pytorch.nn.connection.DepthwiseConvolution2D': lambda i, o: dict(
            in_channels=2, channel_multiplier=3, ksize=3),
        'researchutils.pytorch.nn.connection.Highway': lambda i, o: dict(in_out_size=3),
        'researchutils.pytorch.nn.connection.Maxout': lambda i, o: dict(
            in_size=3, out_size=2, pool_size=2),
        'researchutils.pytorch.nn.normalization.BatchNormalization': lambda i, o: dict(size=3),
        'researchutils.pytorch.nn.containers.Sequential': lambda i, o: {},
        'researchutils.pytorch.nn.containers.Chain': lambda i, o: dict(chainer_class='a.B'),
        'researchutils.pytorch.weights.conversion.from_chainer': lambda i, o: dict(
            link=chainer.links.Linear(3, 2)),
        'researchutils.pytorch.tracing.converter.convert': lambda i, o: dict(
            model=_model(), args=np.zeros((1, 4), np.float32)),
        'researchutils.pytorch.tracing.converter.write_source': lambda i, o: dict(
            module_or_model=_model(), path=str(o / 'model.py'),
            args=np.zeros((1, 4), np.float32)),
        'researchutils.pytorch.weights.loading.load_chainer_weights': lambda i, o: dict(
            module=torch.nn.Linear(3, 2), source=chainer.links.Linear(3, 2)),
        'researchutils.pytorch.weights.comparison.compare': lambda i, o: dict(
            chainer_model=chainer.links.Linear(3, 2), module=torch.nn.Linear(3, 2),
            inputs=np.zeros((1, 3), np.float32)),
        **{'researchutils.pytorch.optim.optimizers.' + name: (
            lambda i, o: dict(params=[torch.nn.Parameter(tensor(2))]))
           for name in ('ChainerMomentumSGD', 'ChainerAdam', 'ChainerRMSprop')},
        'researchutils.pytorch.optim.hooks.WeightDecay': lambda i, o: dict(rate=0.1),
        'researchutils.pytorch.optim.hooks.GradientClipping': lambda i, o: dict(threshold=1.0),
        'researchutils.pytorch.optim.schedules.ExponentialShift': lambda i, o: dict(
            optimizer=_torch_sgd(), attr='lr', rate=0.5),
        'researchutils.pytorch.optim.schedules.LinearShift': lambda i, o: dict(
            optimizer=_torch_sgd(), attr='lr', value_range=(0.1, 0.01), time_range=(0, 5)),
        'researchutils.pytorch.optim.conversion.from_chainer_optimizer': lambda i, o: dict(
            optimizer=_set_up(chainer.optimizers.SGD(), chainer.links.Linear(3, 2)),
            module=torch.nn.Linear(3, 2)),
        'researchutils.pytorch.optim.conversion.from_chainer_schedule': lambda i, o: dict(
            extension=chainer.training.extensions.ExponentialShift('lr', 0.5),
            optimizer=_torch_sgd()),
    }


def _torch_sgd():
    import torch
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)


def _set_up(optimizer, link):
    optimizer.setup(link)
    return optimizer


if TORCH_INSTALLED:
    VALID.update(_torch_valid())
    BAD_BY_ANNOTATION.update({
        'torch.Tensor': [np.zeros(2, np.float32), [0.0, 1.0], 5],
        'torch.dtype': ['float32', np.float32, 5],
    })


# Public names the table cannot call, or whose arguments break the rule on purpose: why.
EXCEPTIONS = {
    'researchutils.chainer.data_loading.abstract_dataset.AbstractDataset':
        'abstract; its arguments are checked through DataManager and the tests of subclasses',
    'researchutils.chainer.data_loading.abstract_sampler.AbstractSampler':
        'abstract; RandomSampler and SequentialSampler are its arguments checked',
    'researchutils.chainer.functions.activation.grad_clip_lstm.GradClipLSTMGrad':
        'made by GradClipLSTM.backward from arrays of its forward pass, never by a user',
    'researchutils.chainer.models.abstract_network.AbstractChainerNetwork':
        'its **kwargs are the subclass\'s hyperparameters, any JSON value',
    'researchutils.chainer.models.data_parallel_optimizer.ParallelOptimizerCumulateGradientsHook':
        'takes no argument',
    'researchutils.chainer.models.data_parallel_optimizer.ParallelOptimizerUpdateModelParameters':
        'takes no argument',
    'researchutils.chainer.models.multi_node.create_communicator':
        'needs mpi4py and runs under mpiexec: tests/chainer/models/test_multi_node.py',
    'researchutils.chainer.models.multi_node.mean_across_ranks':
        'needs a ChainerMN communicator (mpi4py): tests/chainer/models/test_multi_node.py',
    'researchutils.chainer.models.multi_node.setup_multi_node_optimizer':
        'needs a ChainerMN communicator (mpi4py): tests/chainer/models/test_multi_node.py',
    'researchutils.chainer.training.extensions.preemption_snapshot.Preempted':
        'an exception raised by PreemptionSnapshot, which fills in its arguments',
    'researchutils.chainer.training.extensions.stop_on_non_number.StopOnNonNumber':
        'takes no argument',
    'researchutils.chainer.training.extensions.stop_on_non_number.TrainingDiverged':
        'an exception raised by StopOnNonNumber, which fills in its message',
    'researchutils.chainer.serializers.npz.load_snapshot':
        'needs a Trainer; its path is checked as load_model\'s (same helper)',
}

# Arguments whose annotation alone does not give their bad values: (callable, argument).
OVERRIDES = {
    ('researchutils.pytorch.optim.conversion.from_chainer_optimizer', 'optimizer'): [5, 'adam'],
    ('researchutils.pytorch.optim.conversion.from_chainer_optimizer', 'module'): [5, None],
    ('researchutils.pytorch.optim.conversion.from_chainer_schedule', 'extension'): [5, None],
    ('researchutils.pytorch.optim.conversion.from_chainer_schedule', 'optimizer'): [5, None],
    ('researchutils.pytorch.optim.optimizers.ChainerAdam', 'betas'): [0.9, (0.9,), (0.9, 1.5)],
    ('researchutils.pytorch.optim.schedules.ExponentialShift', 'optimizer'): [5, None],
    ('researchutils.pytorch.optim.schedules.LinearShift', 'optimizer'): [5, None],
    ('researchutils.pytorch.optim.schedules.LinearShift', 'value_range'): [0.1, (0.1,)],
    ('researchutils.pytorch.weights.loading.load_chainer_weights', 'module'): [5, None],
    ('researchutils.pytorch.weights.loading.load_chainer_weights', 'source'): [5, None],
    ('researchutils.pytorch.weights.comparison.compare', 'module'): [5, None],
    ('researchutils.chainer.onnx.exporter.export', 'converters'): [5, {'Linear': 5}, {5: len}],
    ('researchutils.pytorch.tracing.converter.convert', 'model'): [5, None],
    ('researchutils.pytorch.tracing.converter.write_source', 'module_or_model'): [5, None],
    **{(name, 'comm'): _COMM for name in (
        'researchutils.chainer.training.experiment.ChainerExperiment',
        'researchutils.chainer.training.extensions.chainer_pruning_extension.'
        'ChainerPruningExtension',
        'researchutils.chainer.training.extensions.predictor_evaluator.PredictorEvaluator',
        'researchutils.chainer.training.extensions.preemption_snapshot.PreemptionSnapshot',
        'researchutils.chainer.training.extensions.slack_report.SlackReport',
        'researchutils.chainer.training.extensions.tensorboard_report.TensorBoardReport',
        'researchutils.chainer.training.extensions.mlflow_report.MLflowReport')},
    # None is JSON's null.
    ('researchutils.chainer.training.json_values.dumps_json', 'value'):
        [NAN, math.inf, {1: 'a'}, {'a': [NAN]}, {(1, 2): 'a'}, object()],
    # No metric is fine.
    ('researchutils.chainer.training.updaters.closure_updater.ClosureUpdater', 'metrics'):
        [5, {'MSE': 5}, [F.mean_squared_error]],
    ('researchutils.chainer.training.updaters.closure_updater.ClosureUpdater', 'device'):
        ['@nosuchdevice', 1.5, [0]],
}

# Arguments without bad values to try: (callable, argument) -> why.
NO_BAD_VALUES = {
    **{('researchutils.pytorch.optim.optimizers.' + name, 'params'):
       "torch.optim.Optimizer's own check (an iterable of tensors or param groups), in "
       "torch's words" for name in ('ChainerMomentumSGD', 'ChainerAdam', 'ChainerRMSprop')},
    ('researchutils.pytorch.weights.comparison.compare', 'inputs'):
        "any positional arguments of the model; an input that is not an array is refused "
        "naming its place (tests/pytorch/weights/test_comparison.py)",
    ('researchutils.chainer.onnx.exporter.export', 'args'):
        'any example input of the model (an array, a tuple, list or dict of arrays); the '
        "model's own forward checks it",
    **{(name, 'args'): 'any example input of the model, as export takes it (arrays and '
       'Variables, checked by the export\'s own helper: tests/pytorch/tracing/test_convert.py)'
       for name in ('researchutils.pytorch.tracing.converter.convert',
                    'researchutils.pytorch.tracing.converter.write_source')},
    **{(name, 'parameters'): 'any hyper-parameters: a Parameters, a dict or None; what '
       'cannot be logged is named when written (test_tensorboard_report.py, '
       'test_mlflow_report.py)' for name in (
        'researchutils.chainer.training.extensions.tensorboard_report.TensorBoardReport',
        'researchutils.chainer.training.extensions.mlflow_report.MLflowReport')},
    ('researchutils.arrays.one_hot', 'on_value'):
        'any value of dtype; checked against dtype (tests/test_arrays.py)',
    ('researchutils.arrays.one_hot', 'off_value'):
        'any value of dtype; checked against dtype (tests/test_arrays.py)',
    ('researchutils.chainer.training.extensions.chainer_pruning_extension.'
     'ChainerPruningExtension', 'trial'):
        'duck-typed Optuna trial; None is refused on rank 0 (its own tests)',
    ('researchutils.chainer.training.json_values.from_json_value', 'value'):
        'any JSON data; what it cannot read is refused naming where (test_json_values.py)',
    ('researchutils.chainer.training.json_values.to_json_value', 'value'):
        'any value; what JSON cannot hold is refused naming where (test_json_values.py)',
    ('researchutils.chainer.training.predictor.convert_to_numpy', 'value'):
        'any value: what is not an array is returned as it is',
    ('researchutils.chainer.training.references.object_reference', 'value'):
        'any value; what cannot be a reference is refused naming where (test_references.py)',
    ('researchutils.files.save_pickle', 'data'):
        'anything pickle takes; what it cannot pickle leaves no file (test_files.py)',
}


@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
    folder = _files(tmp_path_factory.mktemp('inputs') / 'in')
    chainer.serializers.save_npz(str(folder / 'model.npz'), _model())
    return folder


def test_every_argument_has_bad_values_or_says_why_not():
    untried = []
    for name, function in public_callables():
        if name not in VALID:
            continue
        for parameter in inspect.signature(function).parameters.values():
            key = (name, parameter.name)
            if (key in NO_BAD_VALUES
                    or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)):
                continue
            if not bad_values(name, parameter):
                untried.append('{}({}: {})'.format(name, parameter.name, parameter.annotation))
    assert untried == []


def test_every_public_callable_has_valid_arguments():
    names = {name for name, _ in public_callables()}
    assert sorted(names - set(VALID) - set(EXCEPTIONS)) == []
    assert sorted((set(VALID) | set(EXCEPTIONS)) - names) == []
    assert set(VALID) & set(EXCEPTIONS) == set()


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _call(function, kwargs, seconds=10):
    """Calls with a bound: a call that takes over ``seconds`` is a hang."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return function(**kwargs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _close(result):
    # An iterator made by mistake keeps worker threads or processes: end them.
    if isinstance(result, chainer.dataset.Iterator):
        result.finalize()


def _failures(name, function, inputs, outputs):
    failures = []
    for parameter in inspect.signature(function).parameters.values():
        for value in bad_values(name, parameter):
            kwargs = VALID[name](inputs, outputs)
            kwargs[parameter.name] = value
            try:
                result = _call(function, kwargs)
            except _Hang:
                failures.append('{}={!r}: no answer in 10 s'.format(parameter.name, value))
            except (ValueError, TypeError, InvalidType) as error:
                if parameter.name not in str(error):
                    failures.append('{}={!r}: {}: {} (does not name {})'.format(
                        parameter.name, value, type(error).__name__, error, parameter.name))
            except Exception as error:
                failures.append('{}={!r}: {}: {}'.format(parameter.name, value,
                                                         type(error).__name__, error))
            else:
                _close(result)
                failures.append('{}={!r}: taken'.format(parameter.name, value))
    return failures


@pytest.mark.parametrize('name', sorted(VALID))
def test_bad_arguments_are_refused_naming_them(name, inputs, tmp_path, monkeypatch):
    function = dict(public_callables())[name]
    outputs = tmp_path / 'out'
    outputs.mkdir()
    working = tmp_path / 'cwd'
    working.mkdir()
    monkeypatch.chdir(working)
    assert _failures(name, function, inputs, outputs) == []
    assert sorted(os.listdir(outputs)) == []
    assert sorted(os.listdir(working)) == []
