"""Chainer's containers in torch: ``chainer.Sequential`` with its numbering, a Chain's tree.

``chainer.Sequential(L.Linear(3, 4), F.relu, L.Linear(4, 2))`` numbers its *links* only
(``0`` and ``1``), where ``nn.Sequential`` would number every step (``0``, ``1``, ``2``):
:class:`Sequential` takes modules and plain functions as Chainer's takes links and functions,
and names the modules as Chainer names the links, so the weights' names match. A Chain's
forward is Python that no table can convert: :class:`Chain` holds the converted children
under their Chainer names and says, when called, that its forward is the user's to write.

Tests: ``tests/pytorch/weights/test_conversion.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from researchutils._checks import check_str_list


class Sequential(nn.Module):
    """``chainer.Sequential``: each layer applied in turn; a tuple result is unpacked.

    Args:
        *layers (torch.nn.Module or callable): The steps.
        names (sequence of str or None): The names of the modules among them, in order; by
            default ``'0'``, ``'1'``, ... counting modules only. (Chainer 7 numbers a
            Sequential's links by its list of children, which ``append`` fills out of order
            after the second link: from_chainer passes the links' own names.)

    Example:
        >>> import torch
        >>> model = Sequential(torch.nn.Linear(3, 4), torch.relu, torch.nn.Linear(4, 2))
        >>> [name for name, _ in model.named_children()]
        ['0', '1']
        >>> model(torch.zeros(5, 3)).shape
        torch.Size([5, 2])
    """

    def __init__(self, *layers: nn.Module | Callable[..., Any],
                 names: Sequence[str] | None = None) -> None:
        super().__init__()
        for index, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError('layers[{}] must be a torch.nn.Module or a callable, got {!r}'
                                .format(index, layer))
        count = sum(isinstance(layer, nn.Module) for layer in layers)
        module_names = [str(index) for index in range(count)] if names is None else list(
            check_str_list(names, 'names'))
        if len(module_names) != count or len(set(module_names)) != count:
            raise ValueError('names must be {} distinct names, one per module, got {!r}'
                             .format(count, names))
        self._layers: list[nn.Module | Callable[..., Any]] = list(layers)
        modules = iter(module_names)
        for layer in layers:
            if isinstance(layer, nn.Module):
                self.add_module(next(modules), layer)

    def __getitem__(self, index: int) -> nn.Module | Callable[..., Any]:
        """The step ``index`` (a module or a function), as ``chainer.Sequential``'s."""
        return self._layers[index]

    def __len__(self) -> int:
        return len(self._layers)

    def forward(self, *x: Any) -> Any:
        result: Any = x
        for layer in self._layers:
            result = layer(*result) if isinstance(result, tuple) else layer(result)
        return result

    def extra_repr(self) -> str:
        return 'functions: {}'.format(', '.join(
            getattr(layer, '__name__', repr(layer)) for layer in self._layers
            if not isinstance(layer, nn.Module)))


class Chain(nn.Module):
    """The module tree of a converted Chain (or ChainList): its children, no forward.

    Args:
        chainer_class (str): The qualified name of the Chain's class, said by ``forward``.

    Calling it raises NotImplementedError: write the forward in a module of your own, with
    these children (its ``named_children()``), or subclass this one.

    Example:
        >>> import torch
        >>> tree = Chain('mymodels.Encoder')
        >>> tree.fc = torch.nn.Linear(3, 2)
        >>> tree(torch.zeros(1, 3))
        Traceback (most recent call last):
        ...
        NotImplementedError: the module converted from the Chain mymodels.Encoder has its \
children and weights, not its forward: write a forward that calls them
    """

    def __init__(self, chainer_class: str) -> None:
        super().__init__()
        if not isinstance(chainer_class, str):
            raise TypeError('chainer_class must be a str, got {!r}'.format(chainer_class))
        self.chainer_class = chainer_class

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            'the module converted from the Chain {} has its children and weights, not its '
            'forward: write a forward that calls them'.format(self.chainer_class))

    def extra_repr(self) -> str:
        return 'from {}'.format(self.chainer_class)
