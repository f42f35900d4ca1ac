"""Where Chainer weights come from: a live link, a model file, or a Trainer snapshot.

Each is opened as a :class:`Source`: the shape and dtype of every array under a prefix (read
before any array is, so that every check can be made before anything is loaded), and the
arrays themselves on demand. Files are read by the npz loader's own reader
(:mod:`researchutils.chainer.serializers`), never unpickling; a snapshot's model is the one a
Trainer's StandardUpdater saves under ``updater/model:main/``.

Tests: ``tests/pytorch/weights/test_loading.py``.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import chainer
import numpy
from chainer.serializers import DictionarySerializer

from researchutils._checks import check_path
from researchutils.chainer.serializers import _safe_npz

#: Where a Trainer snapshot keeps the model of the updater's optimizer 'main'.
SNAPSHOT_MODEL_KEY = 'updater/model:main/'


class Source(object):
    """Arrays by Chainer key (relative to ``prefix``): shape and dtype first, data on demand.

    ``specs[key]`` is ``(shape, dtype)``, or None for a parameter never initialized (Chainer's
    None); ``read(key)`` returns the array. ``what`` names the source in messages.
    """

    def __init__(self, what: str, specs: dict[str, tuple[tuple[int, ...], Any] | None],
                 read: Callable[[str], Any]) -> None:
        self.what = what
        self.specs = specs
        self.read = read


def _link_arrays(link: Any) -> dict[str, Any]:
    serializer = DictionarySerializer()
    serializer.save(link)
    return {key: chainer.backend.CpuDevice().send(value)
            for key, value in serializer.target.items()}


def _under(keys: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {key[len(prefix):]: value for key, value in keys.items() if key.startswith(prefix)}


def _model_prefixes(keys: Any) -> list[str]:
    return sorted({key[:key.index('/', key.index('model:')) + 1] for key in keys
                   if 'model:' in key and '/' in key[key.index('model:'):]})


@contextlib.contextmanager
def open_source(source: Any, key: str | None) -> Iterator[Source]:
    """``source`` (a chainer.Link or the path of an npz file) as a :class:`Source` of the
    arrays under ``key``; ``key`` None takes a snapshot's model, or a model file whole.

    Raises:
        TypeError: ``source`` is neither; ``key`` is not a str or None.
        KeyError: Nothing is under ``key`` (the message lists the models a snapshot holds).
        ValueError, FileNotFoundError: The file cannot be read (named).
    """
    if key is not None and not isinstance(key, str):
        raise TypeError('key must be a str or None, got {!r}'.format(key))
    if key and not key.endswith('/'):
        key += '/'
    if isinstance(source, chainer.Link):
        arrays = _link_arrays(source)
        yield _chosen(Source('the link {}'.format(type(source).__name__), {
            name: None if value.dtype == object else (tuple(value.shape), value.dtype)
            for name, value in arrays.items()}, arrays.__getitem__), key)
        return
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError('source must be a chainer.Link or the path of an npz file (a model '
                        'file or a Trainer snapshot), got {!r}'.format(source))
    path = check_path(source, 'source')
    if not os.path.exists(path):
        raise FileNotFoundError('source {!r} does not exist'.format(path))
    with _safe_npz.open_archive(path) as archive:
        yield _chosen(Source(repr(path), {
            name: None if shape is None else (tuple(shape), archive.dtypes[name])
            for name, shape in archive.shapes.items()}, archive.__getitem__), key)


def _chosen(source: Source, key: str | None) -> Source:
    """``source`` narrowed to the arrays under ``key`` (see :func:`open_source`)."""
    if key is None:
        key = SNAPSHOT_MODEL_KEY if any(name.startswith(SNAPSHOT_MODEL_KEY)
                                        for name in source.specs) else ''
    if not key:
        return source
    specs = _under(source.specs, key)
    if not specs:
        raise KeyError('{} has no arrays under {!r}; the models it holds are under {}'.format(
            source.what, key, _model_prefixes(source.specs) or 'no "model:" key'))
    read = source.read
    return Source('{} (under {!r})'.format(source.what, key), specs,
                  lambda name: read(key + name))


def kind_fits(array_dtype: Any, tensor_dtype: Any) -> bool:
    """Whether a Chainer array of ``array_dtype`` may fill a tensor of ``tensor_dtype``:
    the same kind (floats to floats, integers to integers), as the npz loader casts."""
    kind = numpy.dtype(array_dtype).kind
    if tensor_dtype.is_floating_point:
        return kind == 'f'
    if tensor_dtype.is_complex:
        return kind == 'c'
    return kind in 'iu' if str(tensor_dtype) != 'torch.bool' else kind == 'b'
