"""researchutils.chainer.onnx.export refuses what it cannot write or export, naming it:
a path that cannot be written (before the model runs), states that are no LSTM state, a model
that is no Link or returns no Variable, names of the wrong kind; nothing is written then."""
import errno
import os
import sys

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest

from researchutils.chainer.onnx import export

pytest.importorskip('onnx', reason='the onnx extra: pip install researchutils[onnx]')


@pytest.mark.parametrize('returned,match', [
    (lambda x: x.array, r'^the model must return a Variable, or a tuple, list or dict of '
                        r'them, to be exported; it returned ndarray$'),
    (lambda x: (x * 2, 3), r"^the model's output 'output_1' is a int, not a chainer.Variable: "
                           r"only what the model computes can be exported$"),
])
def test_what_the_model_returns_that_is_no_variable_is_named(tmp_path, returned, match):
    with pytest.raises(TypeError, match=match):
        export(chainer.Sequential(returned), np.zeros((1, 3), np.float32),
               tmp_path / 'model.onnx')


@pytest.mark.parametrize('where,error,number,words', [
    ('missing/model.onnx', FileNotFoundError, errno.ENOENT, "its folder {!r} does not exist"),
    ('a_file/model.onnx', FileNotFoundError, errno.ENOENT, "its folder {!r} does not exist"),
    ('a_folder', IsADirectoryError, errno.EISDIR, 'it is a folder'),
])
def test_a_path_that_cannot_be_written_is_named(tmp_path, where, error, number, words):
    (tmp_path / 'a_file').write_text('')
    (tmp_path / 'a_folder').mkdir()
    path = str(tmp_path / where)
    with pytest.raises(error) as raised:
        export(L.Linear(3, 2), np.zeros((1, 3), np.float32), path)
    assert (raised.value.errno, raised.value.filename) == (number, path)
    assert raised.value.strerror == 'cannot write the ONNX file: ' + words.format(
        os.path.dirname(path))


@pytest.mark.skipif(not os.path.isdir('/sys/kernel'), reason='needs Linux\'s sysfs')
def test_a_folder_that_refuses_new_files_is_named_before_the_model_runs():
    # sysfs refuses a new file even to root, whom its permission bits let write.
    calls = []
    model = chainer.Sequential(lambda x: calls.append(x) or x, L.Linear(3, 2))
    with pytest.raises(PermissionError, match=r"its folder '/sys' refuses a new file "
                                              r"\(Permission denied\): '/sys/x\.onnx'"):
        export(model, np.zeros((1, 3), np.float32), '/sys/x.onnx')
    assert calls == []
    assert not [name for name in os.listdir('/sys') if name.startswith('.x.onnx')]


class _CAndH(chainer.Link):
    """Has c and h but no set_state: no LSTM state to export."""

    c = h = chainer.Variable(np.zeros((1, 2), np.float32))

    def forward(self, x):
        return x


class _SetStateAndH(_CAndH):
    """Has set_state and h, but no c."""

    c = property(lambda self: (_ for _ in ()).throw(AttributeError('c')))

    def set_state(self, c, h):
        pass


@pytest.mark.parametrize('link', [_CAndH, _SetStateAndH])
def test_a_link_without_the_whole_lstm_state_is_refused_naming_it(tmp_path, link):
    with pytest.raises(ValueError, match=r"^states: '/' is a {}, which has no LSTM state \(c, h, "
                                         r"set_state\)$".format(link.__name__)):
        export(link(), np.zeros((1, 2), np.float32), tmp_path / 'm.onnx', states=['/'])


def test_a_link_with_half_a_state_is_refused(tmp_path):
    link = L.LSTM(3, 2)
    link(np.zeros((1, 3), np.float32))
    link.h = None
    with pytest.raises(ValueError, match="^states: '/' holds no state yet: run a step or call "
                                         "its set_state\\(c, h\\) before exporting, to give the "
                                         "state its shape$"):
        export(link, np.zeros((1, 3), np.float32), tmp_path / 'm.onnx', states=['/'])


@pytest.mark.parametrize('kwargs,error,match', [
    ({'states': ['/nothing']}, ValueError, r"^states: '/nothing' is not a link of the model; "
                                           r"its links are \['/', '/lateral', '/upward'\]$"),
    ({'states': ['/']}, ValueError, r"states: '/' holds no state yet"),
    ({'input_names': 5}, TypeError, r'^input_names must be a list of str, got 5$'),
    ({'output_names': 5}, TypeError, r'^output_names must be a list of str, got 5$'),
    ({'states': '/'}, TypeError, r"states must be a list or tuple of link paths, got '/' "
                                 r"\(write \['/'\]\)"),
    ({'states': None}, TypeError, '^states must be a list or tuple of link paths, got None$'),
    ({'converters': 5}, TypeError, r'^converters must be a mapping \(a dict\) or None, got 5$'),
    ({'converters': {'Linear': 5}}, TypeError, r"^converters must map FunctionNode class "
                                               r"names \(str\) to converter functions, got "
                                               r"'Linear': 5$"),
    ({'input_names': ['a', 'b']}, ValueError, r"^input_names has 2 names for 1 inputs: "
                                              r"\['a', 'b'\]$"),
    ({'output_names': ['a', 'b']}, ValueError, r"^output_names has 2 names, but the model "
                                               r"returns 1 outputs: \['a', 'b'\]$"),
])
def test_bad_arguments_are_named(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        export(L.LSTM(3, 2), np.zeros((1, 3), np.float32), tmp_path / 'm.onnx', **kwargs)
    assert os.listdir(tmp_path) == []


def test_a_model_that_is_no_link_is_refused_naming_it(tmp_path):
    with pytest.raises(TypeError, match=r'^model must be a chainer.Link, got <function'):
        export(F.relu, np.zeros((1, 3), np.float32), tmp_path / 'm.onnx')


@pytest.mark.parametrize('path', [3, None, b'model.onnx'])
def test_a_path_that_is_not_a_path_is_refused(path):
    with pytest.raises(TypeError, match=r'path must be a path \(a str or an os.PathLike\), got'):
        export(L.Linear(3, 2), np.zeros((1, 3), np.float32), path)


def test_without_onnx_in_this_process_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'onnx', None)
    with pytest.raises(ImportError, match=r'^researchutils.chainer.onnx.export needs onnx: pip '
                                          r'install researchutils\[onnx\]$') as raised:
        export(L.Linear(3, 2), np.zeros((1, 3), np.float32), tmp_path / 'm.onnx')
    assert isinstance(raised.value.__cause__, ImportError)
    assert os.listdir(tmp_path) == []


def test_an_onnx_chainer_that_could_not_import_is_named_with_the_way_out(tmp_path, monkeypatch):
    import importlib

    import onnx
    # onnx_chainer binds its export function over the module's name: read the module.
    monkeypatch.setattr(importlib.import_module('onnx_chainer.export'), '_available', False)
    with pytest.raises(ImportError, match=r"^onnx_chainer cannot import on onnx {} \(is "
                                          r"RESEARCHUTILS_CHAINER_COMPAT=0 set\?\); see "
                                          r"researchutils' installation page$".format(
                                              onnx.__version__.replace('.', r'\.'))):
        export(L.Linear(3, 2), np.zeros((1, 3), np.float32), tmp_path / 'm.onnx')


def test_a_write_that_fails_is_named_in_a_note(tmp_path, monkeypatch):
    # The real failing write (a file size limit) runs in a process of its own
    # (test_export.py); this one, in this process, is what mutation testing sees.
    from researchutils.chainer.onnx import exporter

    def full_disk(path, write):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(exporter, 'write_atomically', full_disk)
    path = str(tmp_path / 'm.onnx')
    with pytest.raises(OSError) as raised:
        export(L.Linear(3, 2), np.zeros((1, 3), np.float32), path)
    assert raised.value.__notes__ == ['while writing the ONNX file {!r}'.format(path)]


def test_a_function_onnx_chainer_fakes_as_a_node_is_named_by_its_given_name(tmp_path):
    from onnx_chainer.replace_func import as_funcnode

    with pytest.warns(FutureWarning, match='as_funcnode is experimental'):
        doubled = as_funcnode('Doubled')(lambda x: x * 2)
    with pytest.raises(ValueError, match=r'no converter for Doubled \(called in / '
                                         r'\(Sequential\)\)'):
        export(chainer.Sequential(doubled), np.zeros((1, 3), np.float32),
               tmp_path / 'm.onnx')
