"""The unified training and prediction API: Parameters, Predictor, ChainerExperiment.

Trainer extensions such as SlackReport live in :mod:`researchutils.chainer.training.extensions`
and are imported only by the user.
"""
from researchutils.chainer.training.experiment import ChainerExperiment
from researchutils.chainer.training.json_values import (
    dumps_json,
    from_json_value,
    load_json,
    to_json_value,
)
from researchutils.chainer.training.parameters import Parameters
from researchutils.chainer.training.predictor import Predictor, convert_to_numpy
from researchutils.chainer.training.references import (
    model_package,
    object_reference,
    resolve_reference,
)
from researchutils.chainer.training.search_space import FloatRange, IntRange
from researchutils.chainer.training.train_utils import (
    atomic_write_text,
    create_optims_default_chainer,
)

__all__ = [
    'ChainerExperiment',
    'FloatRange',
    'IntRange',
    'Parameters',
    'Predictor',
    'atomic_write_text',
    'convert_to_numpy',
    'create_optims_default_chainer',
    'dumps_json',
    'from_json_value',
    'load_json',
    'model_package',
    'object_reference',
    'resolve_reference',
    'to_json_value',
]
