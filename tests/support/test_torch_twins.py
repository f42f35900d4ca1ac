"""The twin comparison of tests/support/torch_twins.py: names map as the contract says, a copy
refuses what does not fit, and the comparison fails where the tolerance is exceeded."""
import chainer.links as L
import numpy as np
import pytest

from tests.support.torch_twins import (
    TORCH_INSTALLED,
    assert_equal_to_chainer,
    copy_chainer_parameters,
    importable_here,
    torch_name,
)


def test_chainer_paths_become_the_contracts_torch_names():
    assert torch_name('/upward/W') == 'upward.weight'
    assert torch_name('/conv/b') == 'conv.bias'
    assert torch_name('/Wci') == 'Wci'
    assert torch_name('/Wa/W') == 'Wa.weight'


def test_the_comparison_fails_beyond_the_tolerance_and_passes_within():
    torch = pytest.importorskip('torch')
    expected = np.array([1.0, -2.0, 4.0], np.float32)
    assert_equal_to_chainer(torch.tensor(expected * (1 + 5e-6)), expected, 1e-5, 'x')
    with pytest.raises(AssertionError, match='x'):
        assert_equal_to_chainer(torch.tensor(expected * (1 + 3e-5)), expected, 1e-5, 'x')
    with pytest.raises(AssertionError, match='no gradient'):
        assert_equal_to_chainer(None, expected, 1e-5, 'x')
    with pytest.raises(AssertionError):  # another dtype is not the twin's
        assert_equal_to_chainer(torch.tensor(expected, dtype=torch.float64), expected, 1, 'x')


def test_a_copy_refuses_names_or_shapes_that_do_not_fit():
    torch = pytest.importorskip('torch')
    link = L.Linear(3, 2)
    module = torch.nn.Module()
    module.weight = torch.nn.Parameter(torch.zeros(2, 3))
    with pytest.raises(AssertionError, match='bias'):
        copy_chainer_parameters(link, module)
    module.bias = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(AssertionError, match='bias'):
        copy_chainer_parameters(link, module)
    module.bias = torch.nn.Parameter(torch.zeros(2))
    copy_chainer_parameters(link, module)
    assert np.array_equal(module.weight.detach().numpy(), link.W.array)


def test_the_torch_side_is_importable_exactly_where_torch_is():
    assert importable_here('researchutils.chainer.links')
    assert importable_here('researchutils.pytorch_like') is True
    assert importable_here('researchutils.pytorch.nn') is TORCH_INSTALLED
