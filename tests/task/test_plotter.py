"""researchutils.task.plotter: task timelines drawn with real matplotlib (Agg), saved to PNG."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip('matplotlib')
matplotlib.use('Agg')
Image = pytest.importorskip('PIL.Image')

import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from researchutils.task import plotter  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plt.close('all')
    yield
    plt.close('all')


def _pixels_of(path, color):
    with Image.open(path) as png:
        rgb = np.asarray(png.convert('RGB'))
    return np.all(rgb == color, axis=-1)


def test_draw_task_draws_one_bar_from_start_to_end_at_the_id():
    plotter.draw_task(1, 2.0, 5.0, 'red', 'load', 'jobs', line_width=30, block=False)
    axes = plt.gca()
    (bars,) = axes.collections
    np.testing.assert_array_equal(bars.get_segments()[0], [[2.0, 1.0], [5.0, 1.0]])
    assert bars.get_linewidths()[0] == 30
    np.testing.assert_array_equal(bars.get_colors()[0], matplotlib.colors.to_rgba('red'))
    (label,) = axes.texts
    assert label.get_text() == 'load'
    assert label.get_position() == (3.5, 1)
    assert label.get_horizontalalignment() == 'center'
    assert axes.get_title() == 'jobs'


def test_tasks_drawn_without_blocking_share_one_chart_saved_at_the_end(tmp_path):
    plotter.draw_task(0, 0, 4, 'red', 'a', 'timeline', block=False)
    plotter.draw_task(1, 3, 9, 'blue', 'b', 'timeline', block=False)
    assert os.listdir(tmp_path) == []     # nothing saved until the chart is finished
    with pytest.warns(UserWarning, match='no display.*tasks.png') as record:
        path = plotter.draw_task(2, 5, 6, 'lime', 'c', 'timeline')
    assert record[0].filename == __file__
    assert path == 'tasks.png'
    with Image.open(path) as png:
        assert png.size == (640, 480)
    red, blue, lime = (_pixels_of(path, color) for color in
                       [(255, 0, 0), (0, 0, 255), (0, 255, 0)])
    assert red.sum() > 500 and blue.sum() > 500 and lime.sum() > 100
    # Higher ids are higher up; a later start is further right.
    rows = [np.nonzero(mask)[0].mean() for mask in (red, blue, lime)]
    columns = [np.nonzero(mask)[1].min() for mask in (red, blue, lime)]
    assert rows[0] > rows[1] > rows[2]
    assert columns[0] < columns[1] < columns[2]
    assert plt.get_fignums() == []


def test_save_path_saves_there_without_warning(tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        path = plotter.draw_task(0, 0, 1, 'black', 'only', 'one', save_path=str(tmp_path / 't.png'))
    assert path == str(tmp_path / 't.png')
    assert _pixels_of(path, (0, 0, 0)).sum() > 100


@pytest.mark.parametrize('times', [(5, 2), ('1', 2)])
def test_bad_times_are_refused(times):
    with pytest.raises((ValueError, TypeError), match='start_time|end_time'):
        plotter.draw_task(0, times[0], times[1], 'red', 'x', 't')


def test_bad_color_is_refused():
    with pytest.raises(ValueError, match="color 'reddish'"):
        plotter.draw_task(0, 0, 1, 'reddish', 'x', 't')


def test_bad_line_width_is_refused():
    with pytest.raises(ValueError, match='line_width'):
        plotter.draw_task(0, 0, 1, 'red', 'x', 't', line_width=0)


def test_nothing_is_drawn_when_an_argument_is_refused():
    with pytest.raises(ValueError):
        plotter.draw_task(0, 0, 1, 'reddish', 'x', 't')
    assert plt.get_fignums() == []


BAD_MATHTEXT = ['$x^$', r'cost $\frac{1}$', r'$\nosuchcommand$']


@pytest.mark.parametrize('task_name', BAD_MATHTEXT)
def test_a_label_matplotlib_cannot_draw_is_refused_naming_it_and_leaves_no_figure(task_name):
    with pytest.raises(ValueError, match=re.escape('task_name {!r}'.format(task_name))):
        plotter.draw_task(0, 0, 1, 'red', task_name, 'jobs', block=False)
    assert plt.get_fignums() == []


def test_a_failed_label_leaves_the_chart_as_it_was_and_later_tasks_draw(tmp_path):
    plotter.draw_task(0, 0, 4, 'red', 'load', 'jobs', block=False)
    with pytest.raises(ValueError, match='task_name'):
        plotter.draw_task(1, 3, 9, 'blue', '$x^$', 'other title', block=False)
    axes = plt.gca()
    assert [text.get_text() for text in axes.texts] == ['load']
    assert len(axes.collections) == 1 and axes.get_title() == 'jobs'
    path = plotter.draw_task(2, 5, 6, 'lime', '$x^2$', 'jobs', save_path=str(tmp_path / 't.png'))
    red, blue, lime = (_pixels_of(path, color) for color in
                       [(255, 0, 0), (0, 0, 255), (0, 255, 0)])
    assert red.sum() > 500 and lime.sum() > 100 and blue.sum() == 0
    assert plt.get_fignums() == []


def test_a_title_matplotlib_cannot_draw_is_refused_naming_it(tmp_path):
    plotter.draw_task(0, 0, 4, 'red', 'load', 'jobs', block=False)
    with pytest.raises(ValueError, match='title'):
        plotter.draw_task(1, 3, 9, 'blue', 'train', r'$\frac{1}$')
    axes = plt.gca()
    assert [text.get_text() for text in axes.texts] == ['load']
    assert axes.get_title() == 'jobs'
    assert os.listdir(tmp_path) == []


def test_with_a_display_the_chart_is_shown_as_in_the_original(tmp_path):
    log = tmp_path / 'log'
    env = dict(os.environ, MPLBACKEND='module://tests.support.recording_backend',
               RECORDING_BACKEND_LOG=str(log), PYTHONPATH=ROOT)
    code = ('from researchutils.task import plotter\n'
            'plotter.draw_task(0, 0, 1, "red", "a", "t", block=False)\n'
            'print(plotter.draw_task(1, 1, 2, "red", "b", "t"))\n')
    out = subprocess.run([sys.executable, '-W', 'error::UserWarning', '-c', code],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'None'
    assert log.read_text().splitlines() == ['show block=False', 'show block=True']
    assert sorted(os.listdir(tmp_path)) == ['log']


@pytest.mark.parametrize('name, kwargs', [
    ('task_name', {'task_name': 5}), ('title', {'title': 5}),
    ('title', {'title': None}), ('task_name', {'task_name': b'a'}),
])
def test_a_label_that_is_not_a_str_is_refused_and_draws_nothing(name, kwargs, tmp_path):
    arguments = dict(id=0, start_time=0, end_time=1, color='red', task_name='a', title='t')
    arguments.update(kwargs)
    with pytest.raises(TypeError, match='^{} must be a str'.format(name)):
        plotter.draw_task(**arguments)
    assert plt.get_fignums() == [] and os.listdir(tmp_path) == []


@pytest.mark.parametrize('block', ['False', 2, None, [True]])
def test_block_that_is_not_a_bool_is_refused(block, tmp_path):
    with pytest.raises(TypeError, match='^block must be True or False'):
        plotter.draw_task(0, 0, 1, 'red', 'a', 't', block=block)
    assert plt.get_fignums() == [] and os.listdir(tmp_path) == []
