"""researchutils.image.converter: axis order of images, checked against np.transpose."""
import numpy as np
import pytest

pytest.importorskip('matplotlib')  # researchutils.image needs the plot extra

from researchutils.image import converter  # noqa: E402


def test_hwc2chw_moves_the_color_axis_first():
    image = np.random.RandomState(0).rand(28, 20, 3).astype(np.float32)
    result = converter.hwc2chw(image)
    assert result.shape == (3, 28, 20)
    np.testing.assert_array_equal(result, np.transpose(image, (2, 0, 1)))


def test_chw2hwc_moves_the_color_axis_last():
    image = np.random.RandomState(1).rand(3, 28, 20)
    result = converter.chw2hwc(image)
    assert result.shape == (28, 20, 3)
    np.testing.assert_array_equal(result, np.transpose(image, (1, 2, 0)))


def test_round_trip_gives_the_image_back():
    image = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    np.testing.assert_array_equal(converter.chw2hwc(converter.hwc2chw(image)), image)


def test_batches_of_images_convert_image_by_image():
    batch = np.random.RandomState(2).rand(5, 8, 6, 3)
    result = converter.hwc2chw(batch)
    assert result.shape == (5, 3, 8, 6)
    np.testing.assert_array_equal(result, np.transpose(batch, (0, 3, 1, 2)))
    np.testing.assert_array_equal(converter.chw2hwc(result), batch)


@pytest.mark.parametrize('function', ['hwc2chw', 'chw2hwc'])
def test_image_without_three_axes_is_refused(function):
    with pytest.raises(ValueError, match=r'image must have 3 axes .* got shape \(28, 28\)'):
        getattr(converter, function)(np.zeros((28, 28)))
