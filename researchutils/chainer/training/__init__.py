"""The unified training and prediction API: Parameters, Predictor, ChainerExperiment.

Trainer extensions such as SlackReport live in :mod:`researchutils.chainer.training.extensions`
and are imported only by the user. The names below are loaded on first use, so importing one
piece of this package (an extension, the search ranges) does not load the experiment.
"""
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
