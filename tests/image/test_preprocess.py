"""researchutils.image.preprocess: the mean image, checked against np.mean."""
import numpy as np
import pytest

pytest.importorskip('matplotlib')  # researchutils.image needs the plot extra

from researchutils.image import preprocess  # noqa: E402


def test_mean_image_of_a_list_matches_numpy():
    frames = [np.random.RandomState(i).randint(0, 256, (28, 20, 3)).astype(np.uint8)
              for i in range(10)]
    result = preprocess.compute_mean_image(frames)
    assert result.dtype == np.float32
    assert result.shape == (28, 20, 3)
    np.testing.assert_allclose(result, np.mean(np.stack(frames), axis=0), rtol=1e-6)


def test_mean_image_of_an_array_and_of_a_generator():
    frames = np.random.RandomState(3).rand(7, 4, 5)
    expected = frames.mean(axis=0)
    np.testing.assert_allclose(preprocess.compute_mean_image(frames), expected, rtol=1e-6)
    np.testing.assert_allclose(preprocess.compute_mean_image(f for f in frames), expected,
                               rtol=1e-6)


def test_mean_image_does_not_lose_small_frames_next_to_a_large_one():
    # Summing in float32, 2**24 + 1 rounds back to 2**24: the original lost every 1 here.
    frames = [np.full((2, 2), 2.0 ** 24, np.float32)] + [np.ones((2, 2), np.float32)] * 1000
    expected = (2.0 ** 24 + 1000) / 1001
    np.testing.assert_allclose(preprocess.compute_mean_image(frames), expected, rtol=1e-7)


def test_frames_of_different_shapes_are_refused_naming_the_frame():
    frames = [np.ones((28, 28, 3))] * 3 + [np.ones((100, 100, 3))]
    with pytest.raises(ValueError, match=r'frames\[3\] has shape \(100, 100, 3\)'):
        preprocess.compute_mean_image(frames)


def test_no_frames_is_refused():
    with pytest.raises(ValueError, match='frames is empty'):
        preprocess.compute_mean_image([])


@pytest.mark.parametrize('frames, name', [
    (5, 'frames'), (None, 'frames'), ('abc', 'frames'),
    ([np.zeros(2), np.array(['a', 'b'])], r'frames\[1\]'),
    ([None], r'frames\[0\]'),
])
def test_frames_that_are_not_numbers_are_refused_naming_them(frames, name):
    with pytest.raises(TypeError, match='^' + name + ' must be'):
        preprocess.compute_mean_image(frames)
