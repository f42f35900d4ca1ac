"""researchutils.image.viewer with real matplotlib: Agg for the headless cases, where the
figures are saved and the files opened with Pillow, and a recording backend standing for
a display (tests/support/recording_backend.py)."""
import importlib.metadata
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

matplotlib = pytest.importorskip('matplotlib')
matplotlib.use('Agg')
Image = pytest.importorskip('PIL.Image')

import matplotlib.animation  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from researchutils.image import viewer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield
    plt.close('all')


def _figure_pixels():
    width, height = matplotlib.rcParams['figure.figsize']
    dpi = matplotlib.rcParams['figure.dpi']
    return int(round(width * dpi)), int(round(height * dpi))


def _solid(color, shape=(12, 16)):
    return np.broadcast_to(np.array(color, np.uint8), shape + (3,)).copy()


def _count(image, color):
    rgb = np.asarray(image.convert('RGB'))
    return int(np.all(rgb == color, axis=-1).sum())


def _centroid(image, color):
    rgb = np.asarray(image.convert('RGB'))
    rows, columns = np.nonzero(np.all(rgb == color, axis=-1))
    return rows.mean() / rgb.shape[0], columns.mean() / rgb.shape[1]


def _video(frames=5, shape=(10, 12)):
    """A gray video whose frames are uniformly 0, 1, ..., frames - 1."""
    return [np.full(shape, float(i)) for i in range(frames)]


def _gif_frames(path):
    with Image.open(path) as gif:
        assert gif.format == 'GIF'
        frames = []
        for index in range(gif.n_frames):
            gif.seek(index)
            frames.append(gif.convert('RGB'))
        return gif.size, frames


# The plot extra -------------------------------------------------------------------------------

def test_plot_extra_brings_pillow_through_matplotlib():
    requirements = importlib.metadata.requires('matplotlib')
    assert any(req.lower().startswith('pillow') for req in requirements)


# show_image / show_images without a display -------------------------------------------------

def test_show_image_without_display_saves_a_png_in_the_current_folder_and_says_so(tmp_path):
    with pytest.warns(UserWarning, match='no display.*figure.png') as record:
        path = viewer.show_image(_solid(RED), title='red')
    assert record[0].filename == __file__    # the warning points at the caller
    assert path == 'figure.png'
    with Image.open(tmp_path / 'figure.png') as png:
        assert png.format == 'PNG'
        assert png.size == _figure_pixels()
        assert _count(png, RED) > 1000
    assert plt.get_fignums() == []


def test_a_second_figure_never_replaces_the_first(tmp_path):
    with pytest.warns(UserWarning):
        first = viewer.show_image(_solid(RED))
        second = viewer.show_image(_solid(BLUE))
    assert (first, second) == ('figure.png', 'figure-1.png')
    with Image.open(first) as a, Image.open(second) as b:
        assert _count(a, RED) > 1000 and _count(b, BLUE) > 1000


def test_show_image_with_save_path_saves_there_without_warning(tmp_path):
    target = tmp_path / 'out' / 'red.png'
    target.parent.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        path = viewer.show_image(_solid(RED), save_path=str(target))
    assert path == str(target)
    with Image.open(target) as png:
        assert _count(png, RED) > 1000


def test_gray_image_is_drawn_in_gray():
    gray = np.tile(np.linspace(0, 1, 16), (12, 1))
    with pytest.warns(UserWarning):
        path = viewer.show_image(gray, is_gray=True)
    with Image.open(path) as png:
        rgb = np.asarray(png.convert('RGB')).astype(int)
    inside = rgb[rgb.sum(axis=-1) < 3 * 250]   # leave out the white margin
    assert np.all(inside[:, 0] == inside[:, 1]) and np.all(inside[:, 1] == inside[:, 2])


def test_show_images_puts_comparisons_in_a_second_row():
    with pytest.warns(UserWarning):
        path = viewer.show_images([_solid(RED), _solid(RED)], title='input',
                                  comparisons=[_solid(BLUE), _solid(BLUE)],
                                  comparison_title='output')
    with Image.open(path) as png:
        red_row, _ = _centroid(png, RED)
        blue_row, _ = _centroid(png, BLUE)
    assert red_row < 0.5 < blue_row


def test_show_images_vertical_puts_comparisons_in_a_second_column():
    with pytest.warns(UserWarning):
        path = viewer.show_images([_solid(RED)] * 3, comparisons=[_solid(BLUE)] * 3,
                                  vertical=True)
    with Image.open(path) as png:
        _, red_column = _centroid(png, RED)
        _, blue_column = _centroid(png, BLUE)
    assert red_column < 0.5 < blue_column


def test_show_images_titles_number_the_images(tmp_path, monkeypatch):
    monkeypatch.setitem(matplotlib.rcParams, 'svg.fonttype', 'none')   # text stays text
    path = viewer.show_images([_solid(RED)] * 2, title='input', comparisons=[_solid(BLUE)],
                              comparison_title='output', save_path=str(tmp_path / 'f.svg'))
    with open(path) as stream:
        svg = stream.read()
    positions = [svg.find('>' + title + '<') for title in ('input 0', 'input 1', 'output')]
    assert all(position > 0 for position in positions)


def test_one_image_keeps_its_title_unnumbered(tmp_path, monkeypatch):
    monkeypatch.setitem(matplotlib.rcParams, 'svg.fonttype', 'none')
    path = viewer.show_image(_solid(RED), title='alone', save_path=str(tmp_path / 'f.svg'))
    with open(path) as stream:
        assert '>alone<' in stream.read()


def test_show_images_of_nothing_is_refused():
    with pytest.raises(ValueError, match='images is empty'):
        viewer.show_images([])


def test_show_image_of_a_vector_is_refused_naming_it():
    with pytest.raises(ValueError, match=r'images\[0\] .* shape \(5,\)'):
        viewer.show_image(np.zeros(5))


@pytest.mark.parametrize('shape', [(0, 0), (0, 5), (5, 0), (0, 0, 3), (4, 0, 4)])
def test_show_image_of_an_empty_image_is_refused_and_saves_nothing(shape, tmp_path):
    with pytest.raises(ValueError, match=r'images\[0\] .* shape {}'.format(
            re.escape(str(shape)))):
        viewer.show_image(np.zeros(shape), save_path=str(tmp_path / 'empty.png'))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('shape', [(3, 0, 0), (3, 0, 4, 3)])
def test_animate_of_empty_frames_is_refused_naming_the_video(shape, tmp_path):
    video = np.zeros((3, 4, 4) + shape[3:])
    with pytest.raises(ValueError, match=r'images\[1\] must be a video.* shape {}'.format(
            re.escape(str(shape)))):
        viewer.animate(video, comparisons=np.zeros(shape), save_gif=str(tmp_path / 'empty.gif'))
    assert os.listdir(tmp_path) == []


def test_save_path_into_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match='missing'):
        viewer.show_image(_solid(RED), save_path=str(tmp_path / 'missing' / 'a.png'))


# animations without a display ---------------------------------------------------------------

def test_animate_without_display_saves_a_gif_with_every_frame(tmp_path):
    with pytest.warns(UserWarning, match='no display.*anim.gif'):
        paths = viewer.animate(_video(6), is_gray=True)
    assert paths == ['anim.gif']
    size, frames = _gif_frames(tmp_path / 'anim.gif')
    assert size == _figure_pixels()
    assert len(frames) == 6
    assert plt.get_fignums() == []


def test_gif_frames_follow_the_video_on_one_gray_scale():
    # The first frame is uniformly 0: scaling the colors to it alone (as the original did)
    # would draw every later frame alike.
    with pytest.warns(UserWarning):
        path = viewer.animate(_video(5), is_gray=True)[0]
    _, frames = _gif_frames(path)
    centers = [np.asarray(frame)[frame.size[1] // 2, frame.size[0] // 2, 0] for frame in frames]
    assert centers[0] == 0 and centers[-1] == 255
    assert all(a < b for a, b in zip(centers, centers[1:]))


def test_save_gif_true_uses_the_original_name_and_saves_once(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        paths = viewer.animate(_video(3), save_gif=True)
    assert paths == ['anim.gif']
    assert os.listdir(tmp_path) == ['anim.gif']


def test_save_gif_to_a_path(tmp_path):
    target = str(tmp_path / 'clip.gif')
    assert viewer.animate(_video(4), save_gif=target, fps=10) == [target]
    size, frames = _gif_frames(target)
    assert len(frames) == 4
    with Image.open(target) as gif:
        assert gif.info['duration'] == 100


def test_animate_with_one_comparison_video_side_by_side():
    videos = [[_solid(RED)] * 2, [_solid(BLUE)] * 2]
    path = viewer.animate(videos[0], comparisons=videos[1], save_gif=True,
                          titles=['truth', 'prediction'])[0]
    _, frames = _gif_frames(path)
    _, red_column = _centroid(frames[0], RED)
    _, blue_column = _centroid(frames[0], BLUE)
    assert red_column < 0.5 < blue_column


def test_animate_with_several_comparison_videos():
    comparisons = [[_solid(GREEN)] * 2, [_solid(BLUE)] * 2]
    path = viewer.animate([_solid(RED)] * 2, comparisons=np.array(comparisons),
                          save_gif=True)[0]
    _, frames = _gif_frames(path)
    columns = [_centroid(frames[0], color)[1] for color in (RED, GREEN, BLUE)]
    assert columns == sorted(columns)


def test_animate_comparisons_of_unsupported_dimension_are_refused():
    video = [_solid(RED)] * 2
    with pytest.raises(ValueError, match='comparisons'):
        viewer.animate(video, comparisons=[[video, video], [video, video]])


def test_animate_in_matrix_form_lays_videos_out_in_rows(tmp_path):
    videos = [[_solid(color)] * 3 for color in (RED, GREEN, BLUE, WHITE)]
    path = viewer.animate_in_matrix_form(videos, images_per_row=2, remove_axis=True,
                                         save_gif=str(tmp_path / 'grid.gif'))[0]
    _, frames = _gif_frames(path)   # identical frames: Pillow stores them as one
    red, green, blue = (_centroid(frames[0], color) for color in (RED, GREEN, BLUE))
    assert red[0] < 0.5 and green[0] < 0.5 and blue[0] > 0.5      # rows
    assert red[1] < 0.5 < green[1] and blue[1] < 0.5               # columns


@pytest.mark.parametrize('images_per_row, expected_rows', [(1, 3), (3, 1), (None, 1)])
def test_animate_in_matrix_form_rows(images_per_row, expected_rows, tmp_path):
    videos = [[_solid(RED)] * 2, [_solid(GREEN)] * 2, [_solid(BLUE)] * 2]
    path = viewer.animate_in_matrix_form(videos, images_per_row=images_per_row,
                                         save_gif=str(tmp_path / 'grid.gif'))[0]
    _, frames = _gif_frames(path)
    rows = [_centroid(frames[0], color)[0] for color in (RED, GREEN, BLUE)]
    assert len({round(row, 1) for row in rows}) == expected_rows


def test_per_frame_titles_change_the_frames():
    video = [_solid(RED)] * 3
    path = viewer.animate(video, titles=[['a', 'b', 'c']], save_gif=True)[0]
    _, frames = _gif_frames(path)
    assert len(frames) == 3   # identical frames would merge into one in the GIF


def test_videos_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match=r'images\[1\] has 2 frames, images\[0\] 3'):
        viewer.animate_in_matrix_form([_video(3), _video(2)])


def test_per_frame_titles_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match=r'titles\[0\] has 2 titles for 3 frames'):
        viewer.animate(_video(3), titles=[['a', 'b']])


@pytest.mark.parametrize('fps', [0, -5, 'fast'])
def test_bad_fps_is_refused(fps):
    with pytest.raises((ValueError, TypeError), match='fps'):
        viewer.animate(_video(2), fps=fps)


def test_bad_images_per_row_is_refused():
    with pytest.raises(ValueError, match='images_per_row'):
        viewer.animate_in_matrix_form([_video(2)], images_per_row=0)


def test_save_gif_with_another_extension_is_refused():
    with pytest.raises(ValueError, match='save_gif.*gif'):
        viewer.animate(_video(2), save_gif='clip.png')


def test_animate_in_matrix_form_without_images_is_refused():
    with pytest.raises(ValueError, match='images'):
        viewer.animate_in_matrix_form()


# MP4 -----------------------------------------------------------------------------------------

def test_mp4_without_ffmpeg_says_so_and_saves_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(matplotlib.rcParams, 'animation.ffmpeg_path',
                        str(tmp_path / 'no-such-ffmpeg'))
    with pytest.raises(RuntimeError, match='ffmpeg'):
        viewer.animate(_video(2), save_gif=True, save_mp4=True)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not matplotlib.animation.writers.is_available('ffmpeg'),
                    reason='needs ffmpeg')
def test_mp4_is_saved_with_ffmpeg(tmp_path):
    paths = viewer.animate(_video(4), save_mp4=True)
    assert paths == ['anim.mp4']
    with open(tmp_path / 'anim.mp4', 'rb') as f:
        assert f.read(12)[4:8] == b'ftyp'


# with a display ------------------------------------------------------------------------------

def _with_display(code, tmp_path):
    log = tmp_path / 'shows.log'
    env = dict(os.environ, MPLBACKEND='module://tests.support.recording_backend',
               RECORDING_BACKEND_LOG=str(log), PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, '-W', 'error::UserWarning', '-c', code],
                            cwd=str(tmp_path), env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, log.read_text().splitlines() if log.exists() else []


def test_with_a_display_show_image_shows_and_saves_nothing(tmp_path):
    out, shows = _with_display(
        'import numpy as np, matplotlib.pyplot as plt\n'
        'from researchutils.image import viewer\n'
        'print(viewer.show_image(np.zeros((4, 4))), plt.get_fignums())\n', tmp_path)
    assert out.split() == ['None', '[]']
    assert shows == ['show block=None']
    assert sorted(os.listdir(tmp_path)) == ['shows.log']


def test_with_a_display_auto_close_plays_the_animation_once_then_closes(tmp_path):
    out, shows = _with_display(
        'import time, numpy as np, matplotlib.pyplot as plt\n'
        'from researchutils.image import viewer\n'
        'start = time.perf_counter()\n'
        'paths = viewer.animate([np.full((4, 4), i) for i in range(6)], fps=20,\n'
        '                       auto_close=True)\n'
        'print(paths, plt.get_fignums(), time.perf_counter() - start)\n', tmp_path)
    paths, fignums, seconds = out.split()
    assert (paths, fignums) == ('[]', '[]')
    assert float(seconds) >= 6 / 20
    assert shows[0] == 'show block=False'
    assert 'show block=None' not in shows


def test_with_a_display_animation_blocks_without_auto_close(tmp_path):
    _, shows = _with_display(
        'import numpy as np\n'
        'from researchutils.image import viewer\n'
        'viewer.animate([np.full((4, 4), i) for i in range(3)])\n', tmp_path)
    assert shows == ['show block=None']


# import -------------------------------------------------------------------------------------

def test_importing_the_viewer_does_not_choose_a_backend():
    code = ('import sys\n'
            'import researchutils.image\n'
            'print("matplotlib.pyplot" in sys.modules)\n')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == 'False'


FLAG_CALLS = [
    ('is_gray', lambda value: viewer.show_image(_solid(RED), is_gray=value)),
    ('is_gray', lambda value: viewer.show_images([_solid(RED)], is_gray=value)),
    ('vertical', lambda value: viewer.show_images([_solid(RED)], vertical=value)),
    ('is_gray', lambda value: viewer.animate(np.zeros((2, 4, 4)), is_gray=value)),
    ('repeat', lambda value: viewer.animate(np.zeros((2, 4, 4)), repeat=value)),
    ('auto_close', lambda value: viewer.animate(np.zeros((2, 4, 4)), auto_close=value)),
    ('remove_axis', lambda value: viewer.animate_in_matrix_form([np.zeros((2, 4, 4))],
                                                                remove_axis=value)),
]


@pytest.mark.parametrize('name, call', FLAG_CALLS)
@pytest.mark.parametrize('value', ['False', 2, 0.5, None, [True]])
def test_a_flag_that_is_not_a_bool_is_refused_and_saves_nothing(name, call, value, tmp_path):
    with pytest.raises(TypeError, match='^{} must be True or False, got {}'.format(
            name, re.escape(repr(value)))):
        call(value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('call', [
    lambda: viewer.show_image(_solid(RED), title=5),
    lambda: viewer.show_images([_solid(RED)], title=5),
    lambda: viewer.show_images([_solid(RED)], comparisons=[_solid(RED)], comparison_title=5),
])
def test_a_title_that_is_not_a_str_is_refused(call, tmp_path):
    with pytest.raises(TypeError, match='title must be a str, got 5'):
        call()
    assert os.listdir(tmp_path) == []


def test_show_images_refuses_more_comparisons_than_images(tmp_path):
    with pytest.raises(ValueError, match='^comparisons must hold at most one image per image '
                                         r'\(2\), got 3'):
        viewer.show_images([_solid(RED)] * 2, comparisons=[_solid(BLUE)] * 3)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('images', [5, None])
def test_show_images_of_what_is_not_a_list_is_refused_naming_it(images):
    with pytest.raises(TypeError, match='^images must be a list of images'):
        viewer.show_images(images)


@pytest.mark.parametrize('titles', [5, [5], [['a', 5]]])
def test_animate_titles_that_are_not_str_are_refused(titles, tmp_path):
    with pytest.raises(TypeError, match=r'^titles(\[0\])? must be a str or a list of them'):
        viewer.animate(np.zeros((2, 4, 4)), titles=titles)
    assert os.listdir(tmp_path) == []


def test_a_save_path_with_a_nul_byte_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match='^save_path must not hold a NUL byte'):
        viewer.show_image(_solid(RED), save_path=str(tmp_path / 'a\0b.png'))
    assert os.listdir(tmp_path) == []
