"""from_chainer: a Chainer link (or a model's tree of links) as a torch module, weights included.

One converter per Chainer link kind, in :data:`CONVERTERS`: it checks the link's options and
builds the torch module of the same computation (torch's own where it computes the same,
the twins of :mod:`researchutils.pytorch.nn` where not); the weights are then copied in by
:func:`~researchutils.pytorch.weights.load_chainer_weights`, whose rules convert them by the
module's kind (the LSTM gate order among them), so a converted module and a hand-written one
are filled by the same code. A link is looked up by its class and then its bases, but a
class that overrides ``forward`` is not taken for its base: it falls to the next entry, a
Chain subclass to :class:`~researchutils.pytorch.nn.containers.Chain` (its tree, without a
forward), anything else to an error. The whole tree is checked before anything is built.

Tests: ``tests/pytorch/weights/test_conversion.py``, ``test_recurrent.py``.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import torch
import torch.nn.functional as torch_functional
from torch import nn

import researchutils.chainer.links as toolkit_links
from researchutils.pytorch.nn import connection, containers, n_step_rnn, normalization, recurrent
from researchutils.pytorch.nn.action_conditioned_lstm import ActionConditionedLSTM
from researchutils.pytorch.nn.conv_lstm import ConvLSTM
from researchutils.pytorch.nn.deconvolution_ps import DeconvolutionPS
from researchutils.pytorch.nn.grad_clip_lstm import GradClipLSTM
from researchutils.pytorch.weights.loading import load_chainer_weights

#: Chainer functions that a chainer.Sequential or a Highway may hold, and their torch twins.
FUNCTIONS: dict[Any, Callable[..., Any]] = {
    F.relu: torch.relu, F.sigmoid: torch.sigmoid, F.tanh: torch.tanh,
    F.identity: lambda x: x, F.elu: torch_functional.elu,
    F.softplus: torch_functional.softplus,
    F.leaky_relu: functools.partial(torch_functional.leaky_relu, negative_slope=0.2),
    F.softmax: functools.partial(torch.softmax, dim=1),
    F.log_softmax: functools.partial(torch.log_softmax, dim=1),
}


class ConversionError(TypeError):
    """A link (or a function in a Sequential) that from_chainer cannot convert, by path."""


@dataclasses.dataclass(frozen=True)
class Converter:
    """Builds the torch module of one Chainer link kind; ``check`` returns what prevents it
    (None if nothing); ``walks_children`` for the containers, whose children are converted."""

    build: Callable[[Any, dict[str, Any]], Any]
    check: Callable[[Any], str | None] = lambda link: None
    walks_children: bool = False


def _pair(value: Any) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _has(link: Any, name: str) -> bool:
    return getattr(link, name, None) is not None


def _convolution(link: Any, children: dict[str, Any]) -> Any:
    kind = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[link.W.ndim - 2]
    groups = getattr(link, 'groups', 1)
    return kind(link.W.shape[1] * groups, link.W.shape[0], tuple(link.W.shape[2:]),
                stride=link.stride, padding=link.pad, dilation=link.dilate, groups=groups,
                bias=_has(link, 'b'))


def _check_convolution(link: Any) -> str | None:
    if getattr(link, 'cover_all', False):
        return 'cover_all=True has no torch equivalent'
    if link.W.ndim - 2 not in (1, 2, 3):
        return 'torch has convolutions of 1 to 3 spatial axes, not {}'.format(link.W.ndim - 2)
    return None


def _deconvolution(link: Any, children: dict[str, Any]) -> Any:
    outsize = None if link.outsize in (None, (None, None)) else tuple(link.outsize)
    return connection.Deconvolution2D(
        link.W.shape[0], link.W.shape[1] * link.groups, tuple(link.W.shape[2:]),
        stride=link.stride, pad=link.pad, nobias=not _has(link, 'b'), outsize=outsize,
        dilate=link.dilate, groups=link.groups)


def _batch_normalization(link: Any, children: dict[str, Any]) -> Any:
    return normalization.BatchNormalization(
        link.avg_mean.shape[0], decay=link.decay, eps=link.eps,
        use_gamma=_has(link, 'gamma'), use_beta=_has(link, 'beta'))


def _check_batch_normalization(link: Any) -> str | None:
    if link.axis is not None:
        return 'axis={!r}: only the default (every axis but 1) is converted'.format(link.axis)
    if link.avg_mean is None or link.avg_mean.ndim != 1:
        return 'its statistics are not initialized (a lazy size: run it once)'
    return None


def _highway(link: Any, children: dict[str, Any]) -> Any:
    return connection.Highway(link.plain.W.shape[0], nobias=not _has(link.plain, 'b'),
                              activate=FUNCTIONS[link.activate])


def _check_highway(link: Any) -> str | None:
    if link.activate not in FUNCTIONS:
        return 'its activate {!r} is not one of the functions converted ({})'.format(
            link.activate, ', '.join(sorted(function.__name__ for function in FUNCTIONS)))
    return None


def _n_step(kind: type) -> Callable[[Any, dict[str, Any]], Any]:
    return lambda link, children: kind(link.n_layers, link.ws[0][0].shape[1], link.out_size,
                                       link.dropout)


def _sequential(link: Any, children: dict[str, Any]) -> Any:
    return containers.Sequential(
        *[children[layer.name] if isinstance(layer, chainer.Link) else FUNCTIONS[layer]
          for layer in link],
        names=[layer.name for layer in link if isinstance(layer, chainer.Link)])


def _check_sequential(link: Any) -> str | None:
    for index, layer in enumerate(link):
        if not isinstance(layer, chainer.Link) and layer not in FUNCTIONS:
            return 'its layer {} ({!r}) is not a link or one of the functions converted ({})' \
                .format(index, layer, ', '.join(sorted(function.__name__
                                                       for function in FUNCTIONS)))
    return None


def _tree(container: Any, link: Any, children: dict[str, Any]) -> Any:
    for name, child in children.items():
        container.add_module(name, child)
    for name, param in link.namedparams(include_uninit=True):
        if name.count('/') == 1:  # the container's own parameters
            container.register_parameter(name[1:], nn.Parameter(torch.empty(param.shape)))
    for name in sorted(link._persistent):
        container.register_buffer(name, torch.as_tensor(
            chainer.backend.CpuDevice().send(getattr(link, name))).clone())
    return container


CONVERTERS: dict[type, Converter] = {
    L.Linear: Converter(lambda link, children: connection.Linear(
        link.W.shape[1], link.W.shape[0], nobias=not _has(link, 'b'))),
    L.Convolution2D: Converter(_convolution, _check_convolution),
    L.DilatedConvolution2D: Converter(_convolution, _check_convolution),
    L.ConvolutionND: Converter(_convolution, _check_convolution),
    L.Deconvolution2D: Converter(_deconvolution),
    L.DepthwiseConvolution2D: Converter(lambda link, children: connection.DepthwiseConvolution2D(
        link.W.shape[1], link.W.shape[0], tuple(link.W.shape[2:]), stride=link.stride,
        pad=link.pad, nobias=not _has(link, 'b'))),
    L.BatchNormalization: Converter(_batch_normalization, _check_batch_normalization),
    L.EmbedID: Converter(lambda link, children: connection.EmbedID(
        link.W.shape[0], link.W.shape[1], ignore_label=link.ignore_label)),
    L.LSTM: Converter(lambda link, children: recurrent.LSTM(link.upward.W.shape[1],
                                                            link.state_size)),
    L.StatelessLSTM: Converter(lambda link, children: recurrent.StatelessLSTM(
        link.upward.W.shape[1], link.state_size)),
    L.StatelessGRU: Converter(lambda link, children: recurrent.StatelessGRU(
        link.W.W.shape[1], link.W.W.shape[0])),
    L.StatefulGRU: Converter(lambda link, children: recurrent.StatefulGRU(
        link.W.W.shape[1], link.W.W.shape[0])),
    L.GRU: Converter(lambda link, children: recurrent.StatefulGRU(
        link.W.W.shape[1], link.W.W.shape[0])),
    L.NStepLSTM: Converter(_n_step(n_step_rnn.NStepLSTM)),
    L.NStepBiLSTM: Converter(_n_step(n_step_rnn.NStepBiLSTM)),
    L.NStepGRU: Converter(_n_step(n_step_rnn.NStepGRU)),
    L.NStepBiGRU: Converter(_n_step(n_step_rnn.NStepBiGRU)),
    L.Highway: Converter(_highway, _check_highway),
    L.Maxout: Converter(lambda link, children: connection.Maxout(
        link.linear.W.shape[1], link.out_size, link.pool_size)),
    # the toolkit's links: their torch twins hold the Chainer layouts (interleaved gates)
    toolkit_links.GradClipLSTM: Converter(lambda link, children: GradClipLSTM(
        link.upward.W.shape[1], link.state_size, clip_min=link.clip_min,
        clip_max=link.clip_max)),
    toolkit_links.ActionConditionedLSTM: Converter(lambda link, children: ActionConditionedLSTM(
        link.upward.W.shape[1], link.state_size, action_size=link.Wa.W.shape[1],
        clip_min=link.clip_min, clip_max=link.clip_max)),
    toolkit_links.ConvLSTM: Converter(lambda link, children: ConvLSTM(
        link.Wxc.W.shape[1], link.out_channels, link.ksize, stride=link.stride,
        clip_min=link.clip_min, clip_max=link.clip_max)),
    toolkit_links.DeconvolutionPS: Converter(lambda link, children: DeconvolutionPS(
        link.conv.W.shape[1], link.out_channels, link.ksize, stride=link.stride, pad=link.pad,
        nobias=not _has(link.conv, 'b'), outsize=link.outsize)),
    chainer.Sequential: Converter(_sequential, _check_sequential, walks_children=True),
    L.Classifier: Converter(lambda link, children: _tree(containers.Chain(
        'chainer.links.Classifier'), link, children), walks_children=True),
    chainer.ChainList: Converter(lambda link, children: _tree(nn.ModuleList(), link, children),
                                 walks_children=True),
    chainer.Chain: Converter(lambda link, children: _tree(containers.Chain('{}.{}'.format(
        type(link).__module__, type(link).__qualname__)), link, children),
        walks_children=True),
}


def _forward_of(kind: type) -> Any:
    return getattr(kind, 'forward', None), kind.__call__


def _converter(link: Any) -> Converter | None:
    """The first converter along the link's class and bases whose forward is the link's."""
    for kind in type(link).__mro__:
        converter = CONVERTERS.get(kind)
        if kind in (chainer.Chain, chainer.ChainList) and kind is not type(link) and (
                type(link).__module__.startswith('chainer.')):
            return None  # Chainer's own links compute something: never a bare tree
        if converter is not None and (converter.walks_children
                                      or _forward_of(kind) == _forward_of(type(link))):
            return converter
    return None


def _check(link: Any, path: str) -> None:
    kind = '{}.{}'.format(type(link).__module__, type(link).__qualname__)
    converter = _converter(link)
    if converter is None:
        raise ConversionError(
            'the link {!r} of type {} has no conversion to torch (see '
            'researchutils.pytorch.weights.conversion.CONVERTERS)'.format(path, kind))
    uninitialized = [name for name, param in link.namedparams(include_uninit=True)
                     if param.array is None]
    if uninitialized:
        raise ConversionError('the link {!r} of type {} has parameters never initialized ({}): '
                              'run the model once first'.format(path, kind,
                                                                ', '.join(uninitialized)))
    problem = converter.check(link)
    if problem is not None:
        raise ConversionError('the link {!r} of type {} cannot be converted: {}'.format(
            path, kind, problem))
    if converter.walks_children:
        for child in link.children():
            _check(child, path.rstrip('/') + '/' + child.name)


def _build(link: Any) -> Any:
    converter = _converter(link)
    assert converter is not None  # _check found one
    children = {child.name: _build(child) for child in link.children()} \
        if converter.walks_children else {}
    return converter.build(link, children)


def from_chainer(link: chainer.Link) -> nn.Module:
    """A torch module computing what ``link`` computes, with its weights (float32 copies).

    Every link of the tree must have a converter (:data:`CONVERTERS`); a ``Chain`` with a
    forward of its own becomes its tree of converted children without a forward
    (:class:`~researchutils.pytorch.nn.containers.Chain`), and the user writes that forward.
    Chainer's ``chainer.config.train`` is the module's ``train()`` / ``eval()``; state (an
    LSTM's ``h``) is not copied. The table of what maps to what is in the tutorial.

    Args:
        link (chainer.Link): The model, every parameter initialized, on any device.

    Returns:
        torch.nn.Module: On the CPU, in train mode, its parameters in Chainer's dtype.

    Raises:
        TypeError: ``link`` is not a chainer.Link, or a link of its tree has no
            conversion, or options that torch cannot compute (``cover_all``); the message
            names the link's path in the model and its type. Raised before anything is built.

    Example:
        >>> import chainer, chainer.links as L, chainer.functions as F, numpy, torch
        >>> model = chainer.Sequential(L.Linear(3, 4), F.relu, L.Linear(4, 2))
        >>> module = from_chainer(model)
        >>> x = numpy.ones((1, 3), dtype=numpy.float32)
        >>> bool(numpy.allclose(module(torch.from_numpy(x)).detach().numpy(),
        ...                     model(x).array, rtol=1e-6))
        True
    """
    if not isinstance(link, chainer.Link):
        raise TypeError('link must be a chainer.Link, got {!r}'.format(link))
    _check(link, '/')
    module = _build(link)
    dtypes = {param.dtype for param in link.params()}
    if len(dtypes) == 1:
        module.to(torch.from_numpy(numpy.zeros(0, dtype=dtypes.pop())).dtype)
    return load_chainer_weights(module, link)
