"""The default optimizer builder of ChainerExperiment, and atomic text files.

:func:`create_optims_default_chainer` keeps Delira's import path
(``researchutils.chainer.training.train_utils.create_optims_default_chainer``). The trust
rules of references that lived here are in
:mod:`~researchutils.chainer.training.references`; ``object_reference``,
``resolve_reference`` and ``model_package`` still import from here too. Its tests are in
``tests/chainer/training/test_train_utils.py``.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import chainer

from researchutils import _files
from researchutils._checks import check_path


def create_optims_default_chainer(model: chainer.Link, optim_cls: type[chainer.Optimizer],
                                  **optim_params: Any) -> dict[str, chainer.Optimizer]:
    """Builds the optimizers of an experiment: one ``optim_cls`` over the whole model.

    A :class:`~researchutils.chainer.models.DataParallelChainerNetwork` gets a
    :class:`~researchutils.chainer.models.DataParallelChainerOptimizer`, so the
    replicas' gradients are summed and their parameters kept equal.

    Args:
        model (chainer.Link): The model to optimize.
        optim_cls (type): A :class:`chainer.Optimizer` subclass, for instance
            ``chainer.optimizers.Adam``.
        **optim_params: Hyper-parameters of ``optim_cls`` (``alpha=1e-3``...).

    Returns:
        dict: ``{"default": optimizer}``, the optimizer set up on ``model``.

    Raises:
        TypeError: ``model`` is not a Link, ``optim_cls`` is not a Chainer optimizer
            class, or it does
            not take ``optim_params`` (the message names them).

    Example:
        >>> import chainer.links as L
        >>> optims = create_optims_default_chainer(L.Linear(2, 1), chainer.optimizers.SGD, lr=0.1)
        >>> optims["default"].lr
        0.1
    """
    if not isinstance(model, chainer.Link):
        raise TypeError('model must be a chainer.Link, got {!r}'.format(model))
    if not (isinstance(optim_cls, type) and issubclass(optim_cls, chainer.Optimizer)):
        raise TypeError('optimizer_cls (optim_cls) must be a Chainer optimizer class such as '
                        'chainer.optimizers.Adam, got {!r}'.format(optim_cls))
    data_parallel = sys.modules.get('researchutils.chainer.models.data_parallel')
    try:
        if data_parallel is not None and isinstance(model,
                                                    data_parallel.DataParallelChainerNetwork):
            optimizer = data_parallel.DataParallelChainerOptimizer.from_optimizer_class(
                optim_cls, **optim_params)
        else:
            optimizer = optim_cls(**optim_params)
    except TypeError as error:
        raise TypeError('optimizer_params {!r} do not fit {}: {}'.format(
            optim_params, optim_cls.__name__, error)) from error
    optimizer.setup(model)
    return {'default': optimizer}


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` to ``path`` atomically (a temporary file, then ``os.replace``).

    The same writer as :func:`researchutils.files.write_text_to_file`, which
    needs the folder to exist.

    Args:
        path (str): The file to write; its folder is created when missing.
        text (str): The content, written as UTF-8.

    Raises:
        TypeError: ``text`` is not a str, or ``path`` not a str or an ``os.PathLike``.
        ValueError: ``path`` holds a NUL byte.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), 'settings.json')
        >>> atomic_write_text(path, '{}')
        >>> with open(path) as stream:
        ...     stream.read()
        '{}'
    """
    path = check_path(path, 'path')
    if not isinstance(text, str):
        raise TypeError('text must be a str, got {}'.format(type(text).__name__))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _files.write_text(path, text)


# Names that moved to the references module keep their import path here; looked up on use,
# since that module imports this one (the default builder is a trusted optim_builder).
_MOVED_TO_REFERENCES = ('model_package', 'object_reference', 'resolve_reference')


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_REFERENCES:
        from researchutils.chainer.training import references
        return getattr(references, name)
    raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, name))


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_MOVED_TO_REFERENCES))
