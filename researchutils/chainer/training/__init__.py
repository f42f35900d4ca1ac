"""The unified training and prediction API: Parameters, Predictor, ChainerExperiment.

Trainer extensions such as SlackReport live in :mod:`researchutils.chainer.training.extensions`
and are imported only by the user. The names below are loaded on first use, so importing one
piece of this package (an extension, the search ranges) does not load the experiment.
"""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'experiment': ['ChainerExperiment'],
    'json_values': ['dumps_json', 'from_json_value', 'load_json', 'to_json_value'],
    'parameters': ['Parameters'],
    'predictor': ['Predictor', 'convert_to_numpy'],
    'references': ['model_package', 'object_reference', 'resolve_reference'],
    'search_space': ['FloatRange', 'IntRange'],
    'train_utils': ['atomic_write_text', 'create_optims_default_chainer'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.training.experiment import ChainerExperiment as ChainerExperiment
    from researchutils.chainer.training.json_values import dumps_json as dumps_json
    from researchutils.chainer.training.json_values import from_json_value as from_json_value
    from researchutils.chainer.training.json_values import load_json as load_json
    from researchutils.chainer.training.json_values import to_json_value as to_json_value
    from researchutils.chainer.training.parameters import Parameters as Parameters
    from researchutils.chainer.training.predictor import Predictor as Predictor
    from researchutils.chainer.training.predictor import convert_to_numpy as convert_to_numpy
    from researchutils.chainer.training.references import model_package as model_package
    from researchutils.chainer.training.references import object_reference as object_reference
    from researchutils.chainer.training.references import resolve_reference as resolve_reference
    from researchutils.chainer.training.search_space import FloatRange as FloatRange
    from researchutils.chainer.training.search_space import IntRange as IntRange
    from researchutils.chainer.training.train_utils import atomic_write_text as atomic_write_text
    from researchutils.chainer.training.train_utils import (
        create_optims_default_chainer as create_optims_default_chainer,
    )
