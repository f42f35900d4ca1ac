"""Import paths of the original researchutils resolve as they did there, and every
``__all__`` name is the object it claims to be (a module where a submodule has that name).

Chainer's convention: ``chainer.functions.lstm`` is the function, ``chainer.functions.rnn.lstm``
the module. A grouping subpackage never rebinds one of its submodules' names.
"""
import importlib
import inspect
import pkgutil
import subprocess
import sys
import types

import pytest

import researchutils
from tests.support.torch_twins import importable_here

# Every module of the original project that this project has, with the public names the
# original defined there.
ORIGINAL_MODULES = {
    'researchutils.chainer.functions.activation.grad_clip_lstm':
        ['GradClipLSTM', 'grad_clip_lstm'],
    'researchutils.chainer.functions.loss.average_k_step_squared_error':
        ['average_k_step_squared_error'],
    'researchutils.chainer.iterators.decorable_multiprocess_iterator':
        ['DecorableMultiprocessIterator'],
    'researchutils.chainer.iterators.decorable_multithread_iterator':
        ['DecorableMultithreadIterator'],
    'researchutils.chainer.iterators.decorable_serial_iterator': ['DecorableSerialIterator'],
    'researchutils.chainer.iterators.unmodifiable_decorable_list':
        ['UnmodifiableDecorableList'],
    'researchutils.chainer.links.connection.grad_clip_lstm': ['GradClipLSTM'],
    'researchutils.chainer.links.connection.conv_lstm': ['ConvLSTM'],
    'researchutils.chainer.links.connection.action_conditioned_lstm': ['ActionConditionedLSTM'],
    'researchutils.chainer.links.connection.deconvolution_ps': ['DeconvolutionPS'],
    'researchutils.chainer.initializers.normal_with_loc': ['NormalWithLoc'],
    'researchutils.chainer.serializers.npz': ['save_model', 'load_model'],
    'researchutils.chainer.training.extensions.slack_report': ['SlackReport'],
    'researchutils.arrays': ['one_hot', 'unzip'],
    'researchutils.files': ['search_all_files_under', 'file_exists', 'create_dir_if_not_exist',
                            'write_text_to_file', 'read_text_from_file', 'save_pickle',
                            'load_pickle', 'prepare_output_dir'],
    'researchutils.image.converter': ['hwc2chw', 'chw2hwc'],
    'researchutils.image.preprocess': ['compute_mean_image'],
    'researchutils.image.viewer': ['show_image', 'show_images', 'animate',
                                   'animate_in_matrix_form'],
    'researchutils.math.angle': ['fit_angle_in_rad_range', 'fit_angle_in_deg_range'],
    'researchutils.math.normalization': ['normalize_by_min_max', 'standardize'],
    'researchutils.task.plotter': ['draw_task'],
}

# Flat names as users import them from a package one level up.
FLAT_NAMES = {
    'researchutils.chainer.functions': {
        'grad_clip_lstm': 'researchutils.chainer.functions.activation.grad_clip_lstm',
        'GradClipLSTM': 'researchutils.chainer.functions.activation.grad_clip_lstm',
        'average_k_step_squared_error':
            'researchutils.chainer.functions.loss.average_k_step_squared_error',
    },
    'researchutils.chainer.links': {
        'GradClipLSTM': 'researchutils.chainer.links.connection.grad_clip_lstm',
        'ConvLSTM': 'researchutils.chainer.links.connection.conv_lstm',
        'ActionConditionedLSTM': 'researchutils.chainer.links.connection.action_conditioned_lstm',
        'DeconvolutionPS': 'researchutils.chainer.links.connection.deconvolution_ps',
    },
    'researchutils.chainer.initializers': {
        'NormalWithLoc': 'researchutils.chainer.initializers.normal_with_loc',
    },
    'researchutils.chainer.training.extensions': {
        'SlackReport': 'researchutils.chainer.training.extensions.slack_report',
    },
    'researchutils.chainer.serializers': {
        'save_model': 'researchutils.chainer.serializers.npz',
        'load_model': 'researchutils.chainer.serializers.npz',
    },
}


def _packages():
    for info in pkgutil.walk_packages(researchutils.__path__, 'researchutils.'):
        if (info.ispkg and not any(part.startswith('_') for part in info.name.split('.'))
                and importable_here(info.name)):
            yield info.name


def _submodule_names(package):
    return {info.name for info in pkgutil.iter_modules(package.__path__)
            if not info.name.startswith('_')}


@pytest.mark.parametrize('module_name', sorted(ORIGINAL_MODULES))
def test_original_module_path_is_a_module_with_its_names(module_name):
    module = importlib.import_module(module_name)
    assert isinstance(module, types.ModuleType)
    for name in ORIGINAL_MODULES[module_name]:
        assert getattr(module, name).__module__ == module_name


@pytest.mark.parametrize('module_name', sorted(ORIGINAL_MODULES))
def test_from_parent_import_gives_the_module(module_name):
    # Every package is imported by now (other tests, the flat re-exports), which is when
    # a rebinding package would have replaced the module by an object of the same name.
    importlib.import_module('researchutils.chainer.functions')
    importlib.import_module('researchutils.chainer.links')
    parent_name, _, child = module_name.rpartition('.')
    parent = importlib.import_module(parent_name)
    assert getattr(parent, child) is sys.modules[module_name]


def test_original_import_statements_in_a_fresh_interpreter():
    # The first import of each package, as the original's own link and tests wrote it.
    script = '\n'.join([
        'import types',
        'from researchutils.chainer.functions.activation import grad_clip_lstm',
        'from researchutils.chainer.functions.loss import average_k_step_squared_error',
        'from researchutils.chainer.links.connection import grad_clip_lstm as link_module',
        'from researchutils.chainer.training.extensions import slack_report',
        'from researchutils import arrays, files',
        'from researchutils.math import angle, normalization',
        'import researchutils.chainer.functions as F',
        'import researchutils.chainer.links as L',
        'for m in (grad_clip_lstm, average_k_step_squared_error, link_module, slack_report,',
        '          arrays, files, angle, normalization):',
        '    assert isinstance(m, types.ModuleType), m',
        'assert grad_clip_lstm.grad_clip_lstm is F.grad_clip_lstm',
        'assert grad_clip_lstm.GradClipLSTM is F.GradClipLSTM',
        'assert link_module.GradClipLSTM is L.GradClipLSTM',
        'assert slack_report.SlackReport.__module__ == slack_report.__name__',
        'from researchutils.chainer.functions.activation import grad_clip_lstm as again',
        'assert again is grad_clip_lstm',
        'print("ok")',
    ])
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'ok'


@pytest.mark.parametrize('package_name', sorted(FLAT_NAMES))
def test_flat_names_are_the_objects_of_their_modules(package_name):
    package = importlib.import_module(package_name)
    for name, module_name in FLAT_NAMES[package_name].items():
        value = getattr(package, name)
        assert not isinstance(value, types.ModuleType), '{}.{}'.format(package_name, name)
        assert value is getattr(importlib.import_module(module_name), name)


@pytest.mark.parametrize('package_name', sorted(_packages()))
def test_no_package_rebinds_a_submodule_name(package_name):
    package = importlib.import_module(package_name)
    for child in _submodule_names(package):
        module = importlib.import_module('{}.{}'.format(package_name, child))
        assert getattr(package, child) is module, '{}.{}'.format(package_name, child)


@pytest.mark.parametrize('package_name', sorted(_packages()))
def test_every_all_name_is_what_it_claims(package_name):
    package = importlib.import_module(package_name)
    submodules = _submodule_names(package)
    for name in package.__all__:
        value = getattr(package, name)
        if name in submodules:
            assert value is importlib.import_module('{}.{}'.format(package_name, name))
            continue
        assert not isinstance(value, types.ModuleType), '{}.{}'.format(package_name, name)
        home = inspect.getmodule(value)
        assert getattr(home, name) is value, '{}.{}'.format(package_name, name)


@pytest.mark.parametrize('package_name', [
    'researchutils.chainer.functions.activation',
    'researchutils.chainer.functions.loss',
    'researchutils.chainer.links.connection',
])
def test_grouping_subpackages_list_exactly_their_modules(package_name):
    package = importlib.import_module(package_name)
    assert sorted(package.__all__) == sorted(_submodule_names(package))
