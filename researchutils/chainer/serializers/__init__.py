"""researchutils.chainer.serializers: npz model and snapshot helpers."""
from researchutils.chainer.serializers.npz import load_model  # NOQA
from researchutils.chainer.serializers.npz import load_model_from_snapshot  # NOQA
from researchutils.chainer.serializers.npz import load_snapshot  # NOQA
from researchutils.chainer.serializers.npz import save_model  # NOQA

__all__ = ['save_model', 'load_model', 'load_snapshot', 'load_model_from_snapshot']
