"""What :func:`researchutils.chainer.onnx.export` refuses before the model runs: inputs that
would wire a wrong graph, names that clash, and arguments the model's forward does not take.

onnx_chainer names a graph value after the Variable it holds and the names it is given, so a
name used twice, or one Variable given twice, silently makes two inputs one: ``a - 2 * b``
exported with ``input_names=['y', 'y']`` computes ``y - 2 * y``. Each such case is a
ValueError naming the clash. A forward that does not take the given arguments (a
``Classifier`` given only the inputs, whose forward then calls its predictor with none) is
a TypeError naming the model's class and the link to export instead.
Tests: ``tests/chainer/onnx/test_arguments.py``.
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import chainer


def args_list(args: Any) -> list[Any]:
    """``args`` as a list of arrays and Variables without a history, none given twice.

    Raises:
        TypeError: an entry is neither an array nor a Variable.
        ValueError: a Variable computed by a function, or one Variable given twice.
    """
    array_types = chainer.get_array_types() + (chainer.Variable,)
    listed = list(args) if isinstance(args, (list, tuple)) else [args]
    seen: dict[int, int] = {}
    for i, arg in enumerate(listed):
        if not isinstance(arg, array_types):
            raise TypeError('args must be an array or Variable, or a tuple or list of them '
                            '(the model\'s positional arguments), got {!r} at {}'.format(
                                type(arg).__name__, i))
        if not isinstance(arg, chainer.Variable):
            continue
        if arg.creator_node is not None:
            raise ValueError('args[{0}] is a Variable computed by {1} (it has a history), so '
                             'the graph would not start at it: give its array, args[{0}].array'
                             .format(i, type(arg.creator_node).__name__))
        if id(arg) in seen:
            raise ValueError('args[{}] and args[{}] are the same Variable, which would make '
                             'them one input of the graph: give two Variables, or the array '
                             'twice'.format(seen[id(arg)], i))
        seen[id(arg)] = i
    return listed


def check_distinct(named: Sequence[tuple[str, str]]) -> None:
    """Refuses an empty name, or one name given to two of the graph's inputs and outputs.

    Args:
        named: ``(name, what it names)`` for each input and output, in the graph's order.

    Raises:
        ValueError: naming the name and both things it would name.
    """
    owners: dict[str, str] = {}
    for name, owner in named:
        if not name:
            raise ValueError('{} has an empty name; each input and output of the graph needs '
                             'a name'.format(owner))
        if name in owners:
            raise ValueError('the name {!r} is given to {} and to {}: each input and output '
                             'of the graph needs a name of its own, or the graph would wire '
                             'them together'.format(name, owners[name], owner))
        owners[name] = owner


def _refusal(link: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """Why ``link.forward`` does not take ``args`` and ``kwargs``; None if it does."""
    try:
        signature = inspect.signature(link.forward)
    except (TypeError, ValueError):     # a builtin or a C function: nothing to read
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        return str(error)
    return None


def check_forward_takes(model: chainer.Link, args: Sequence[Any]) -> None:
    """Refuses ``args`` that the model's forward does not take, before it runs.

    Raises:
        TypeError: naming the model's class, the number of arguments and the reason.
    """
    refusal = _refusal(model, args, {})
    if refusal is not None:
        raise TypeError('args: {}.forward does not take the {} argument(s) given ({}); args '
                        'are the model\'s positional arguments'.format(
                            type(model).__name__, len(args), refusal))


def _attribute_path(path: str) -> str:
    """``model.block.layers[0]`` for the link ``/block/layers/0``."""
    return 'model' + ''.join('[{}]'.format(part) if part.isdigit() else '.' + part
                             for part in path.strip('/').split('/'))


def check_inner_call(model: chainer.Link, n_args: int, path: str, link: Any,
                     args: Sequence[Any], kwargs: dict[str, Any],
                     callers: Sequence[tuple[str, int]]) -> None:
    """Refuses, before it runs, a call of the model's link ``path`` with arguments its
    forward does not take: the model's forward took the ``n_args`` arguments but wanted
    more (a Classifier's takes the inputs and the labels), or passes them on wrongly.

    Args:
        callers: ``(path, number of arguments)`` of the model's links running, outermost
            first: the first given fewer than ``n_args`` (or else ``path``) is the part
            the message suggests to export.

    Raises:
        TypeError: naming the model's class, the link, and the link to export instead.
    """
    refusal = _refusal(link, args, kwargs)
    if refusal is None:
        return
    given = len(args) + len(kwargs)
    wanted = ('takes more arguments than the {} given'.format(n_args) if 'missing' in refusal
              else 'does not fit the {} argument(s) given'.format(n_args))
    part = next((caller for caller, count in list(callers) + [(path, given)]
                 if caller != '/' and count < n_args), path)
    raise TypeError(
        'cannot export {}: its forward {}, and calls {} ({}) with {} argument(s), which {}.'
        'forward does not take ({}). To export what {} computes alone, export {}'.format(
            type(model).__name__, wanted, path, type(link).__name__, given,
            type(link).__name__, refusal, part, _attribute_path(part)))
