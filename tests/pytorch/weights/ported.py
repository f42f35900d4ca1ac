"""Checking a ported module against its Chainer link, Chainer's own result the reference.

:func:`check_ported` runs the same inputs through both, backpropagates the same random
weighting of the outputs through both, and asserts every output to 1e-6 and every parameter
and input gradient to 1e-5 relative (tests/support/torch_twins.py's rule: relative to each
element, with the array's own scale as the floor near zero). Chainer's parameter gradients
are brought to torch's layout by converting a copy of the link whose parameters are its
gradients: the outputs' equality on random weights has already pinned which Chainer array
fills which torch tensor, so the gradients are compared through the same correspondence.
"""
import chainer
import chainer.functions as F
import numpy
import torch

from researchutils.pytorch.weights import from_chainer
from tests.support.torch_twins import assert_equal_to_chainer

FORWARD_RTOL = 1e-6
GRADIENT_RTOL = 1e-5


def randomize(link, seed=0):
    """Every parameter of ``link`` drawn from a normal distribution (biases included), its
    gradients cleared (Chainer starts them as NaN, for an optimizer to clear)."""
    random = numpy.random.RandomState(seed)
    for _, param in sorted(link.namedparams()):
        param.array[...] = random.standard_normal(param.shape).astype(param.dtype)
    link.cleargrads()
    return link


def assert_close(actual, expected, rtol, what):
    """The tensor ``actual`` equals the NumPy ``expected`` to ``rtol`` (torch_twins' rule)."""
    assert_equal_to_chainer(actual, expected, rtol, what)


def flat(outputs):
    """The arrays of a result (a tensor, a variable, or tuples and lists of them), in order."""
    if isinstance(outputs, (tuple, list)):
        return [leaf for item in outputs for leaf in flat(item)]
    return [] if outputs is None else [outputs]


def gradients_in_torch_layout(link):
    """Chainer's parameter gradients, converted as its weights are: torch name to tensor."""
    holder = link.copy(mode='copy')
    for (_, param), (_, copy) in zip(sorted(link.namedparams()), sorted(holder.namedparams())):
        copy.array[...] = 0 if param.grad is None else param.grad
    return dict(from_chainer(holder).named_parameters())


def backward_both(chainer_outputs, torch_outputs, seed=1):
    """Backpropagates ``sum(output * w)`` in both, the same random ``w`` per output."""
    chainer_outputs, torch_outputs = flat(chainer_outputs), flat(torch_outputs)
    assert len(chainer_outputs) == len(torch_outputs)
    random = numpy.random.RandomState(seed)
    weights = [random.standard_normal(output.shape).astype(output.dtype)
               for output in chainer_outputs]
    F.sum(F.stack([F.sum(output * weight) for output, weight
                   in zip(chainer_outputs, weights)])).backward()
    torch.stack([(output * torch.from_numpy(weight)).sum()
                 for output, weight in zip(torch_outputs, weights)]).sum().backward()


def assert_outputs_equal(chainer_outputs, torch_outputs, what='output'):
    chainer_outputs, torch_outputs = flat(chainer_outputs), flat(torch_outputs)
    assert len(chainer_outputs) == len(torch_outputs)
    for index, (ours, theirs) in enumerate(zip(torch_outputs, chainer_outputs)):
        assert_close(ours, theirs.array, FORWARD_RTOL, '{} {}'.format(what, index))


def assert_gradients_equal(link, module, inputs=()):
    """Every parameter gradient of ``module`` equals Chainer's, and each (variable, tensor)
    input pair's gradient too; returns the names compared."""
    expected = gradients_in_torch_layout(link)
    compared = []
    for name, param in module.named_parameters():
        assert_close(param.grad, expected[name].detach().numpy(), GRADIENT_RTOL,
                     'gradient of ' + name)
        compared.append(name)
    for index, (variable, tensor) in enumerate(inputs):
        assert_close(tensor.grad, variable.grad, GRADIENT_RTOL, 'gradient of input {}'
                     .format(index))
    return compared


def both(array):
    """A Chainer variable and a torch tensor of ``array``, each its own copy."""
    return (chainer.Variable(array.copy()),
            torch.tensor(array.copy(), requires_grad=array.dtype.kind == 'f'))


def check_ported(link, module, *arrays):
    """One call of ``link`` and ``module`` on ``arrays``: outputs and every gradient equal."""
    pairs = [both(array) for array in arrays]
    chainer_outputs = link(*[variable for variable, _ in pairs])
    torch_outputs = module(*[tensor for _, tensor in pairs])
    assert_outputs_equal(chainer_outputs, torch_outputs)
    backward_both(chainer_outputs, torch_outputs)
    return assert_gradients_equal(link, module, [pair for pair, array in zip(pairs, arrays)
                                                 if array.dtype.kind == 'f'])
