"""Data-parallel training in one process: one replica of a network per device.

:class:`DataParallelChainerNetwork` splits each batch along the batch axis, runs one replica per
chunk and concatenates the outputs on the output device. Its optimizer,
:class:`~researchutils.chainer.models.DataParallelChainerOptimizer`, lives in
:mod:`~researchutils.chainer.models.data_parallel_optimizer` (and is importable from here too,
Delira's path, with its two hooks): it sums the replicas' gradients into the master before the
update and brings the replicas to the master after it. Only the master is updated by
the optimizer, so training equals plain training on the full batch, except for layers whose
forward depends on the batch, such as BatchNormalization (each replica normalizes its own chunk;
the running statistics that are kept are the master's).

The replicas can never compute with other weights than the master's, whatever changed it (an
update, ``load_model(path, dp.module)``, ``copyparams``, a new ``.array``): a replica on the
master's device shares the master's parameter arrays, and every forward brings the replicas to
the master before they run (see :meth:`DataParallelChainerNetwork.synchronize_replicas`).

Tests: ``tests/chainer/models/test_data_parallel.py``.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import chainer
from chainer import backend

from researchutils._checks import check_devices, check_non_negative_int
from researchutils._typing import Array, DeviceSpec
from researchutils.chainer.models import _scatter_gather
from researchutils.chainer.models.abstract_network import AbstractChainerNetwork
from researchutils.chainer.models.data_parallel_optimizer import (  # noqa: F401 (Delira's path)
    DataParallelChainerOptimizer,
    ParallelOptimizerCumulateGradientsHook,
    ParallelOptimizerUpdateModelParameters,
)


class DataParallelChainerNetwork(AbstractChainerNetwork):
    """Run one replica of a network per device, each on a contiguous chunk of the batch.

    The first device holds the master replica (``module`` itself, moved there); the others hold
    copies. A forward pass splits every array and Variable in the arguments along
    ``batch_dim`` into chunks whose sizes differ by at most one (a batch smaller than the
    number of devices uses fewer replicas), runs each replica on its chunk and concatenates the
    outputs on ``output_device``. The copies across devices are differentiable, so a loss on
    the gathered output backpropagates into every replica; train it with
    :class:`DataParallelChainerOptimizer`, which sums the replicas' gradients into the master,
    updates the master and copies it back to the replicas.

    The wrapper presents the master only: :meth:`params` and :meth:`namedparams` yield the
    master's parameters (with the master's names), and :meth:`serialize` reads and writes the
    master's state, so checkpoints move freely between the wrapper (any device count) and the
    plain module. :meth:`cleargrads` and :meth:`zerograds` act on every replica.

    The replicas always compute with the master's weights, however they were changed: loading
    into the wrapper or into ``module`` (``load_model(path, dp.module)``), ``copyparams``,
    writing into or assigning a parameter's ``.array``, an update. A replica on the master's
    device shares the master's parameter arrays (no copy, and no way to disagree); one on
    another device gets a copy of them at the start of every forward that runs it (one
    transfer of the parameters per forward, as the update hook made before). Persistent values
    (BatchNormalization's running averages) are copied to every replica then too.

    Layers that mix samples of a batch see one chunk per replica: BatchNormalization in
    training mode normalizes each chunk with its own statistics, and the running averages that
    remain after an update are the master's (those of the first chunk), copied to every
    replica.

    Args:
        module (chainer.Link): The network; its ``forward`` is called once per chunk. An
            :class:`AbstractChainerNetwork` also lends its ``closure`` and ``prepare_batch``.
        devices (list): One device per replica, anything :func:`chainer.get_device` accepts
            (``'@numpy'``, ``'@cupy:0'``); a device may repeat, so several ``'@numpy'``
            replicas are valid.
        output_device: Where outputs are gathered; the first device by default.
        batch_dim (int): The axis along which inputs are split and outputs concatenated.

    Example:
        >>> import chainer.functions as F
        >>> import chainer.links as L
        >>> import numpy as np
        >>> class Net(AbstractChainerNetwork):
        ...     def __init__(self):
        ...         super().__init__()
        ...         with self.init_scope():
        ...             self.fc = L.Linear(3, 2)
        ...     def forward(self, x):
        ...         return {'pred': self.fc(x)}
        >>> model = DataParallelChainerNetwork(Net(), ['@numpy', '@numpy'])
        >>> model(np.ones((5, 3), np.float32))['pred'].shape
        (5, 2)
        >>> optimizer = DataParallelChainerOptimizer.from_optimizer_class(
        ...     chainer.optimizers.SGD, lr=0.1).setup(model)
        >>> batch = {'data': np.ones((4, 3), np.float32), 'y': np.zeros((4, 2), np.float32)}
        >>> _, loss_vals, _ = DataParallelChainerNetwork.closure(
        ...     model, batch, {'default': optimizer}, losses={'mse': F.mean_squared_error})
        >>> sorted(loss_vals)
        ['mse']
    """

    def __init__(self, module: chainer.Link, devices: Sequence[DeviceSpec],
                 output_device: DeviceSpec | None = None, batch_dim: int = 0) -> None:
        if not isinstance(module, chainer.Link):
            raise TypeError('module must be a chainer.Link, got {!r}'.format(
                type(module).__name__))
        if isinstance(devices, (str, bytes)) or not hasattr(devices, '__len__') or not devices:
            raise ValueError('devices must be a non-empty list of devices, got {!r}'.format(
                devices))
        batch_dim = check_non_negative_int(batch_dim, 'batch_dim', type_error=ValueError)
        resolved = _scatter_gather.to_devices(check_devices(devices, 'devices'), 'devices')
        output = resolved[0] if output_device is None else _scatter_gather.to_devices(
            [output_device], 'output_device')[0]
        super().__init__()
        module.to_device(resolved[0])
        with self.init_scope():
            self.module = module
        replicas: list[chainer.Link] = []
        for device in resolved[1:]:
            replica = module.copy(mode='copy')
            replica.to_device(device)
            replicas.append(replica)
        self._replicas = replicas
        self._devices = tuple(resolved)
        self._output_device = output
        self.batch_dim = batch_dim
        master_params = list(module.namedparams())
        master_links = list(module.namedlinks())
        # Parameter and Link objects keep their identity through lazy initialization and
        # device moves, so the pairs are found once.
        self._parameter_pairs: list[list[tuple[chainer.Parameter, chainer.Parameter]]] = []
        self._link_pairs: list[list[tuple[chainer.Link, chainer.Link]]] = []
        for replica in replicas:
            by_name = dict(replica.namedparams())
            self._parameter_pairs.append([(by_name[name], param) for name, param in master_params])
            links = dict(replica.namedlinks())
            self._link_pairs.append([(links[name], link) for name, link in master_links])
        self._synchronize(across_devices=True)
        # A network with a static prepare_batch of its own keeps it behind the wrapper.
        # An instance attribute over the class's static method, on purpose.
        self.prepare_batch = getattr(  # type: ignore[method-assign]
            type(module), 'prepare_batch', AbstractChainerNetwork.prepare_batch)

    @property
    def modules(self) -> tuple[chainer.Link, ...]:
        """tuple: The replicas, master first, one per device."""
        return (self.module,) + tuple(self._replicas)

    @property
    def devices(self) -> tuple[chainer.backend.Device, ...]:
        """tuple: The replicas' devices (:class:`chainer.backend.Device`), master's first."""
        return self._devices

    @property
    def output_device(self) -> chainer.backend.Device:
        """chainer.backend.Device: Where :meth:`forward` gathers the outputs."""
        return self._output_device

    @property
    def init_kwargs(self) -> dict[str, Any]:
        """dict: The wrapped module's ``init_kwargs`` (empty for a plain Link).

        The device layout is a run-time choice, so a saved experiment rebuilds the module.
        """
        return dict(getattr(self.module, 'init_kwargs', {}))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the replicas on chunks of the arguments and gather their outputs.

        Args:
            *args: Positional arguments of the module's ``forward``; arrays and Variables
                (also inside tuples, lists and dicts) are split along ``batch_dim``.
            **kwargs: Keyword arguments, split the same way.

        Returns:
            The module's output structure with its arrays concatenated on the output device.
        """
        scattered_args, scattered_kwargs = self._scatter(args, kwargs, self._devices,
                                                         self.batch_dim)
        modules = self.modules
        outputs = []
        for index, (chunk_args, chunk_kwargs) in enumerate(zip(scattered_args,
                                                               scattered_kwargs)):
            if index == 1:
                # After the master's chunk, so that parameters it initialized lazily are
                # there too: whatever changed the master since the last forward reaches the
                # replicas before they run.
                self.synchronize_replicas()
            outputs.append(modules[index](*chunk_args, **chunk_kwargs))
        return self._gather(outputs, self.batch_dim, self._output_device)

    @staticmethod
    def closure(model: chainer.Link, data_dict: dict[str, Array],
                optimizers: Mapping[str, chainer.Optimizer] | None,
                losses: Mapping[str, Callable[..., Any]] | None = {},  # noqa: B006
                metrics: Mapping[str, Callable[..., Any]] | None = {},  # noqa: B006
                fold: int = 0, **kwargs: Any
                ) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
        """One step, with the closure of the wrapped module's class.

        Args:
            model (DataParallelChainerNetwork): The wrapper to run.
            data_dict: As in :meth:`AbstractChainerNetwork.closure`.
            optimizers: As there.
            losses: As there.
            metrics: As there.
            fold: As there.
            **kwargs: As there.

        Returns:
            tuple: ``(metric_vals, loss_vals, preds)``, as the module's closure returns them.

        See the class's example for a training step.
        """
        module = getattr(model, 'module', None)
        closure = getattr(type(module), 'closure', AbstractChainerNetwork.closure)
        if closure is DataParallelChainerNetwork.closure:
            closure = AbstractChainerNetwork.closure
        return closure(model, data_dict, optimizers, losses, metrics, fold, **kwargs)

    # Delira's names for the splitting and gathering of the forward pass; see their module.
    _scatter = staticmethod(_scatter_gather.scatter)
    _gather = staticmethod(_scatter_gather.gather)

    def params(self, include_uninit: bool = True) -> Iterator[chainer.Parameter]:
        """Yield the master replica's parameters (see :meth:`chainer.Link.params`)."""
        return self.module.params(include_uninit)

    def namedparams(self, include_uninit: bool = True
                    ) -> Iterator[tuple[str, chainer.Parameter]]:
        """Yield the master's ``(name, parameter)`` pairs, named as in the plain module."""
        return self.module.namedparams(include_uninit)

    def cleargrads(self) -> None:
        """Clear the gradients of every replica."""
        for module in self.modules:
            module.cleargrads()

    def zerograds(self) -> None:
        """Fill the gradients of every replica with zeros."""
        for module in self.modules:
            module.zerograds()

    def serialize(self, serializer: chainer.AbstractSerializer) -> None:
        """Write or read the master's state, under the plain module's keys.

        After reading, the replicas are set to the loaded values.
        """
        self.module.serialize(serializer)
        if isinstance(serializer, chainer.Deserializer):
            self.synchronize_replicas()

    def cumulate_gradients(self) -> None:
        """Add every replica's gradients into the master's, on the master's device.

        What :class:`ParallelOptimizerCumulateGradientsHook` runs before each update. A
        replica's parameter without a gradient (it took no part in the step) is skipped; a
        master's parameter without one gets a copy of the first replica gradient it meets.

        Example:
            >>> import chainer.functions as F
            >>> import chainer.links as L
            >>> import numpy as np
            >>> model = DataParallelChainerNetwork(L.Linear(1, 1, nobias=True), ['@numpy'] * 2)
            >>> model.cleargrads()
            >>> F.sum(model(np.ones((4, 1), np.float32))).backward()
            >>> model.cumulate_gradients()
            >>> model.module.W.grad.tolist()
            [[4.0]]
        """
        for pairs in self._parameter_pairs:
            for replica_param, master_param in pairs:
                grad = replica_param.grad
                if grad is None:
                    continue
                grad = master_param.device.send(grad)
                if master_param.grad is None:
                    master_param.grad = grad.copy()
                else:
                    master_param.grad += grad

    def synchronize_replicas(self) -> None:
        """Bring every replica to the master's parameters and persistent values.

        A replica on the master's device is given the master's parameter arrays themselves
        (it then follows every later change for free); one on another device gets a copy.
        Persistent values are copied. :meth:`forward` runs this before the replicas run, and
        :meth:`serialize` after loading, so there is no need to call it by hand.

        Example:
            >>> import chainer.links as L
            >>> import numpy as np
            >>> model = DataParallelChainerNetwork(L.Linear(2, 1), ['@numpy'] * 2)
            >>> model.module.b.array = np.full(1, 3.0, np.float32)
            >>> model.synchronize_replicas()
            >>> model.modules[1].b.array.tolist()
            [3.0]
        """
        self._synchronize(across_devices=True)

    def _synchronize(self, across_devices: bool) -> None:
        """:meth:`synchronize_replicas`; ``across_devices=False`` leaves out the copies of
        parameters to replicas on other devices (the next forward makes them)."""
        array_types = chainer.get_array_types()
        for device, parameter_pairs, link_pairs in zip(
                self._devices[1:], self._parameter_pairs, self._link_pairs):
            for replica_param, master_param in parameter_pairs:
                array = master_param.array
                if array is None or replica_param.array is array:
                    continue
                if master_param.device == device:
                    if replica_param.array is None:
                        replica_param.initialize(array.shape)  # gives it a gradient slot
                    replica_param.array = array
                elif across_devices:
                    replica_param.copydata(master_param)
            # Never shared: BatchNormalization updates them in place in each replica.
            for replica_link, master_link in link_pairs:
                for name in master_link._persistent:
                    value = getattr(master_link, name)
                    target = getattr(replica_link, name)
                    if isinstance(value, array_types) and isinstance(target, array_types):
                        backend.copyto(target, value)
                    else:
                        setattr(replica_link, name, copy.deepcopy(value))
