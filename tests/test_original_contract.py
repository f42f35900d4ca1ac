"""The original researchutils' contract, held at its import paths: what its code accepted.

One row per case, read from the original's code (keio-ytlab/researchutils, the last
commit): the public name, the argument, the value, what the original did with it, and what
researchutils does. A row is one of three kinds:

- ``Same``: the original accepted the value and did right; researchutils gives the same
  outcome (a warning at most). tests/test_every_argument_checked.py reads these rows
  (:func:`original_accepts`) and never tries such a value as a bad one, so the two tests
  cannot disagree.
- ``Better``: the original's outcome was wrong (NaN, an answer off by a wrap); researchutils
  gives the right one.
- ``Raises``: the original raised too (often a less clear error, later); researchutils
  raises at once, naming the argument.
- ``Refused``: the original's outcome was wrong or dangerous (a broadcast, a silent
  truncation, a file overwritten, an error half-way through an epoch); researchutils
  refuses it at once with a TypeError or ValueError naming the argument, and
  docs/porting.rst names the case (the row holds the words it must contain).

The rule is docs/maintaining.rst's: a check at an original path never refuses what the
original accepted and did right. Runs on every stack (its subject is the package on NumPy
and Chainer).
"""
import argparse
import os
import pathlib
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import chainer
import chainer.links as L
import numpy as np
import pytest

from researchutils import arrays, files
from researchutils.chainer import functions, initializers, iterators, links, serializers
from researchutils.chainer.functions.activation import grad_clip_lstm as grad_clip_module
from researchutils.image import converter, preprocess
from researchutils.math import angle, normalization

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Same:
    """The original's outcome; ``check(result, folder)`` is True when it is the same."""
    check: Callable[[Any, pathlib.Path], bool]
    warns: bool = False  # a warning, at most, where the original said nothing


@dataclass(frozen=True)
class Better:
    """The right outcome where the original's was wrong; ``porting`` is on the porting page."""
    check: Callable[[Any, pathlib.Path], bool]
    porting: str


@dataclass(frozen=True)
class Refused:
    """A TypeError or ValueError naming ``argument``; ``porting`` is on the porting page."""
    porting: str


@dataclass(frozen=True)
class Raises:
    """The original raised too; researchutils raises a TypeError, ValueError or OSError
    naming ``argument`` (or the value, for an OSError)."""


@dataclass(frozen=True)
class Case:
    name: str  # module.qualname, as tests/test_every_argument_checked.py names it
    argument: str
    value: Any
    original: str  # what the original's code did with the value
    call: Callable[[pathlib.Path], Any] = field(repr=False)
    outcome: Same | Better | Refused | Raises = field(repr=False)
    needs: str | None = None  # an optional package the call needs

    @property
    def id(self):
        return '{}({}={!r})'.format(self.name.rsplit('.', 1)[-1], self.argument, self.value)


def _files(folder):
    (folder / 'data' / 'sub').mkdir(parents=True)
    for name in ('data/a.txt', 'data/b', 'data/sub/c.tx'):
        (folder / name).write_text('x')
    return folder / 'data'


def _model_file(folder):
    path = folder / 'model.npz'
    chainer.serializers.save_npz(str(path), L.Linear(2, 3))
    return path


def _trainer(folder):
    model = L.Classifier(L.Linear(2, 2))
    optimizer = chainer.optimizers.SGD().setup(model)
    data = [(np.zeros(2, np.float32), np.int32(0))]
    updater = chainer.training.StandardUpdater(
        chainer.iterators.SerialIterator(data, 1), optimizer)
    return chainer.training.Trainer(updater, (1, 'epoch'), out=str(folder / 'result'))


def _same_array(expected):
    return lambda result, folder: np.array_equal(np.asarray(result), np.asarray(expected))


def _close(expected):
    return lambda result, folder: np.allclose(np.asarray(result, float), expected)


def _none(result, folder):
    return result is None


def _first(iterator):
    try:
        return iterator.next()
    finally:
        iterator.finalize()


def _viewer():
    import researchutils.image.viewer  # needs matplotlib: imported by the rows that need it
    return researchutils.image.viewer


_FRAMES = np.zeros((2, 4, 4), np.float32)
_X = np.zeros((1, 8), np.float32)
_C = np.zeros((1, 2), np.float32)
_TWO_PI = 2 * np.pi
_FILES = 'researchutils.files.'
_NPZ = 'researchutils.chainer.serializers.npz.'
_LIST = 'researchutils.chainer.iterators.unmodifiable_decorable_list.UnmodifiableDecorableList'
_SERIAL = 'researchutils.chainer.iterators.decorable_serial_iterator.DecorableSerialIterator'

CASES = [
    # researchutils.arrays
    Case('researchutils.arrays.one_hot', 'indices', [0, 2], 'a list: filled column by column',
         lambda d: arrays.one_hot([0, 2], (3, 2)),
         Same(_same_array([[1, 0], [0, 0], [0, 1]]))),
    Case('researchutils.arrays.one_hot', 'shape', [3, 2], 'a list: np.full took it',
         lambda d: arrays.one_hot((0, 2), [3, 2]),
         Same(_same_array([[1, 0], [0, 0], [0, 1]]))),
    Case('researchutils.arrays.one_hot', 'shape', (3, 0), '0 columns: an empty (3, 0) array',
         lambda d: arrays.one_hot([], (3, 0)), Same(lambda r, d: r.shape == (3, 0))),
    Case('researchutils.arrays.one_hot', 'on_value', 1.0, 'a float: float32 vectors',
         lambda d: arrays.one_hot([1], (2, 1), on_value=1.0),
         Same(lambda r, d: r.dtype == np.float32 and r.tolist() == [[0.0], [1.0]])),
    Case('researchutils.arrays.one_hot', 'indices', [-1], 'a negative index: the last row, '
         'silently', lambda d: arrays.one_hot([-1], (3, 1)),
         Refused('a negative index counted from the end')),
    Case('researchutils.arrays.one_hot', 'indices', [1], 'fewer indices than columns: the '
         'other columns all off, silently', lambda d: arrays.one_hot([1], (3, 2)),
         Refused('a number of indices other than the number of columns')),
    Case('researchutils.arrays.one_hot', 'shape', (-1, 0), 'a negative size: NumPy\'s '
         'ValueError', lambda d: arrays.one_hot([], (-1, 0)),
         Raises()),
    Case('researchutils.arrays.unzip', 'zipped_array', [], 'empty: an empty zip',
         lambda d: arrays.unzip([]), Same(lambda r, d: list(r) == [])),
    Case('researchutils.arrays.unzip', 'zipped_array', ((1, 2), (3, 4)), 'tuples: unzipped',
         lambda d: arrays.unzip(((1, 2), (3, 4))),
         Same(lambda r, d: [tuple(x) for x in r] == [(1, 3), (2, 4)])),
    # researchutils.files
    Case(_FILES + 'file_exists', 'path', '', "'': False (os.path.exists)",
         lambda d: files.file_exists(''), Same(lambda r, d: r is False)),
    Case(_FILES + 'file_exists', 'path', 'missing', 'a missing path: False',
         lambda d: files.file_exists(str(d / 'missing')), Same(lambda r, d: r is False)),
    Case(_FILES + 'file_exists', 'path', pathlib.Path('.'), 'a pathlib.Path: True',
         lambda d: files.file_exists(d), Same(lambda r, d: r is True)),
    Case(_FILES + 'file_exists', 'path', None, 'None: TypeError from os.stat',
         lambda d: files.file_exists(None), Raises()),
    Case(_FILES + 'search_all_files_under', 'pathstr', '', "'': the working folder "
         '(pathlib.Path(\'\') is \'.\')', lambda d: (os.chdir(_files(d)),
                                                    files.search_all_files_under(''))[1],
         Same(lambda r, d: sorted(map(str, r)) == ['a.txt', 'b', os.path.join('sub', 'c.tx')])),
    Case(_FILES + 'search_all_files_under', 'pathstr', pathlib.Path('data'), 'a pathlib.Path',
         lambda d: files.search_all_files_under(_files(d)), Same(lambda r, d: len(r) == 3)),
    Case(_FILES + 'search_all_files_under', 'exts', None, 'None: every file',
         lambda d: files.search_all_files_under(str(_files(d)), exts=None),
         Same(lambda r, d: len(r) == 3)),
    Case(_FILES + 'search_all_files_under', 'exts', ('.txt',), 'a tuple: those extensions',
         lambda d: files.search_all_files_under(str(_files(d)), exts=('.txt',)),
         Same(lambda r, d: [p.name for p in r] == ['a.txt'])),
    Case(_FILES + 'search_all_files_under', 'exts', '.txt', "a str: matched as a substring "
         "('.tx' and files without an extension too)",
         lambda d: files.search_all_files_under(str(_files(d)), exts='.txt'),
         Better(lambda r, d: [p.name for p in r] == ['a.txt'], 'matched substrings')),
    Case(_FILES + 'search_all_files_under', 'pathstr', 'missing', 'ValueError',
         lambda d: files.search_all_files_under(str(d / 'missing')),
         Raises()),
    Case(_FILES + 'create_dir_if_not_exist', 'outdir', pathlib.Path('new/sub'),
         'a pathlib.Path: made', lambda d: files.create_dir_if_not_exist(d / 'new' / 'sub'),
         Same(lambda r, d: (d / 'new' / 'sub').is_dir())),
    Case(_FILES + 'create_dir_if_not_exist', 'outdir', '', "'': FileNotFoundError from "
         'os.makedirs', lambda d: files.create_dir_if_not_exist(''),
         Raises()),
    Case(_FILES + 'write_text_to_file', 'file_path', pathlib.Path('a.txt'), 'a pathlib.Path',
         lambda d: files.write_text_to_file(d / 'a.txt', 'text'),
         Same(lambda r, d: (d / 'a.txt').read_text() == 'text')),
    Case(_FILES + 'write_text_to_file', 'data', '', "'': an empty file",
         lambda d: files.write_text_to_file(d / 'a.txt', ''),
         Same(lambda r, d: (d / 'a.txt').read_text() == '')),
    Case(_FILES + 'write_text_to_file', 'file_path', 'existing', 'an existing file: '
         'replaced, as the name says', lambda d: (files.write_text_to_file(d / 'a.txt', 'old'),
                                                  files.write_text_to_file(d / 'a.txt', 'new')),
         Same(lambda r, d: (d / 'a.txt').read_text() == 'new')),
    Case(_FILES + 'read_text_from_file', 'file_path', pathlib.Path('a.txt'), 'a pathlib.Path',
         lambda d: ((d / 'a.txt').write_text('text'), files.read_text_from_file(d / 'a.txt'))[1],
         Same(lambda r, d: r == 'text')),
    Case(_FILES + 'save_pickle', 'file_path', pathlib.Path('a.pkl'), 'a pathlib.Path',
         lambda d: (files.save_pickle(d / 'a.pkl', [1]), files.load_pickle(d / 'a.pkl'))[1],
         Same(lambda r, d: r == [1])),
    Case(_FILES + 'load_pickle', 'file_path', 'missing', 'FileNotFoundError',
         lambda d: files.load_pickle(d / 'missing'), Raises()),
    Case(_FILES + 'prepare_output_dir', 'base_dir', '', "'': a folder in the working folder",
         lambda d: (os.chdir(d), files.prepare_output_dir('', {'a': 1}, 'run'))[1],
         Same(lambda r, d: r == 'run' and (d / 'run' / 'args.txt').is_file())),
    Case(_FILES + 'prepare_output_dir', 'base_dir', pathlib.Path('runs'), 'a pathlib.Path',
         lambda d: files.prepare_output_dir(d / 'runs', {'a': 1}, 'run'),
         Same(lambda r, d: r == os.path.join(str(d / 'runs'), 'run'))),
    Case(_FILES + 'prepare_output_dir', 'args', None, "None: args.txt holds 'null'",
         lambda d: files.prepare_output_dir(d, None, 'run'),
         Same(lambda r, d: (d / 'run' / 'args.txt').read_text() == 'null')),
    Case(_FILES + 'prepare_output_dir', 'args', argparse.Namespace(a=1), 'a Namespace',
         lambda d: files.prepare_output_dir(d, argparse.Namespace(a=1), 'run'),
         Same(lambda r, d: (d / 'run' / 'args.txt').read_text() == '{"a": 1}')),
    Case(_FILES + 'prepare_output_dir', 'time_format', 'run', 'a folder taken the same '
         'second: shared, its files overwritten',
         lambda d: (files.prepare_output_dir(d, {}, 'run'),
                    files.prepare_output_dir(d, {}, 'run'))[1],
         Better(lambda r, d: r == os.path.join(str(d), 'run-1'), 'overwrote its\n  files')),
    # researchutils.image
    Case('researchutils.image.converter.hwc2chw', 'image', 'ndarray', 'transposed',
         lambda d: converter.hwc2chw(np.zeros((2, 3, 4))), Same(lambda r, d: r.shape == (4, 2, 3))),
    Case('researchutils.image.converter.chw2hwc', 'image', 'ndarray', 'transposed',
         lambda d: converter.chw2hwc(np.zeros((4, 2, 3))), Same(lambda r, d: r.shape == (2, 3, 4))),
    Case('researchutils.image.preprocess.compute_mean_image', 'frames', 'list of int arrays',
         'their mean, float32', lambda d: preprocess.compute_mean_image(
             [np.ones((2, 2), int), np.zeros((2, 2), int)]),
         Same(lambda r, d: r.dtype == np.float32 and np.all(r == 0.5))),
    Case('researchutils.image.preprocess.compute_mean_image', 'frames', 'a 3-d array',
         'the mean over its first axis', lambda d: preprocess.compute_mean_image(np.ones((3, 2))),
         Same(_same_array([1, 1]))),
    Case('researchutils.image.preprocess.compute_mean_image', 'frames', [], 'IndexError',
         lambda d: preprocess.compute_mean_image([]), Refused('refuses an empty one')),
    Case('researchutils.image.viewer.show_image', 'title', '', "'': shown, no title",
         lambda d: (os.chdir(d), _viewer().show_image(np.zeros((2, 2)), title=''))[1],
         Same(lambda r, d: True, warns=True), needs='matplotlib'),
    Case('researchutils.image.viewer.show_images', 'comparisons', None, 'None: no comparisons',
         lambda d: (os.chdir(d), _viewer().show_images([np.zeros((2, 2))], comparisons=None))[1],
         Same(lambda r, d: True, warns=True), needs='matplotlib'),
    Case('researchutils.image.viewer.show_image', 'image', [[0, 1], [1, 0]],
         'a nested list: shown (imshow took it)',
         lambda d: (os.chdir(d), _viewer().show_image([[0, 1], [1, 0]]))[1],
         Same(lambda r, d: os.path.isfile(os.path.join(str(d), r)), warns=True),
         needs='matplotlib'),
    Case('researchutils.image.viewer.animate', 'titles', [], "[] (the default): no titles",
         lambda d: (os.chdir(d), _viewer().animate(_FRAMES, titles=[], fps=10))[1],
         Same(lambda r, d: len(r) == 1 and os.path.isfile(os.path.join(str(d), r[0])),
              warns=True), needs='matplotlib'),
    Case('researchutils.image.viewer.animate', 'comparisons', 'a video',
         'a video of the same shape: played beside', lambda d: (os.chdir(d), _viewer().animate(
             _FRAMES, comparisons=_FRAMES, fps=10))[1],
         Same(lambda r, d: len(r) == 1, warns=True), needs='matplotlib'),
    Case('researchutils.image.viewer.animate_in_matrix_form', 'images_per_row', None,
         'None: one row', lambda d: (os.chdir(d), _viewer().animate_in_matrix_form(
             [_FRAMES, _FRAMES], images_per_row=None))[1],
         Same(lambda r, d: len(r) == 1, warns=True), needs='matplotlib'),
    Case('researchutils.task.plotter.draw_task', 'start_time', 0, 'ints for times: drawn',
         lambda d: (os.chdir(d), __import__('researchutils.task.plotter').task.plotter
                    .draw_task(0, 0, 1, 'red', 'a', 'b', line_width=40, block=False))[1],
         Same(lambda r, d: True, warns=True), needs='matplotlib'),
    # researchutils.math
    Case('researchutils.math.angle.fit_angle_in_rad_range', 'angles', [7.0, -1.0],
         'a list: wrapped', lambda d: angle.fit_angle_in_rad_range([7.0, -1.0]),
         Same(_close([7.0 - _TWO_PI, _TWO_PI - 1.0]))),
    Case('researchutils.math.angle.fit_angle_in_rad_range', 'angles', 7.0,
         'a number: a 0-d array', lambda d: angle.fit_angle_in_rad_range(7.0),
         Same(_close(7.0 - _TWO_PI))),
    Case('researchutils.math.angle.fit_angle_in_rad_range', 'min_angle', -4,
         'int bounds', lambda d: angle.fit_angle_in_rad_range([1.0], -4, 4), Same(_close([1.0]))),
    Case('researchutils.math.angle.fit_angle_in_rad_range', 'angles', [],
         'empty: an empty array', lambda d: angle.fit_angle_in_rad_range([]),
         Same(lambda r, d: np.asarray(r).shape == (0,))),
    Case('researchutils.math.angle.fit_angle_in_deg_range', 'angles', [370, -10],
         'ints: a casting error (UFuncTypeError)',
         lambda d: angle.fit_angle_in_deg_range([370, -10]), Better(_close([10.0, 350.0]),
                                                                     'Integer angles work')),
    Case('researchutils.math.angle.fit_angle_in_deg_range', 'min_angle', -180,
         'int bounds', lambda d: angle.fit_angle_in_deg_range([370.0], -180, 180),
         Same(_close([10.0]))),
    Case('researchutils.math.normalization.normalize_by_min_max', 'data', [1, 2, 3],
         'a list of ints, int bounds',
         lambda d: normalization.normalize_by_min_max([1, 2, 3], 0, 10),
         Same(_close([0.0, 5.0, 10.0]))),
    Case('researchutils.math.normalization.normalize_by_min_max', 'data', [2.0, 2.0],
         'constant data: NaN (0/0) with a RuntimeWarning',
         lambda d: normalization.normalize_by_min_max([2.0, 2.0]),
         Better(_close([0.0, 0.0]), 'Constant data normalizes to ``min_value``')),
    Case('researchutils.math.normalization.standardize', 'data', [1, 2, 3], 'a list of ints',
         lambda d: normalization.standardize([1, 2, 3]), Same(_close([-1.2247449, 0, 1.2247449]))),
    # researchutils.chainer.serializers
    Case(_NPZ + 'load_model', 'path', '', "'': the model returned unchanged "
         '(files.file_exists is False)', lambda d: (lambda m: serializers.load_model('', m) is m)(
             L.Linear(2, 3)), Same(lambda r, d: r is True, warns=True)),
    Case(_NPZ + 'load_model', 'path', 'missing', 'the model returned unchanged',
         lambda d: (lambda m: serializers.load_model(str(d / 'missing.npz'), m) is m)(
             L.Linear(2, 3)), Same(lambda r, d: r is True, warns=True)),
    Case(_NPZ + 'load_model', 'path', pathlib.Path('model.npz'), 'a pathlib.Path: loaded '
         '(load_npz took it), None returned', lambda d: serializers.load_model(
             _model_file(d), L.Linear(2, 3)).W.shape,
         Better(lambda r, d: r == (3, 2), 'returns the model in both cases')),
    Case(_NPZ + 'load_model', 'path', None, 'None: TypeError from os.stat',
         lambda d: serializers.load_model(None, L.Linear(2, 3)), Raises()),
    Case(_NPZ + 'load_snapshot', 'path', '', "'': the trainer returned unchanged",
         lambda d: (lambda t: serializers.load_snapshot('', t) is t)(_trainer(d)),
         Same(lambda r, d: r is True, warns=True)),
    Case(_NPZ + 'load_snapshot', 'path', 'missing', 'the trainer returned unchanged',
         lambda d: (lambda t: serializers.load_snapshot(str(d / 'missing'), t) is t)(_trainer(d)),
         Same(lambda r, d: r is True, warns=True)),
    Case(_NPZ + 'save_model', 'path', pathlib.Path('model.npz'), 'a pathlib.Path: saved',
         lambda d: serializers.save_model(d / 'new.npz', L.Linear(2, 3)),
         Same(lambda r, d: (d / 'new.npz').is_file())),
    Case(_NPZ + 'save_model', 'path', 'existing', 'ValueError: never overwrites',
         lambda d: serializers.save_model(_model_file(d), L.Linear(2, 3)),
         Refused('still refuses an existing path')),
    Case(_NPZ + 'save_model', 'path', '', "'': FileNotFoundError from NumPy",
         lambda d: serializers.save_model('', L.Linear(2, 3)), Raises()),
    # researchutils.chainer.iterators
    Case(_LIST, 'items', (1, 2, 3), 'a tuple', lambda d: list(iterators.UnmodifiableDecorableList(
        (1, 2, 3))), Same(lambda r, d: r == [1, 2, 3])),
    Case(_LIST, 'end_index', None, 'None: the whole list',
         lambda d: len(iterators.UnmodifiableDecorableList([1, 2, 3], end_index=None)),
         Same(lambda r, d: r == 3)),
    Case(_LIST, 'decor_fun', None, 'None: items as they are',
         lambda d: iterators.UnmodifiableDecorableList([1, 2], decor_fun=None)[1],
         Same(lambda r, d: r == 2)),
    Case(_LIST, 'end_index', 0, '0: the whole list, silently (falsy)',
         lambda d: iterators.UnmodifiableDecorableList([1, 2, 3], end_index=0),
         Refused('silently took ``0`` (and anything falsy) as the whole dataset')),
    Case(_LIST, 'end_index', 5, 'beyond the data: IndexError half-way through an epoch',
         lambda d: iterators.UnmodifiableDecorableList([1, 2], end_index=5),
         Refused('accepted values beyond it')),
    Case(_SERIAL, 'dataset', 'ndarray', 'a NumPy array',
         lambda d: _first(iterators.DecorableSerialIterator(np.arange(3), 3, shuffle=False)),
         Same(lambda r, d: [int(x) for x in r] == [0, 1, 2])),
    Case(_SERIAL, 'shuffle', None, "None: Chainer's default (shuffled)",
         lambda d: sorted(_first(iterators.DecorableSerialIterator([1, 2, 3], 3, shuffle=None))),
         Same(lambda r, d: r == [1, 2, 3])),
    Case(_SERIAL, 'repeat', 0, '0: no repeat', lambda d: _first(
        iterators.DecorableSerialIterator([1], 1, repeat=0)), Same(lambda r, d: r == [1])),
    Case(_SERIAL, 'batch_size', 0, '0: empty batches, and an epoch that never ends',
         lambda d: iterators.DecorableSerialIterator([1], 0), Refused('``batch_size=True``')),
    Case('researchutils.chainer.iterators.decorable_multithread_iterator.'
         'DecorableMultithreadIterator', 'n_threads', 1, 'one thread',
         lambda d: _first(iterators.DecorableMultithreadIterator([1, 2], 2, shuffle=False,
                                                                 n_threads=1)),
         Same(lambda r, d: r == [1, 2])),
    Case('researchutils.chainer.iterators.decorable_multiprocess_iterator.'
         'DecorableMultiprocessIterator', 'shared_mem', None, "None: Chainer's default",
         lambda d: _first(iterators.DecorableMultiprocessIterator(
             [1, 2], 2, shuffle=None, n_processes=1, shared_mem=None)),
         Same(lambda r, d: sorted(r) == [1, 2])),
    # researchutils.chainer.links
    Case('researchutils.chainer.links.connection.grad_clip_lstm.GradClipLSTM', 'in_size', None,
         'None: a lazy input size', lambda d: links.GradClipLSTM(None, 3)(_X).shape,
         Same(lambda r, d: r == (1, 3))),
    Case('researchutils.chainer.links.connection.grad_clip_lstm.GradClipLSTM', 'clip_min', -1,
         'ints for the bounds', lambda d: links.GradClipLSTM(8, 3, clip_min=-1, clip_max=1)(
             _X).shape, Same(lambda r, d: r == (1, 3))),
    Case('researchutils.chainer.links.connection.action_conditioned_lstm.'
         'ActionConditionedLSTM', 'out_size', None, 'None: in_size is the output size',
         lambda d: links.ActionConditionedLSTM(3).state_size, Same(lambda r, d: r == 3)),
    Case('researchutils.chainer.links.connection.conv_lstm.ConvLSTM', 'ksize', [3, 3],
         'a list (anything with __getitem__)', lambda d: links.ConvLSTM(1, 2, [3, 3]).ksize,
         Same(lambda r, d: tuple(r) == (3, 3))),
    Case('researchutils.chainer.links.connection.conv_lstm.ConvLSTM', 'ksize', 2,
         'even: ValueError', lambda d: links.ConvLSTM(1, 2, 2), Raises()),
    Case('researchutils.chainer.links.connection.deconvolution_ps.DeconvolutionPS', 'outsize',
         (5, 5), 'the size before the shuffle: a (10, 10) output',
         lambda d: links.DeconvolutionPS(1, 2, 4, stride=2, outsize=(5, 5))(
             np.zeros((1, 1, 4, 4), np.float32)),
         Refused('taken as the size before the shuffle, giving ``stride`` times it')),
    Case('researchutils.chainer.links.connection.deconvolution_ps.DeconvolutionPS', 'outsize',
         None, 'None: the size of a deconvolution', lambda d: links.DeconvolutionPS(
             1, 2, 4, stride=2, outsize=None)(np.zeros((1, 1, 4, 4), np.float32)).shape,
         Same(lambda r, d: r == (1, 2, 10, 10))),
    Case('researchutils.chainer.links.connection.deconvolution_ps.DeconvolutionPS', 'ksize',
         [4, 4], 'a list', lambda d: links.DeconvolutionPS(1, 2, [4, 4], stride=2)(
             np.zeros((1, 1, 4, 4), np.float32)).shape[:2], Same(lambda r, d: r == (1, 2))),
    # researchutils.chainer.functions
    Case('researchutils.chainer.functions.activation.grad_clip_lstm.grad_clip_lstm',
         'clip_min', None, 'None: no lower bound', lambda d: functions.grad_clip_lstm(
             _C, _X, None, None)[0].shape, Same(lambda r, d: r == (1, 2))),
    Case('researchutils.chainer.functions.activation.grad_clip_lstm.grad_clip_lstm',
         'clip_max', 1, 'ints for the bounds', lambda d: functions.grad_clip_lstm(
             _C, _X, -1, 1)[0].shape, Same(lambda r, d: r == (1, 2))),
    Case('researchutils.chainer.functions.activation.grad_clip_lstm.GradClipLSTM', 'clip_min',
         None, 'None: the lowest float32', lambda d: grad_clip_module.GradClipLSTM(None, None),
         Same(lambda r, d: True)),
    Case('researchutils.chainer.functions.loss.average_k_step_squared_error.'
         'average_k_step_squared_error', 'k_step', 2, 'an int',
         lambda d: float(functions.average_k_step_squared_error(
             np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32), 2).array),
         Same(lambda r, d: r == 1.5)),
    Case('researchutils.chainer.functions.loss.average_k_step_squared_error.'
         'average_k_step_squared_error', 'k_step', 0, '0: a division by zero (inf)',
         lambda d: functions.average_k_step_squared_error(
             np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32), 0),
         Refused('``k_step`` is a positive integer')),
    # researchutils.chainer.initializers
    Case('researchutils.chainer.initializers.normal_with_loc.NormalWithLoc', 'loc', 5,
         'ints for loc and scale', lambda d: (lambda a: (initializers.NormalWithLoc(5, 0)(a),
                                                         a)[1])(np.zeros(3, np.float32)),
         Same(_same_array([5.0, 5.0, 5.0]))),
    Case('researchutils.chainer.initializers.normal_with_loc.NormalWithLoc', 'dtype', None,
         "None: the array's dtype", lambda d: (lambda a: (initializers.NormalWithLoc(
             dtype=None)(a), a.dtype)[1])(np.zeros(3, np.float64)),
         Same(lambda r, d: r == np.float64)),
]

# The original's public names, from its package __init__ files and modules: each has a row.
ORIGINAL_NAMES = [
    'researchutils.arrays.one_hot', 'researchutils.arrays.unzip',
    _FILES + 'search_all_files_under', _FILES + 'file_exists',
    _FILES + 'create_dir_if_not_exist', _FILES + 'write_text_to_file',
    _FILES + 'read_text_from_file', _FILES + 'save_pickle', _FILES + 'load_pickle',
    _FILES + 'prepare_output_dir',
    'researchutils.image.converter.hwc2chw', 'researchutils.image.converter.chw2hwc',
    'researchutils.image.preprocess.compute_mean_image',
    'researchutils.image.viewer.show_image', 'researchutils.image.viewer.show_images',
    'researchutils.image.viewer.animate', 'researchutils.image.viewer.animate_in_matrix_form',
    'researchutils.task.plotter.draw_task',
    'researchutils.math.angle.fit_angle_in_rad_range',
    'researchutils.math.angle.fit_angle_in_deg_range',
    'researchutils.math.normalization.normalize_by_min_max',
    'researchutils.math.normalization.standardize',
    _NPZ + 'save_model', _NPZ + 'load_model', _NPZ + 'load_snapshot',
    _LIST, _SERIAL,
    'researchutils.chainer.iterators.decorable_multithread_iterator.'
    'DecorableMultithreadIterator',
    'researchutils.chainer.iterators.decorable_multiprocess_iterator.'
    'DecorableMultiprocessIterator',
    'researchutils.chainer.links.connection.grad_clip_lstm.GradClipLSTM',
    'researchutils.chainer.links.connection.action_conditioned_lstm.ActionConditionedLSTM',
    'researchutils.chainer.links.connection.conv_lstm.ConvLSTM',
    'researchutils.chainer.links.connection.deconvolution_ps.DeconvolutionPS',
    'researchutils.chainer.functions.activation.grad_clip_lstm.grad_clip_lstm',
    'researchutils.chainer.functions.activation.grad_clip_lstm.GradClipLSTM',
    'researchutils.chainer.functions.loss.average_k_step_squared_error.'
    'average_k_step_squared_error',
    'researchutils.chainer.initializers.normal_with_loc.NormalWithLoc',
]


def _same_value(a, b):
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def original_accepts(name, argument, value):
    """Whether a ``Same`` row says the original accepted ``value`` for ``argument`` and did
    right: such a value is no bad value there (tests/test_every_argument_checked.py)."""
    return any(case.name == name and case.argument == argument
               and isinstance(case.outcome, Same) and _same_value(case.value, value)
               for case in CASES)


@pytest.mark.parametrize('case', CASES, ids=[case.id for case in CASES])
def test_the_original_contract_holds(case, tmp_path, monkeypatch):
    if case.needs:
        pytest.importorskip(case.needs)
        monkeypatch.setenv('MPLBACKEND', 'Agg')
    monkeypatch.chdir(tmp_path)
    outcome = case.outcome
    if isinstance(outcome, (Refused, Raises)):
        kinds = (TypeError, ValueError) + ((OSError,) if isinstance(outcome, Raises) else ())
        with pytest.raises(kinds) as error:
            case.call(tmp_path)
        if not isinstance(error.value, OSError):
            assert case.argument in str(error.value)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = case.call(tmp_path)
    assert outcome.check(result, tmp_path), result
    if not getattr(outcome, 'warns', False):
        assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []


def _porting_text():
    with open(os.path.join(ROOT, 'docs', 'porting.rst'), encoding='utf-8') as f:
        return f.read()


@pytest.mark.parametrize('case', [case for case in CASES
                                  if isinstance(case.outcome, (Better, Refused))],
                         ids=lambda case: case.id)
def test_the_porting_page_names_each_difference(case):
    words = re.sub(r'\s+', ' ', case.outcome.porting)
    assert words in re.sub(r'\s+', ' ', _porting_text())


def test_every_public_name_of_the_original_has_a_row():
    assert sorted(set(ORIGINAL_NAMES) - {case.name for case in CASES}) == []


def test_every_row_names_a_public_name_of_the_original():
    assert sorted({case.name for case in CASES} - set(ORIGINAL_NAMES)) == []


def test_the_rows_name_real_arguments():
    import importlib
    import inspect
    wrong = []
    for case in CASES:
        module, _, qualname = case.name.rpartition('.')
        try:
            target = getattr(importlib.import_module(module), qualname)
        except ImportError:
            continue  # matplotlib's pieces, without matplotlib
        if case.argument not in inspect.signature(target).parameters:
            wrong.append(case.id)
    assert wrong == []
