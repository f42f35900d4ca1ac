"""Table entries for Chainer's connections, normalizations, pooling, noise, losses and the
LSTM step, each a torch expression. Tests: ``tests/pytorch/tracing/test_functions.py``."""
from __future__ import annotations

from collections.abc import Callable

from researchutils.pytorch.tracing._call import Call, literal

Entry = Callable[[Call], str]


def _bias(call: Call) -> str:
    return call.args[2] if len(call.args) > 2 else 'None'


def _linear(call: Call) -> str:
    return 'functional.linear({}, {}, {})'.format(call.args[0], call.args[1], _bias(call))


def _convolution_2d(call: Call) -> str:
    if call.attr('cover_all'):
        raise call.fail('cover_all=True has no torch convolution')
    return ('functional.conv2d({}, {}, {}, stride={}, padding={}, dilation={}, groups={})'
            .format(call.args[0], call.args[1], _bias(call),
                    literal((call.attr('sy'), call.attr('sx'))),
                    literal((call.attr('ph'), call.attr('pw'))),
                    literal((call.attr('dy'), call.attr('dx'))), call.lit('groups', 1)))


def _convolution_nd(call: Call) -> str:
    if call.attr('cover_all'):
        raise call.fail('cover_all=True has no torch convolution')
    ndim = len(call.in_shape(0)) - 2
    return ('functional.conv{}d({}, {}, {}, stride={}, padding={}, dilation={}, groups={})'
            .format(ndim, call.args[0], call.args[1], _bias(call), call.lit('stride'),
                    call.lit('pad'), call.lit('dilate'), call.lit('groups', 1)))


def output_padding(call: Call, stride: tuple[int, ...], pad: tuple[int, ...],
                   dilate: tuple[int, ...], outs: tuple[int, ...]) -> tuple[int, ...]:
    """torch's ``output_padding`` that gives a transposed convolution Chainer's out size."""
    sizes, kernel = call.in_shape(0)[2:], call.in_shape(1)[2:]
    return tuple(int(out - ((size - 1) * s - 2 * p + d * (k - 1) + 1)) for out, size, s, p, d, k
                 in zip(outs, sizes, stride, pad, dilate, kernel))


def deconvolution_settings(call: Call) -> tuple[tuple[int, ...], ...]:
    """stride, padding, dilation and output_padding of a (2-D or N-D) deconvolution."""
    if call.name == 'Deconvolution2DFunction':
        stride = (call.attr('sy'), call.attr('sx'))
        pad = (call.attr('ph'), call.attr('pw'))
        dilate = (call.attr('dy'), call.attr('dx'))
        outs = (call.attr('outh'), call.attr('outw'))
    else:
        stride, pad = tuple(call.attr('stride')), tuple(call.attr('pad'))
        dilate, outs = tuple(call.attr('dilate')), tuple(call.attr('outs'))
    return stride, pad, dilate, output_padding(call, stride, pad, dilate, outs)


def _deconvolution(call: Call) -> str:
    stride, pad, dilate, extra = deconvolution_settings(call)
    ndim = len(call.in_shape(0)) - 2
    return ('functional.conv_transpose{}d({}, {}, {}, stride={}, padding={}, '
            'output_padding={}, groups={}, dilation={})'.format(
                ndim, call.args[0], call.args[1], _bias(call), literal(stride), literal(pad),
                literal(extra), call.lit('groups', 1), literal(dilate)))


def _embed_id(call: Call) -> str:
    return 'ops.embed_id({}, {}, ignore_label={})'.format(call.args[0], call.args[1],
                                                          call.lit('ignore_label'))


def check_channel_axis(call: Call) -> None:
    """Refuses a batch normalization over other axes than all but the channel axis 1."""
    ndim = len(call.in_shape(0))
    if tuple(call.attr('axis')) != (0,) + tuple(range(2, ndim)):
        raise call.fail('torch normalizes over every axis but axis 1, got axis={}'.format(
            call.attr('axis')))


def _batch_normalization(call: Call) -> str:
    check_channel_axis(call)
    x, gamma, beta = call.args
    mean, var = call.attr('running_mean'), call.attr('running_var')
    if mean is None:    # no running statistics: batch statistics in either mode
        return 'functional.batch_norm({}, None, None, {}, {}, training=True, eps={})'.format(
            x, gamma, beta, call.lit('eps'))
    return ('functional.batch_norm({}, {}, {}, {}, {}, training=self.training, momentum={}, '
            'eps={})'.format(x, call.constant(mean), call.constant(var), gamma, beta,
                             literal(round(1 - float(call.attr('decay')), 12)), call.lit('eps')))


def _fixed_batch_normalization(call: Call) -> str:
    check_channel_axis(call)
    x, gamma, beta, mean, var = call.args
    return ('functional.batch_norm({}, {}, {}, {}, {}, training=False, eps={})'.format(
        x, mean, var, gamma, beta, call.lit('eps')))


def _group_normalization(call: Call) -> str:
    x, gamma, beta = call.args
    return 'functional.group_norm({}, {}, {}, {}, eps={})'.format(
        x, call.lit('groups'), gamma, beta, call.lit('eps'))


def _local_response_normalization(call: Call) -> str:
    n = call.attr('n')
    return 'functional.local_response_norm({}, {}, alpha={}, beta={}, k={})'.format(
        call.args[0], n, literal(float(call.attr('alpha')) * n), call.lit('beta'),
        call.lit('k'))


def _normalize_l2(call: Call) -> str:
    x = call.args[0]
    return '{x} / (torch.sqrt(torch.sum({x} * {x}, dim={axis}, keepdim=True)) + {eps})'.format(
        x=x, axis=literal(tuple(call.attr('axis'))), eps=call.lit('eps'))


def _pool_settings(call: Call) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    if call.attr('kh') is not None:
        return ((call.attr('kh'), call.attr('kw')), (call.attr('sy'), call.attr('sx')),
                (call.attr('ph'), call.attr('pw')))
    return tuple(call.attr('ksize')), tuple(call.attr('stride')), tuple(call.attr('pad'))


def _max_pooling(call: Call) -> str:
    ksize, stride, pad = _pool_settings(call)
    return 'functional.max_pool{}d({}, {}, stride={}, padding={}, ceil_mode={})'.format(
        len(ksize), call.args[0], literal(ksize), literal(stride), literal(pad),
        call.lit('cover_all'))


def _average_pooling(call: Call) -> str:
    ksize, stride, pad = _pool_settings(call)
    if call.attr('cover_all'):
        raise call.fail('cover_all=True has no torch average pooling')
    if call.attr('pad_value', 0) is None:
        return ('functional.avg_pool{}d({}, {}, stride={}, padding={}, count_include_pad=False)'
                .format(len(ksize), call.args[0], literal(ksize), literal(stride),
                        literal(pad)))
    return 'functional.avg_pool{}d({}, {}, stride={}, padding={})'.format(
        len(ksize), call.args[0], literal(ksize), literal(stride), literal(pad))


def _unpooling(call: Call) -> str:
    ksize, stride, pad = _pool_settings(call)
    return 'ops.unpooling_2d({}, {}, {}, {}, {})'.format(
        call.args[0], literal(ksize), literal(stride), literal(pad),
        literal((call.attr('outh'), call.attr('outw'))))


def _roi_pooling(call: Call) -> str:
    return 'ops.roi_pooling_2d({}, {}, {}, {})'.format(
        call.args[0], call.args[1], literal((call.attr('outh'), call.attr('outw'))),
        call.lit('spatial_scale'))


def _dropout(call: Call) -> str:
    return 'functional.dropout({}, {}, training=self.training)'.format(
        call.args[0], call.lit('dropout_ratio'))


def _softmax_cross_entropy(call: Call) -> str:
    if call.attr('soft_target_loss', 'cross-entropy') != 'cross-entropy' or \
            len(call.in_shape(1)) == len(call.in_shape(0)):
        raise call.fail('soft targets are not converted')
    weight = call.attr('class_weight')
    return ('ops.softmax_cross_entropy({}, {}, normalize={}, ignore_label={}, reduce={}, '
            'class_weight={})'.format(call.args[0], call.args[1], call.lit('normalize'),
                                      call.lit('ignore_label'), call.lit('reduce'),
                                      'None' if weight is None else call.constant(weight)))


LAYERS: dict[str, Entry] = {
    'LinearFunction': _linear,
    'Convolution2DFunction': _convolution_2d,
    'ConvolutionND': _convolution_nd,
    'Deconvolution2DFunction': _deconvolution,
    'DeconvolutionND': _deconvolution,
    'EmbedIDFunction': _embed_id,
    'BatchNormalization': _batch_normalization,
    'FixedBatchNormalization': _fixed_batch_normalization,
    'GroupNormalization': _group_normalization,
    'LocalResponseNormalization': _local_response_normalization,
    'NormalizeL2': _normalize_l2,
    'MaxPooling2D': _max_pooling,
    'MaxPoolingND': _max_pooling,
    'AveragePooling2D': _average_pooling,
    'AveragePoolingND': _average_pooling,
    'Unpooling2D': _unpooling,
    'ROIPooling2D': _roi_pooling,
    'Dropout': _dropout,
    'SoftmaxCrossEntropy': _softmax_cross_entropy,
    'LSTM': lambda call: 'ops.lstm({}, {})'.format(*call.args),
    'Gaussian': lambda call: 'ops.gaussian({}, {})'.format(*call.args),
}
