"""write_source: the file passes the real ruff, imports only torch and researchutils.pytorch,
and read back with the Chainer weights gives the converted module's results; the file is
written atomically, a path that cannot be written is named before the model runs."""
from __future__ import annotations

import ast
import os
from typing import Any

import chainer
import chainer.functions as F
import numpy
import pytest

from researchutils.pytorch import convert, write_source
from tests.pytorch.tracing import models
from tests.pytorch.tracing.equality import check_ruff, compare, read_back


def _x(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.RandomState(seed).uniform(-1, 1, shape).astype(numpy.float32)


def _imports(text: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or '')
    return found


def test_written_mlp_passes_ruff_and_equals_chainer_read_back(tmp_path: Any) -> None:
    model = models.MLP()
    module = convert(model, _x(2, 5))
    path = str(tmp_path / 'mlp.py')
    text = write_source(module, path)
    with open(path) as file:
        assert file.read() == text
    check_ruff(path)
    assert {name.split('.')[0] for name in _imports(text)} == {'torch'}
    assert 'self.l1 = torch.nn.Linear(5, 8, bias=True)' in text
    compare(model, read_back(path, 'MLP', model), [_x(4, 5, seed=2)])


def test_written_from_the_model_is_the_converted_source(tmp_path: Any) -> None:
    model = models.MLP()
    path = str(tmp_path / 'mlp.py')
    text = write_source(model, path, _x(2, 5))
    assert text == write_source(convert(model, _x(2, 5)), str(tmp_path / 'again.py'))


def test_helpers_come_from_researchutils_pytorch_only(tmp_path: Any) -> None:
    class Embed(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.embed = chainer.links.EmbedID(5, 3, ignore_label=-1)

        def forward(self, t: Any) -> Any:
            return F.lstm(self.embed(t), F.concat([self.embed(t)] * 4))[1]

    model = Embed()
    t = numpy.array([0, 4, -1], numpy.int32)
    path = str(tmp_path / 'embed.py')
    text = write_source(model, path, t)
    check_ruff(path)
    assert 'researchutils.pytorch.tracing' in _imports(text)
    assert _imports(text) <= {'torch', 'torch.nn', 'researchutils.pytorch.tracing'}
    compare(model, read_back(path, 'Embed', model), [t])


class _Counting(models.MLP):
    calls = 0

    def forward(self, x: Any) -> Any:
        type(self).calls += 1
        return super().forward(x)


def test_unwritable_path_is_named_before_the_model_runs(tmp_path: Any) -> None:
    model = _Counting()
    missing = str(tmp_path / 'no' / 'model.py')
    with pytest.raises(FileNotFoundError, match='no.*does not exist') as raised:
        write_source(model, missing, _x(2, 5))
    assert raised.value.filename == missing
    with pytest.raises(IsADirectoryError) as raised:
        write_source(model, str(tmp_path), _x(2, 5))
    assert raised.value.filename == str(tmp_path)
    assert _Counting.calls == 0


def test_a_failed_conversion_leaves_the_existing_file_whole(tmp_path: Any) -> None:
    class Summed(models.MLP):
        def forward(self, x: Any) -> Any:
            return F.cumsum(super().forward(x), axis=1)

    class Unknown(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.inner = Summed()

        def forward(self, x: Any) -> Any:
            return F.erf(self.inner(x))

    path = tmp_path / 'model.py'
    path.write_text('kept\n')
    with pytest.raises(ValueError, match=r'Cumsum \(called in /inner \(Summed\)\); '
                                         r'Erf \(called in / \(Unknown\)\)'):
        write_source(Unknown(), str(path), _x(2, 5))
    assert path.read_text() == 'kept\n'
    assert os.listdir(tmp_path) == ['model.py']


def test_write_error_names_the_path(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    module = convert(models.MLP(), _x(2, 5))
    path = tmp_path / 'model.py'
    path.write_text('kept\n')

    def full(*args: Any) -> None:
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(os, 'fsync', full)
    with pytest.raises(OSError, match='No space') as raised:
        write_source(module, str(path))
    assert any(str(path) in note for note in raised.value.__notes__)
    assert path.read_text() == 'kept\n'
    assert os.listdir(tmp_path) == ['model.py']


@pytest.mark.parametrize('bad, error, words', [
    (dict(path=3), TypeError, 'path'),
    (dict(module_or_model=object()), TypeError, 'module_or_model'),
    (dict(module_or_model=__import__('torch').nn.Linear(2, 2)), TypeError, 'Linear'),
    (dict(args=None), ValueError, 'args'),
])
def test_bad_arguments_are_named(tmp_path: Any, bad: dict[str, Any], error: type,
                                 words: str) -> None:
    arguments = dict(module_or_model=models.MLP(), path=str(tmp_path / 'a.py'),
                     args=_x(2, 5))
    arguments.update(bad)
    with pytest.raises(error, match=words):
        write_source(**arguments)


def test_constants_the_forward_makes_are_written_into_the_file(tmp_path: Any) -> None:
    offsets = numpy.random.RandomState(7).uniform(-1, 1, (4, 30)).astype(numpy.float32)

    class Offset(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.l1 = chainer.links.Linear(5, 30)

        def forward(self, x: Any) -> Any:
            return self.l1(x) * offsets + numpy.ones((4, 30), numpy.float32)

    model = Offset()
    path = str(tmp_path / 'offset.py')
    text = write_source(model, path, _x(4, 5))
    assert 'torch.full((4, 30), 1.0' in text
    check_ruff(path)
    compare(model, read_back(path, 'Offset', model), [_x(4, 5, seed=3)])
