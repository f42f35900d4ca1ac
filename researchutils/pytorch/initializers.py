"""The torch twin of ``researchutils.chainer.initializers.NormalWithLoc``: fills a tensor in
place from a normal distribution with any mean, in torch's initializer style.

Chainer name -> torch name: ``NormalWithLoc(loc, scale, dtype)`` keeps its name and
arguments; ``dtype`` is a ``torch.dtype``. Tests: ``tests/pytorch/test_initializers.py``.
"""
from __future__ import annotations

import torch

from researchutils._checks import check_float
from researchutils.pytorch._tensor_checks import check_float_tensor


class NormalWithLoc:
    """Fills a tensor in place with values drawn from :math:`N(loc, scale^2)`.

    As ``torch.nn.init.normal_(tensor, loc, scale)``, with the arguments and checks of the
    Chainer twin, so that it can be given wherever the torch twins take an initializer
    (``upward_init``, ``bias_init``, ...) or called on any tensor. It draws from torch's
    global generator (``torch.manual_seed`` makes it repeatable), or from ``generator``.

    Args:
        loc (float): Mean of the distribution.
        scale (float): Standard deviation, ``>= 0`` (zero fills with ``loc``).
        dtype (torch.dtype or None): The floating point dtype the filled tensors must
            have, or None for any.

    Raises:
        TypeError: ``loc`` or ``scale`` is not a real number, or ``dtype`` is not a
            floating point ``torch.dtype``.
        ValueError: ``loc`` or ``scale`` is not finite, or ``scale`` is negative.

    Example:
        >>> import torch
        >>> from researchutils.pytorch import NormalWithLoc
        >>> bias = NormalWithLoc(loc=1.0, scale=0.01)(torch.empty(1000))
        >>> bool(abs(bias.mean() - 1.0) < 0.01)
        True
    """

    def __init__(self, loc: float = 0.0, scale: float = 0.05,
                 dtype: torch.dtype | None = None) -> None:
        self.loc = check_float(loc, 'loc')
        self.scale = check_float(scale, 'scale', minimum=0)
        if dtype is not None and not (isinstance(dtype, torch.dtype)
                                      and dtype.is_floating_point):
            raise TypeError('dtype must be a floating point torch.dtype or None, got {!r}'.format(
                dtype))
        self.dtype = dtype

    def __call__(self, tensor: torch.Tensor,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Fills ``tensor`` in place and returns it.

        Args:
            tensor (torch.Tensor): A floating point tensor (a parameter too: the fill is not
                recorded by autograd), of ``dtype`` when one was given.
            generator (torch.Generator or None): The generator to draw from; None is
                torch's global one.

        Returns:
            torch.Tensor: ``tensor`` itself.

        Raises:
            TypeError: ``tensor`` is not a floating point tensor, or not of ``dtype``.
        """
        check_float_tensor(tensor, 'tensor')
        if self.dtype is not None and tensor.dtype != self.dtype:
            raise TypeError('tensor must have the dtype of the initializer, {}, got {}'.format(
                self.dtype, tensor.dtype))
        with torch.no_grad():
            return tensor.normal_(self.loc, self.scale, generator=generator)
