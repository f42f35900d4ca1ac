"""researchutils.chainer.serializers: npz model and snapshot helpers (loaded on first use)."""
from researchutils._lazy import lazy_exports

_EXPORTS = {
    'npz': ['save_model', 'load_model', 'load_snapshot', 'load_model_from_snapshot'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
