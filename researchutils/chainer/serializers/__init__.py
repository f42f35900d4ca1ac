"""researchutils.chainer.serializers: npz model and snapshot helpers (loaded on first use)."""
from typing import TYPE_CHECKING

from researchutils._lazy import lazy_exports

_EXPORTS = {
    'npz': ['save_model', 'load_model', 'load_snapshot', 'load_model_from_snapshot'],
}
__all__, __getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # the table above, for type checkers and IDEs
    from researchutils.chainer.serializers.npz import load_model as load_model
    from researchutils.chainer.serializers.npz import (
        load_model_from_snapshot as load_model_from_snapshot,
    )
    from researchutils.chainer.serializers.npz import load_snapshot as load_snapshot
    from researchutils.chainer.serializers.npz import save_model as save_model
