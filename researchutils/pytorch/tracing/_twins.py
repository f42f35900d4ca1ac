"""Chainer links that become torch's own modules in a converted model (Linear, Conv2d,
ConvTranspose2d, Embedding, BatchNorm), and how their parameters are renamed.

A link becomes its torch twin when the traced graph calls it as the link does (its own
parameters, settings a torch module holds); any other link becomes a plain ``nn.Module``
holding its parameters under Chainer's names. Tests: ``tests/pytorch/tracing/test_convert.py``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import chainer.links as L

from researchutils.pytorch.tracing._call import Call, literal
from researchutils.pytorch.tracing._layers import check_channel_axis, deconvolution_settings

# Chainer's parameter and persistent names -> torch's, per twin.
RENAMES: dict[str, dict[str, str]] = {
    'torch.nn.Linear': {'W': 'weight', 'b': 'bias'},
    'torch.nn.Conv2d': {'W': 'weight', 'b': 'bias'},
    'torch.nn.ConvTranspose2d': {'W': 'weight', 'b': 'bias'},
    'torch.nn.Embedding': {'W': 'weight'},
    'torch.nn.BatchNorm': {'gamma': 'weight', 'beta': 'bias', 'avg_mean': 'running_mean',
                           'avg_var': 'running_var'},
}


def _params_match(call: Call, link: Any, names: tuple[str, ...], path: str) -> bool:
    """The call's inputs after x are exactly ``link``'s parameters ``names`` (``b`` may be
    absent when the link has none)."""
    sources = call.step.inputs[1:]
    wanted = ['{}/{}'.format(path.rstrip('/'), name) for name in names
              if getattr(link, name, None) is not None]
    return [source.key if source.kind in ('param', 'persistent') else None
            for source in sources] == wanted


def twin(call: Call, path: str, link: Any) -> tuple[str, str] | None:
    """``(constructor, call)`` source for the torch module that computes ``call`` as the
    link at ``path`` does, or None; the call is a template with ``{module}`` and ``{x}``."""
    kind = type(link)
    x_shape = call.in_shape(0)
    if call.name == 'LinearFunction' and kind is L.Linear and _params_match(
            call, link, ('W', 'b'), path):
        out_size, in_size = call.in_shape(1)
        return ('torch.nn.Linear({}, {}, bias={})'.format(in_size, out_size, link.b is not None),
                '{module}({x})')
    if call.name == 'Convolution2DFunction' and kind is L.Convolution2D and not call.attr(
            'cover_all') and _params_match(call, link, ('W', 'b'), path):
        out_channels, in_per_group, kh, kw = call.in_shape(1)
        groups = call.attr('groups', 1)
        return ('torch.nn.Conv2d({}, {}, {}, stride={}, padding={}, dilation={}, groups={}, '
                'bias={})'.format(in_per_group * groups, out_channels, literal((kh, kw)),
                                  literal((call.attr('sy'), call.attr('sx'))),
                                  literal((call.attr('ph'), call.attr('pw'))),
                                  literal((call.attr('dy'), call.attr('dx'))), groups,
                                  link.b is not None), '{module}({x})')
    if call.name == 'Deconvolution2DFunction' and kind is L.Deconvolution2D and \
            _params_match(call, link, ('W', 'b'), path):
        in_channels, out_per_group, kh, kw = call.in_shape(1)
        groups = call.attr('groups', 1)
        stride, pad, dilate, extra = deconvolution_settings(call)
        return ('torch.nn.ConvTranspose2d({}, {}, {}, stride={}, padding={}, output_padding={},'
                ' groups={}, bias={}, dilation={})'.format(
                    in_channels, out_per_group * groups, literal((kh, kw)), literal(stride),
                    literal(pad), literal(extra), groups, link.b is not None,
                    literal(dilate)), '{module}({x})')
    if call.name == 'EmbedIDFunction' and kind is L.EmbedID and call.attr(
            'ignore_label') is None and _params_match(call, link, ('W',), path):
        return 'torch.nn.Embedding({}, {})'.format(*call.in_shape(1)), '{module}({x}.long())'
    return _batch_norm_twin(call, path, link, x_shape)


def _batch_norm_twin(call: Call, path: str, link: Any,
                     x_shape: tuple[int, ...]) -> tuple[str, str] | None:
    if type(link) is not L.BatchNormalization or not 2 <= len(x_shape) <= 5:
        return None
    if call.name == 'FixedBatchNormalization':
        names: tuple[str, ...] = ('gamma', 'beta', 'avg_mean', 'avg_var')
    elif call.name == 'BatchNormalization' and call.attr('running_mean') is link.avg_mean:
        names = ('gamma', 'beta')
    else:
        return None
    try:
        check_channel_axis(call)
    except ValueError:
        return None
    if not _params_match(call, link, names, path) or link.gamma is None or link.beta is None:
        return None
    dims = max(len(x_shape) - 2, 1)
    return ('torch.nn.BatchNorm{}d({}, eps={}, momentum={})'.format(
        dims, x_shape[1], literal(float(link.eps)), literal(1 - float(link.decay))),
        '{module}({x})')


def torch_name(constructor: str, name: str) -> str:
    """The torch name of the Chainer parameter or persistent ``name`` of a twin."""
    for prefix, renames in RENAMES.items():
        if constructor.startswith(prefix):
            return renames.get(name, name)
    return name


def renamed(constructors: Mapping[str, str], path: str) -> tuple[str, str]:
    """(link path, torch name) of the Chainer value at ``path`` (``/fc1/W``)."""
    link_path, _, name = path.rpartition('/')
    link_path = link_path or '/'
    constructor = constructors.get(link_path)
    return link_path, name if constructor is None else torch_name(constructor, name)
