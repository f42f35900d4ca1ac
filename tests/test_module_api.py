"""The non-Chainer modules (arrays, files, image, math, task) keep the original researchutils'
names, positional arguments and defaults; every public name is documented with an example and
listed in the API reference."""
import importlib
import inspect
import math

import pytest

from tests.support.api_reference import api_reference_text

# The original researchutils' signatures: (name, default) in positional order; `...` is no
# default. `titles` defaulted to a shared list, [], and now defaults to None (no titles either).
ORIGINAL = {
    'researchutils.arrays': {
        'one_hot': [('indices', ...), ('shape', ...), ('on_value', 1), ('off_value', 0),
                    ('dtype', None)],
        'unzip': [('zipped_array', ...)],
    },
    'researchutils.files': {
        'search_all_files_under': [('pathstr', ...), ('exts', None)],
        'file_exists': [('path', ...)],
        'create_dir_if_not_exist': [('outdir', ...)],
        'write_text_to_file': [('file_path', ...), ('data', ...)],
        'read_text_from_file': [('file_path', ...)],
        'save_pickle': [('file_path', ...), ('data', ...)],
        'load_pickle': [('file_path', ...)],
        'prepare_output_dir': [('base_dir', ...), ('args', ...),
                               ('time_format', '%Y-%m-%d-%H%M%S')],
    },
    'researchutils.image.converter': {
        'hwc2chw': [('image', ...)],
        'chw2hwc': [('image', ...)],
    },
    'researchutils.image.preprocess': {
        'compute_mean_image': [('frames', ...)],
    },
    'researchutils.image.viewer': {
        'show_image': [('image', ...), ('title', ''), ('is_gray', False)],
        'show_images': [('images', ...), ('title', ''), ('comparisons', None),
                        ('comparison_title', ''), ('is_gray', False), ('vertical', False)],
        'animate': [('images', ...), ('comparisons', None), ('titles', None),
                    ('is_gray', False), ('fps', 15), ('repeat', False), ('save_gif', False),
                    ('save_mp4', False), ('auto_close', False)],
        'animate_in_matrix_form': [('images', None), ('titles', None), ('is_gray', False),
                                   ('fps', 15), ('images_per_row', None), ('repeat', False),
                                   ('save_gif', False), ('save_mp4', False),
                                   ('auto_close', False), ('remove_axis', False)],
    },
    'researchutils.math.angle': {
        'fit_angle_in_rad_range': [('angles', ...), ('min_angle', 0.0),
                                   ('max_angle', 2 * math.pi)],
        'fit_angle_in_deg_range': [('angles', ...), ('min_angle', 0.0), ('max_angle', 360.0)],
    },
    'researchutils.math.normalization': {
        'normalize_by_min_max': [('data', ...), ('min_value', 0.0), ('max_value', 1.0)],
        'standardize': [('data', ...)],
    },
    'researchutils.task.plotter': {
        'draw_task': [('id', ...), ('start_time', ...), ('end_time', ...), ('color', ...),
                      ('task_name', ...), ('title', ...), ('line_width', 40), ('block', True)],
    },
}
PLOTTING = ('researchutils.image', 'researchutils.task')


def _module(name):
    if name.startswith(PLOTTING):
        pytest.importorskip('matplotlib')
    return importlib.import_module(name)


@pytest.mark.parametrize('module_name', sorted(ORIGINAL))
def test_public_names_are_the_original_ones(module_name):
    assert sorted(_module(module_name).__all__) == sorted(ORIGINAL[module_name])


@pytest.mark.parametrize('module_name, function_name',
                         [(m, f) for m in sorted(ORIGINAL) for f in sorted(ORIGINAL[m])])
def test_positional_arguments_and_defaults_are_the_original_ones(module_name, function_name):
    function = getattr(_module(module_name), function_name)
    positional = [(p.name, ... if p.default is p.empty else p.default)
                  for p in inspect.signature(function).parameters.values()
                  if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == ORIGINAL[module_name][function_name]


@pytest.mark.parametrize('module_name, function_name',
                         [(m, f) for m in sorted(ORIGINAL) for f in sorted(ORIGINAL[m])])
def test_every_function_has_a_docstring_with_an_example(module_name, function_name):
    doc = inspect.getdoc(getattr(_module(module_name), function_name))
    assert doc and 'Example:' in doc and '>>>' in doc


@pytest.mark.parametrize('module_name', sorted(ORIGINAL))
def test_every_module_is_in_the_api_reference(module_name):
    assert '.. automodule:: {}\n'.format(module_name) in api_reference_text()


@pytest.mark.parametrize('package_name, modules', [
    ('researchutils.image', ['converter', 'preprocess', 'viewer']),
    ('researchutils.math', ['angle', 'normalization']),
    ('researchutils.task', ['plotter']),
])
def test_packages_bind_their_modules_as_the_original_did(package_name, modules):
    package = _module(package_name)
    assert sorted(package.__all__) == modules
    for name in modules:
        assert inspect.ismodule(getattr(package, name))
