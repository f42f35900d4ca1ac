"""researchutils.pytorch.NormalWithLoc: draws N(loc, scale^2) in place, as its Chainer twin,
and refuses what the twin refuses with the same words."""
import numpy as np
import pytest

torch = pytest.importorskip('torch')

from researchutils.chainer.initializers import NormalWithLoc as ChainerNormalWithLoc  # noqa
from researchutils.pytorch import GradClipLSTM, NormalWithLoc  # noqa: E402


@pytest.mark.parametrize('dtype', [torch.float16, torch.float32, torch.float64])
def test_draws_from_the_normal_of_its_loc_and_scale_as_chainers(dtype):
    torch.manual_seed(0)
    tensor = torch.empty(200, 500, dtype=dtype)
    assert NormalWithLoc(loc=-3.0, scale=0.5)(tensor) is tensor
    ours = tensor.double().numpy()
    np.random.seed(0)
    chainers = np.empty((200, 500), np.float64)
    ChainerNormalWithLoc(loc=-3.0, scale=0.5)(chainers)
    for values in (ours, chainers):
        assert values.mean() == pytest.approx(-3.0, abs=0.01)
        assert values.std() == pytest.approx(0.5, rel=0.01)


def test_a_scale_of_zero_fills_with_loc():
    assert NormalWithLoc(loc=2.5, scale=0)(torch.empty(3)).tolist() == [2.5] * 3


def test_a_generator_makes_it_repeatable():
    draws = [NormalWithLoc(1.0, 2.0)(torch.empty(5), torch.Generator().manual_seed(3))
             for _ in range(2)]
    assert torch.equal(*draws)


def test_it_initializes_a_parameter_of_a_twin():
    lstm = GradClipLSTM(3, 2, forget_bias_init=NormalWithLoc(loc=4.0, scale=0.0))
    assert lstm.upward.bias.tolist() == [0.0, 0.0, 4.0, 0.0] * 2
    assert lstm.upward.bias.requires_grad


@pytest.mark.parametrize('arguments', [
    dict(loc=float('inf')), dict(loc='0'), dict(scale=-0.1), dict(scale=True),
    dict(scale=float('nan')),
])
def test_bad_arguments_are_refused_as_chainer_refuses_them(arguments):
    with pytest.raises((TypeError, ValueError)) as chainers:
        ChainerNormalWithLoc(**arguments)
    with pytest.raises(type(chainers.value)) as ours:
        NormalWithLoc(**arguments)
    assert str(ours.value) == str(chainers.value)


@pytest.mark.parametrize('dtype', [torch.int32, 'float32', np.float32])
def test_a_dtype_that_is_not_a_floating_torch_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match='dtype must be a floating point torch.dtype'):
        NormalWithLoc(dtype=dtype)


def test_a_tensor_of_another_dtype_is_refused_naming_both():
    with pytest.raises(TypeError, match='tensor must have the dtype of the initializer, '
                                        'torch.float64, got torch.float32'):
        NormalWithLoc(dtype=torch.float64)(torch.empty(2))
    with pytest.raises(TypeError, match='tensor must be a floating point torch.Tensor'):
        NormalWithLoc()(torch.empty(2, dtype=torch.int64))
