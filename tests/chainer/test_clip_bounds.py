"""Tests of the gradient clipping bounds shared by functions and links (chainer/_clip_bounds.py)."""
import math

import numpy
import pytest

from researchutils.chainer._clip_bounds import check_clip_bounds


def test_bounds_come_back_as_floats():
    bounds = check_clip_bounds(numpy.float32(-1.5), 2)
    assert bounds == (-1.5, 2.0) and all(type(bound) is float for bound in bounds)


def test_none_is_no_bound():
    assert check_clip_bounds(None, None) == (None, None)


def test_an_infinite_bound_is_no_bound_and_accepted():
    assert check_clip_bounds(-math.inf, math.inf) == (-math.inf, math.inf)


@pytest.mark.parametrize('name', ['clip_min', 'clip_max'])
def test_nan_is_refused_naming_the_bound(name):
    with pytest.raises(ValueError, match=name):
        check_clip_bounds(**{'clip_min': None, 'clip_max': None, name: math.nan})


@pytest.mark.parametrize('name', ['clip_min', 'clip_max'])
def test_a_bool_is_refused_naming_the_bound(name):
    with pytest.raises(TypeError, match=name):
        check_clip_bounds(**{'clip_min': None, 'clip_max': None, name: True})


def test_clip_min_above_clip_max_is_refused_with_both_values():
    with pytest.raises(ValueError, match='clip_min=2.0 and clip_max=1.0'):
        check_clip_bounds(2.0, 1.0)


def test_equal_bounds_are_accepted():
    assert check_clip_bounds(1.0, 1.0) == (1.0, 1.0)
