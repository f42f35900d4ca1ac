"""Tests of the argument checks shared by the links (links/_arguments.py)."""
import numpy
import pytest
from chainer.utils import type_check

from researchutils.chainer.links._arguments import check_image_batch, check_pair


def test_an_int_becomes_a_pair_of_it():
    assert check_pair('ksize', numpy.int64(3), 1) == (3, 3)


def test_a_pair_comes_back_as_a_tuple_of_ints():
    pair = check_pair('stride', [1, 2], 1)
    assert pair == (1, 2) and all(type(value) is int for value in pair)


def test_the_minimum_is_allowed_and_below_it_refused_naming_the_argument():
    assert check_pair('pad', 0, 0) == (0, 0)
    with pytest.raises(ValueError, match='pad.*-1'):
        check_pair('pad', (0, -1), 0)


@pytest.mark.parametrize('value', [(1, 2, 3), ()])
def test_a_sequence_of_another_length_is_refused(value):
    with pytest.raises(ValueError, match='ksize must be an int or a pair of ints'):
        check_pair('ksize', value, 1)


@pytest.mark.parametrize('value', [True, 1.0, '3', None])
def test_what_is_not_an_int_is_refused_naming_the_argument(value):
    with pytest.raises(TypeError, match='ksize'):
        check_pair('ksize', value, 1)


def test_a_bool_inside_a_pair_is_refused():
    with pytest.raises(TypeError, match='ksize'):
        check_pair('ksize', (3, True), 1)


def test_a_batch_of_feature_maps_passes():
    check_image_batch(numpy.zeros((2, 3, 4, 5)))


@pytest.mark.parametrize('shape', [(3, 4, 5), (1, 2, 3, 4, 5)])
def test_anything_but_four_axes_is_an_invalid_type_showing_the_shape(shape):
    with pytest.raises(type_check.InvalidType, match=r'x\.ndim = {}'.format(len(shape))):
        check_image_batch(numpy.zeros(shape))
