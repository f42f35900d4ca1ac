"""Comparing a torch twin with its Chainer link: copy the link's arrays into the module by
name, then compare outputs and every gradient by name, Chainer's result being the reference.

Names follow the pieces' contract (researchutils/pytorch/nn/*.py): a Chainer parameter path
``/upward/W`` is the torch parameter ``upward.weight``, ``/upward/b`` is ``upward.bias``, and
any other parameter keeps its name (``/Wci`` -> ``Wci``). "Equal to r relative" means
``|torch - chainer| <= r * |chainer| + r * max|chainer|``: relative to each element, with
the array's own scale as the floor where an element is near zero (as Chainer's
gradient_check uses atol beside rtol). Tested by tests/support/test_torch_twins.py.

Also here: which researchutils modules a stack can import (researchutils.pytorch needs torch),
for the tests that walk every module.
"""
import importlib.util

import numpy

TORCH_INSTALLED = importlib.util.find_spec('torch') is not None


def importable_here(module_name):
    """Whether ``module_name`` imports on this stack: ``researchutils.pytorch`` needs torch."""
    return TORCH_INSTALLED or not (module_name == 'researchutils.pytorch'
                                   or module_name.startswith('researchutils.pytorch.'))


def torch_name(chainer_path):
    """The torch parameter name of a Chainer parameter path: ``/upward/W`` -> ``upward.weight``."""
    parts = chainer_path.strip('/').split('/')
    parts[-1] = {'W': 'weight', 'b': 'bias'}.get(parts[-1], parts[-1])
    return '.'.join(parts)


def copy_chainer_parameters(link, module):
    """Copies every parameter of ``link`` into the parameter of ``module`` of its name.

    Both sides must have the same names, shapes and dtypes (an AssertionError names the
    first that does not): the copy is the interface contract itself, not a conversion.
    """
    import torch
    chainer_params = {torch_name(path): param for path, param in link.namedparams()}
    torch_params = dict(module.named_parameters())
    assert sorted(chainer_params) == sorted(torch_params), (
        sorted(chainer_params), sorted(torch_params))
    with torch.no_grad():
        for name, param in chainer_params.items():
            target = torch_params[name]
            assert tuple(target.shape) == param.shape, (name, target.shape, param.shape)
            assert str(target.dtype) == 'torch.' + str(param.dtype), (name, target.dtype,
                                                                      param.dtype)
            target.copy_(torch.from_numpy(numpy.array(param.array)))


def assert_equal_to_chainer(actual, expected, rtol, what):
    """``actual`` (a tensor, or None for no gradient) equals the NumPy ``expected`` to ``rtol``."""
    assert actual is not None, '{}: torch computed no gradient'.format(what)
    actual = actual.detach().cpu().numpy()
    expected = numpy.asarray(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    scale = float(numpy.abs(expected).max()) if expected.size else 0.0
    numpy.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale,
                                  err_msg=what)


def assert_gradients_equal(link, module, rtol=1e-5):
    """Every parameter gradient of ``module`` equals its twin's in ``link``, by name."""
    torch_params = dict(module.named_parameters())
    compared = []
    for path, param in link.namedparams():
        name = torch_name(path)
        assert_equal_to_chainer(torch_params[name].grad, param.grad, rtol,
                                'gradient of ' + name)
        compared.append(name)
    assert sorted(compared) == sorted(torch_params)
    return compared


def to_torch(array, requires_grad=False):
    """A tensor copy of a NumPy array (never sharing its memory)."""
    import torch
    return torch.tensor(numpy.array(array), requires_grad=requires_grad)


def assert_double_backward_equal(link, module, inputs, rtol=1e-5):
    """The gradient of ``|d sum(outputs) / d inputs|^2`` with respect to every parameter and
    input equals Chainer's: ``inputs`` (NumPy arrays) run through ``link`` and ``module`` step
    by step from their current state, both differentiated twice."""
    import chainer
    import torch
    variables = [chainer.Variable(x) for x in inputs]
    total = sum(chainer.functions.sum(link(x) ** 2) for x in variables)
    first = chainer.grad([total], variables, enable_double_backprop=True)
    params = [param for _, param in link.namedparams()]
    second = chainer.grad([sum(chainer.functions.sum(g * g) for g in first)],
                          variables + params)
    tensors = [to_torch(x, True) for x in inputs]
    total = sum((module(x) ** 2).sum() for x in tensors)
    first = torch.autograd.grad(total, tensors, create_graph=True)
    torch_params = dict(module.named_parameters())
    ordered = [torch_params[torch_name(path)] for path, _ in link.namedparams()]
    actual = torch.autograd.grad(sum((g * g).sum() for g in first), tensors + ordered)
    names = ['x{}'.format(step) for step in range(len(inputs))] + [
        torch_name(path) for path, _ in link.namedparams()]
    for name, value, reference in zip(names, actual, second):
        assert_equal_to_chainer(value, reference.array, rtol, 'second gradient of ' + name)
