"""The Experiment protocol: what the experiment's machinery reads of a ChainerExperiment.

The machinery's modules (``settings``, ``tracking``, ``trainer``, ``model_selection``, the
search) type the experiments they are given by :class:`Experiment`, not by
``ChainerExperiment``, whose module imports them; living apart from all of them, it makes
no import circle. Its attributes are the rows of ``settings.SETTINGS``; a test holds the
two to the same names. Tests: ``tests/chainer/training/_experiment/test_protocol.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import chainer

from researchutils.chainer.training._experiment import checks
from researchutils.chainer.training.parameters import Parameters

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from researchutils.chainer.data_loading import DataManager


class Experiment(Protocol):
    """What the experiment's machinery reads of a ChainerExperiment (which is one): the
    settings of ``settings.SETTINGS`` as their checks keep them, its folder, ``run`` and ``test``.

    The machinery types its experiments by this, not by the class, whose module imports it.
    """

    params: Parameters
    model_cls: type[chainer.Link]
    n_epochs: int | None
    name: str
    save_path: str
    key_mapping: dict[str, str] | None
    val_score_key: str | None
    optim_builder: checks.OptimBuilder
    checkpoint_freq: int
    gpu_ids: list[int | str]
    val_score_mode: str
    comm: Any  # a ChainerMN communicator or None
    extensions: list[Any]  # Chainer extensions or (extension, trigger) pairs
    seed: int | None
    stop_on_non_number: bool
    preemption_snapshot: bool
    tracking: dict[str, Any] | None
    wait_for_folder: float

    @property
    def output_dir(self) -> str: ...

    def run(self, train: DataManager, val: DataManager | None = None) -> chainer.Link: ...

    def test(self, network: chainer.Link, test_data: DataManager,
             metrics: dict[str, Callable[..., Any]],
             metric_keys: dict[str, Sequence[str]] | None = None, verbose: bool = False
             ) -> tuple[dict[str, NDArray[Any]], dict[str, float]]: ...
