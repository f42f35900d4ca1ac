"""save_model / load_model / load_snapshot / load_model_from_snapshot on real files."""
import errno
import fcntl
import gc
import os
import re
import stat
import subprocess
import sys
import tracemalloc
import zipfile

import chainer
import chainer.links as L
import numpy
import pytest
from chainer.serializers import npz as chainer_npz
from chainer.training import extensions

from researchutils import _files
from researchutils.chainer import serializers
from researchutils.chainer.serializers import _safe_npz, npz
from tests.support.tiny_training import make_model, make_trainer


def _parameters(model):
    return {name: param.array.copy() for name, param in model.namedparams()}


def _assert_same_parameters(a, b):
    pa, pb = _parameters(a), _parameters(b)
    assert sorted(pa) == sorted(pb)
    for name in pa:
        numpy.testing.assert_array_equal(pa[name], pb[name])


def _assert_points_at_the_caller(warning):
    """The warning names the line that called the loader, in this file (its stacklevel).

    Under mutation testing (tools/mutation.py) mutmut's trampolines stand between the two,
    adding frames, so there it cannot be seen.
    """
    if 'MUTANT_UNDER_TEST' not in os.environ:
        assert warning.filename == __file__


def _folder_entries(folder):
    return sorted(os.listdir(folder))


# save_model -----------------------------------------------------------------

def test_save_model_writes_arrays_readable_by_numpy(tmp_path):
    model = make_model(seed=3)
    path = tmp_path / 'model.npz'
    serializers.save_model(str(path), model)
    with numpy.load(str(path)) as archive:
        numpy.testing.assert_array_equal(archive['predictor/W'], model.predictor.W.array)
        numpy.testing.assert_array_equal(archive['predictor/b'], model.predictor.b.array)


def test_save_model_creates_missing_parent_folders(tmp_path):
    path = tmp_path / 'a' / 'b' / 'model.npz'
    serializers.save_model(path, make_model())
    assert path.is_file()


def test_save_model_under_a_file_names_the_path_and_the_file(tmp_path):
    (tmp_path / 'runs').write_text('a file, not a folder')
    path = tmp_path / 'runs' / 'model.npz'
    with pytest.raises(NotADirectoryError, match="model.npz.*'.*runs' is a file") as raised:
        serializers.save_model(str(path), make_model())
    assert raised.value.errno == errno.ENOTDIR
    assert _folder_entries(tmp_path) == ['runs']


def test_save_model_two_levels_under_a_file_names_the_file(tmp_path):
    (tmp_path / 'runs').write_text('a file, not a folder')
    path = tmp_path / 'runs' / 'day1' / 'model.npz'
    with pytest.raises(NotADirectoryError, match="model.npz.*'.*runs' is a file"):
        serializers.save_model(str(path), make_model())


def test_save_model_refuses_existing_path_and_leaves_it_untouched(tmp_path):
    path = tmp_path / 'model.npz'
    path.write_bytes(b'precious')
    with pytest.raises(ValueError, match='model.npz.*already exists'):
        serializers.save_model(str(path), make_model())
    assert path.read_bytes() == b'precious'
    assert _folder_entries(tmp_path) == ['model.npz']


def test_save_model_on_an_existing_file_names_the_way_to_replace_it(tmp_path):
    path = tmp_path / 'model.npz'
    path.write_bytes(b'old')
    with pytest.raises(ValueError, match=r'pass overwrite=True to replace it'):
        serializers.save_model(str(path), make_model())


@pytest.mark.parametrize('overwrite', [False, True])
def test_save_model_to_a_folder_calls_it_a_folder(tmp_path, overwrite):
    folder = tmp_path / 'models'
    folder.mkdir()
    with pytest.raises(ValueError) as raised:
        serializers.save_model(str(folder), make_model(), overwrite=overwrite)
    message = str(raised.value)
    assert "'{}' is a folder".format(folder) in message
    assert 'already exists' not in message
    assert os.path.join(str(folder), 'model.npz') in message  # a file's path to give instead
    assert _folder_entries(folder) == []


def test_save_model_with_overwrite_replaces_an_existing_file_with_the_new_weights(tmp_path):
    # What BestModelSaver and the experiment's final model do (it was
    # training/_model_files.replace_model).
    path = str(tmp_path / 'best_model.npz')
    first, second = make_model(seed=1), make_model(seed=2)
    serializers.save_model(path, first, overwrite=True)
    serializers.save_model(path, second, overwrite=True)
    with numpy.load(path) as saved:
        numpy.testing.assert_array_equal(saved['predictor/W'], second.predictor.W.array)
    assert _folder_entries(tmp_path) == ['best_model.npz']


def test_save_model_with_overwrite_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = str(tmp_path / 'best_model.npz')
    serializers.save_model(path, make_model(), overwrite=True)
    os.chmod(path, 0o640)
    serializers.save_model(path, make_model(), overwrite=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_save_model_refuses_an_overwrite_that_is_not_a_bool(tmp_path):
    with pytest.raises(TypeError, match="^overwrite must be True or False, got 'yes'"):
        serializers.save_model(str(tmp_path / 'model.npz'), make_model(), overwrite='yes')


def test_file_created_by_another_process_during_the_save_is_never_overwritten(
        tmp_path, monkeypatch):
    path = tmp_path / 'model.npz'
    real_save = npz.chainer_npz.save_npz

    def save_while_someone_else_writes(file, obj, compression=True):
        path.write_bytes(b'written by someone else')
        real_save(file, obj, compression=compression)

    monkeypatch.setattr(npz.chainer_npz, 'save_npz', save_while_someone_else_writes)
    with pytest.raises(ValueError, match=r"'.*model\.npz' was created by someone else"):
        serializers.save_model(str(path), make_model())
    assert path.read_bytes() == b'written by someone else'
    assert _folder_entries(tmp_path) == ['model.npz']


@pytest.mark.parametrize('overwrite', [False, True])
def test_no_free_temporary_name_is_an_oserror_not_a_file_made_by_someone_else(
        tmp_path, monkeypatch, overwrite):
    # Every name the writer draws is taken, by a live writer (it holds the file's lock):
    # the folder cannot hold the save.
    path = tmp_path / 'model.npz'
    monkeypatch.setattr(_files.secrets, 'token_hex', lambda n: 'ab' * n)
    taken = tmp_path / '.model.npz.{}.tmp'.format('ab' * 6)
    with open(taken, 'wb') as live_writer:
        fcntl.flock(live_writer, fcntl.LOCK_EX)
        with pytest.raises(OSError) as raised:
            serializers.save_model(str(path), L.Linear(2, 3), overwrite=overwrite)
    assert not isinstance(raised.value, ValueError)
    assert raised.value.errno == errno.EEXIST
    assert 'model.npz' in str(raised.value) and 'temporary' in str(raised.value)
    assert not path.exists()


def test_save_model_leaves_no_temporary_file(tmp_path):
    serializers.save_model(str(tmp_path / 'model.npz'), make_model())
    assert _folder_entries(tmp_path) == ['model.npz']


class _DiskFullAfter(object):
    """A file whose writes fail with ENOSPC once ``capacity`` bytes are written."""

    def __init__(self, file, capacity):
        self._file = file
        self._capacity = capacity

    def write(self, data):
        if self._file.tell() + len(data) > self._capacity:
            room = max(0, self._capacity - self._file.tell())
            self._file.write(bytes(data[:room]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._file.close()


# numpy.savez leaves its ZipFile to the garbage collector after a failed write.
@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')
def test_full_disk_mid_write_leaves_no_partial_or_temporary_file(tmp_path, monkeypatch):
    open_temporary = _files.open_temporary
    written = []

    def open_small_disk(folder, name):
        file, temporary_path = open_temporary(folder, name)
        written.append(temporary_path)
        return _DiskFullAfter(file, capacity=200), temporary_path

    monkeypatch.setattr(_files, 'open_temporary', open_small_disk)
    path = tmp_path / 'model.npz'
    with pytest.raises(OSError, match='model.npz') as info:
        serializers.save_model(str(path), L.Linear(50, 50))
    assert info.value.errno == errno.ENOSPC
    assert os.strerror(errno.ENOSPC) in str(info.value)  # why, in words
    assert written, 'the write went through the temporary file'
    assert _folder_entries(tmp_path) == []
    del info  # its traceback holds numpy's ZipFile; collect it inside this test
    gc.collect()


# numpy.savez leaves its ZipFile to the garbage collector after a failed write.
@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')
def test_full_disk_while_overwriting_keeps_the_old_model_whole(tmp_path, monkeypatch):
    path = tmp_path / 'best_model.npz'
    old = L.Linear(50, 50)
    serializers.save_model(str(path), old, overwrite=True)
    before = path.read_bytes()
    open_temporary = _files.open_temporary
    monkeypatch.setattr(_files, 'open_temporary', lambda folder, name: (
        lambda opened: (_DiskFullAfter(opened[0], capacity=200), opened[1]))(
            open_temporary(folder, name)))
    with pytest.raises(OSError, match='best_model.npz') as info:
        serializers.save_model(str(path), L.Linear(50, 50), overwrite=True)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == before
    assert _folder_entries(tmp_path) == ['best_model.npz']
    del info
    gc.collect()


def test_file_size_limit_of_the_os_mid_write_leaves_nothing_behind(tmp_path):
    # A real kernel refusal (RLIMIT_FSIZE gives EFBIG) in a child process.
    code = (
        'import resource, sys\n'
        'import chainer.links as L\n'
        'from researchutils.chainer.serializers import save_model\n'
        'resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n'
        'try:\n'
        '    save_model(sys.argv[1], L.Linear(100, 100))\n'
        'except OSError as e:\n'
        '    print("OSError", e.errno)\n'
    )
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path / 'model.npz')],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    assert out.split() == ['OSError', str(errno.EFBIG)]
    assert _folder_entries(tmp_path) == []


@pytest.mark.parametrize('umask', [0o022, 0o077])
def test_saved_model_follows_the_umask_like_chainers_save_npz(tmp_path, umask):
    previous = os.umask(umask)
    try:
        serializers.save_model(str(tmp_path / 'ours.npz'), make_model())
        chainer_npz.save_npz(str(tmp_path / 'chainers.npz'), make_model())
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(str(tmp_path / 'ours.npz')).st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(str(tmp_path / 'chainers.npz')).st_mode) == 0o666 & ~umask


def test_save_model_rejects_a_non_link_naming_the_argument_and_its_value(tmp_path):
    value = object()
    with pytest.raises(TypeError, match='^model must be') as raised:
        serializers.save_model(str(tmp_path / 'x.npz'), value)
    assert repr(value) in str(raised.value)


def test_save_model_rejects_a_non_path(tmp_path):
    with pytest.raises(TypeError, match='^path must be a path .*got 3$'):
        serializers.save_model(3, make_model())


# load_model -----------------------------------------------------------------

def test_load_model_restores_saved_parameters_and_returns_the_model(tmp_path):
    saved = make_model(seed=1)
    serializers.save_model(str(tmp_path / 'model.npz'), saved)
    fresh = make_model(seed=2)
    loaded = serializers.load_model(str(tmp_path / 'model.npz'), fresh)
    assert loaded is fresh
    _assert_same_parameters(loaded, saved)


def test_load_model_of_missing_file_warns_once_and_returns_model_unchanged(tmp_path):
    model = make_model(seed=1)
    before = _parameters(model)
    path = str(tmp_path / 'absent.npz')
    with pytest.warns(UserWarning) as record:
        assert serializers.load_model(path, model) is model
    assert len(record) == 1
    assert path in str(record[0].message)
    # It names what is left unchanged, and points at the caller's line.
    assert re.search(r'\bmodel\b', str(record[0].message).replace(path, ''))
    assert 'None' not in str(record[0].message)
    _assert_points_at_the_caller(record[0])
    for name, value in before.items():
        numpy.testing.assert_array_equal(_parameters(model)[name], value)


def test_load_model_of_truncated_file_names_the_file(tmp_path):
    path = tmp_path / 'model.npz'
    serializers.save_model(str(path), make_model())
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match='model.npz.*(truncated|corrupt)'):
        serializers.load_model(str(path), make_model())


def test_load_model_of_corrupt_array_data_names_the_file(tmp_path):
    path = tmp_path / 'model.npz'
    serializers.save_model(str(path), L.Linear(20, 20), compression=False)
    with zipfile.ZipFile(str(path)) as archive:
        info = archive.getinfo('W.npy')
    data = bytearray(path.read_bytes())
    # Flip bytes inside W's stored data; the zip directory stays intact.
    start = info.header_offset + 30 + len(info.filename) + 200
    data[start:start + 16] = bytes(255 - b for b in data[start:start + 16])
    path.write_bytes(bytes(data))
    model = L.Linear(20, 20)
    before = _parameters(model)
    with pytest.raises(ValueError, match='model.npz.*(truncated or corrupt).*CRC'):
        serializers.load_model(str(path), model)
    for name, value in before.items():  # all or nothing: b was not loaded either
        numpy.testing.assert_array_equal(_parameters(model)[name], value)


def test_load_model_of_non_npz_file_names_the_file(tmp_path):
    path = tmp_path / 'notes.txt'
    path.write_text('not an archive')
    with pytest.raises(ValueError, match='notes.txt.*not a readable npz'):
        serializers.load_model(str(path), make_model())


def test_load_model_of_a_directory_says_it_is_a_folder(tmp_path):
    folder = tmp_path / 'model.npz'
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match='model.npz.* is a folder, not an npz file'):
        serializers.load_model(str(folder), make_model())


def test_load_model_of_empty_file_names_the_file(tmp_path):
    path = tmp_path / 'empty.npz'
    path.write_bytes(b'')
    with pytest.raises(ValueError, match='empty.npz'):
        serializers.load_model(str(path), make_model())


def test_load_model_with_wrong_architecture_names_file_and_array(tmp_path):
    serializers.save_model(str(tmp_path / 'model.npz'), L.Linear(3, 2))
    with pytest.raises(ValueError, match="model.npz.*'W'"):
        serializers.load_model(str(tmp_path / 'model.npz'), L.Linear(4, 2))


@pytest.mark.parametrize('saved, loaded', [
    ((3, 1), (3, 2)),   # W (1, 3) broadcasts into (2, 3): NumPy would copy one row twice
    ((1, 2), (3, 2)),   # W (2, 1) broadcasts along the input axis
    ((3, 2), (3, 3)),   # b (2,) into (3,): fewer elements, not broadcastable
])
def test_load_model_refuses_an_array_of_another_shape_naming_file_key_and_shapes(
        tmp_path, saved, loaded):
    path = str(tmp_path / 'small.npz')
    serializers.save_model(path, L.Linear(*saved))
    model = L.Linear(*loaded)
    before = _parameters(model)
    with pytest.raises(ValueError) as raised:
        serializers.load_model(path, model)
    message = str(raised.value)
    assert 'small.npz' in message
    # Whichever refused array the message names, it gives both of its shapes.
    shapes = {'W': ((saved[1], saved[0]), (loaded[1], loaded[0])),
              'b': ((saved[1],), (loaded[1],))}
    named = [key for key, (in_file, in_model) in shapes.items()
             if in_file != in_model and "array '{}' has shape {}".format(key, in_file)
             in message and 'shape {} of the model'.format(in_model) in message]
    assert named, message
    _assert_unchanged(model, before)


def _assert_unchanged(model, before):
    after = _parameters(model)
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        numpy.testing.assert_array_equal(after[name], value)


def test_load_model_refuses_an_array_whose_dtype_does_not_cast_to_the_models(tmp_path):
    path = str(tmp_path / 'complex.npz')
    arrays = _model_arrays(L.Linear(3, 2))
    arrays['W'] = arrays['W'].astype(numpy.complex64)
    numpy.savez(path, **arrays)
    model = L.Linear(3, 2)
    before = _parameters(model)
    with pytest.raises(ValueError, match=r"complex\.npz.*'W'.*<c8"):
        serializers.load_model(path, model)
    _assert_unchanged(model, before)


def test_a_wider_float_than_the_parameter_loads_cast_as_chainer_does(tmp_path):
    path = str(tmp_path / 'double.npz')
    arrays = _model_arrays(L.Linear(3, 2))
    numpy.savez(path, **{key: value.astype(numpy.float64) for key, value in arrays.items()})
    model = serializers.load_model(path, L.Linear(3, 2))
    assert model.W.dtype == numpy.float32
    numpy.testing.assert_array_equal(model.W.array, arrays['W'])


class _Counting(chainer.Link):
    """A link with an integer array: the counts of each of three classes seen."""

    def __init__(self):
        super().__init__()
        self.add_persistent('counts', numpy.zeros(3, numpy.int32))


def test_load_model_refuses_floats_for_an_integer_array_naming_both_dtypes(tmp_path):
    path = str(tmp_path / 'counts.npz')
    numpy.savez(path, counts=numpy.array([0.5, 1.5, 2.5]))
    model = _Counting()
    with pytest.raises(ValueError, match=r"counts\.npz.*'counts'") as raised:
        serializers.load_model(path, model)
    message = str(raised.value).replace(path, '')
    assert '<f8' in message and '<i4' in message and re.search(r'\bmodel\b', message)
    numpy.testing.assert_array_equal(model.counts, [0, 0, 0])


def test_load_model_refuses_a_single_string_where_the_model_has_an_array(tmp_path):
    path = str(tmp_path / 'text.npz')
    arrays = _model_arrays(L.Linear(3, 2))
    arrays['W'] = numpy.asarray('weights')
    numpy.savez(path, **arrays)
    with pytest.raises(ValueError, match=r"text\.npz.*'W'.*<U7") as raised:
        serializers.load_model(path, L.Linear(3, 2))
    assert re.search(r'\bmodel\b', str(raised.value).replace(path, ''))


def test_load_model_from_snapshot_refuses_an_array_of_another_shape(snapshot_run):
    _, path = snapshot_run
    model = L.Classifier(L.Linear(3, 4))
    before = _parameters(model)
    with pytest.raises(ValueError, match=r"snapshot_iter_6.*'updater/model:main/predictor/"
                                         r"[Wb]'.*\(2.*is not the shape \(4"):
        serializers.load_model_from_snapshot(path, model)
    _assert_unchanged(model, before)


# Run in a child process under several hash seeds: which parameter Chainer visits first
# follows string hashing, so a load that checked as it went was half-done in some seeds.
_REFUSED_LOAD = """
import sys, warnings
import chainer.links as L, numpy
from researchutils.chainer import serializers
model = L.Linear(3, 2)
before = {n: p.array.copy() for n, p in model.namedparams()}
try:
    serializers.load_model(sys.argv[1], model)
except KeyError as error:
    assert "'b'" in str(error), error
else:
    raise SystemExit('the load was not refused')
for n, p in model.namedparams():
    numpy.testing.assert_array_equal(p.array, before[n])
print('unchanged')
"""


@pytest.mark.slow(reason='three Python processes that import Chainer, one per hash seed')
def test_a_refused_load_changes_nothing_whatever_the_hash_seed(tmp_path):
    path = str(tmp_path / 'nobias.npz')
    serializers.save_model(path, L.Linear(3, 2, nobias=True, initialW=numpy.ones((2, 3))))
    # One process per seed, all at once (seeds 1 and 4 visited W first before the fix, 0 b).
    seeds = [0, 1, 4]
    processes = [subprocess.Popen([sys.executable, '-c', _REFUSED_LOAD, path],
                                  env=dict(os.environ, PYTHONHASHSEED=str(seed)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for seed in seeds]
    outcomes = [(seed, process.communicate(), process.returncode)
                for seed, process in zip(seeds, processes)]
    for seed, (stdout, stderr), status in outcomes:
        assert status == 0 and 'unchanged' in stdout, (seed, stderr)


@pytest.mark.parametrize('order', [['W', 'b'], ['b', 'W']])
def test_a_refused_load_changes_nothing_in_whichever_order_chainer_visits(tmp_path, order):
    path = str(tmp_path / 'nobias.npz')
    serializers.save_model(path, L.Linear(3, 2, nobias=True, initialW=numpy.ones((2, 3))))
    model = L.Linear(3, 2)
    # Chainer visits a link's parameters in the order of its set of names (string hashing):
    # both orders, in this process.
    model._params = order
    before = _parameters(model)
    with pytest.raises(KeyError, match=r"nobias\.npz.*'b'"):
        serializers.load_model(path, model)
    _assert_unchanged(model, before)


class _TwoLayers(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.first = L.Linear(3, 3)
            self.second = L.Linear(3, 2)


class _OneLayer(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.first = L.Linear(3, 3)


def test_arrays_the_model_lacks_are_named_in_a_warning_and_the_rest_loads(tmp_path):
    path = str(tmp_path / 'two.npz')
    saved = _TwoLayers()
    serializers.save_model(path, saved)
    with pytest.warns(UserWarning, match=r"two\.npz.*'second/W', 'second/b'") as record:
        model = serializers.load_model(path, _OneLayer())
    # It names what lacks them, and points at the caller's line.
    assert re.search(r'\bmodel\b', str(record[0].message).replace(path, ''))
    _assert_points_at_the_caller(record[0])
    numpy.testing.assert_array_equal(model.first.W.array, saved.first.W.array)


def test_strict_refuses_arrays_the_model_lacks_and_changes_nothing(tmp_path):
    path = str(tmp_path / 'two.npz')
    serializers.save_model(path, _TwoLayers())
    model = _OneLayer()
    before = _parameters(model)
    with pytest.raises(ValueError, match=r"two\.npz.*does not have.*'second/W'"):
        serializers.load_model(path, model, strict=True)
    _assert_unchanged(model, before)


def test_strict_is_a_bool(tmp_path):
    serializers.save_model(str(tmp_path / 'm.npz'), L.Linear(3, 2))
    with pytest.raises(TypeError, match="^strict must be True or False, got 'yes'"):
        serializers.load_model(str(tmp_path / 'm.npz'), L.Linear(3, 2), strict='yes')


def test_load_model_from_snapshot_warns_of_or_refuses_arrays_the_model_lacks(snapshot_run):
    _, path = snapshot_run
    unused = "left unused: 'updater/model:main/predictor/b'"
    with pytest.warns(UserWarning, match=unused) as record:
        serializers.load_model_from_snapshot(path, _BiasFree())
    model = _BiasFree()
    before = _parameters(model)
    refused = "does not have: 'updater/model:main/predictor/b'"
    with pytest.raises(ValueError, match=refused) as raised:
        serializers.load_model_from_snapshot(path, model, strict=True)
    _assert_unchanged(model, before)
    # Both name the file and what lacks the arrays: the model (not a key's "model:" prefix).
    for message in (str(record[0].message), str(raised.value)):
        assert path in message and 'None' not in message
        assert re.search(r'\bmodel\b(?!:)', message.replace(path, '')), message
    _assert_points_at_the_caller(record[0])


class _BiasFree(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.predictor = L.Linear(3, 2, nobias=True)


def test_load_model_with_missing_array_names_file_and_array(tmp_path):
    serializers.save_model(str(tmp_path / 'model.npz'), L.Linear(3, 2))
    path = str(tmp_path / 'model.npz')
    with pytest.raises(KeyError, match='model.npz.*predictor/[Wb]') as raised:
        serializers.load_model(path, make_model())
    assert re.search(r'\bmodel\b', raised.value.args[0].replace(path, ''))


# Trainer snapshots ----------------------------------------------------------

@pytest.fixture
def snapshot_run(tmp_path):
    """A finished 6-iteration run that wrote a snapshot at iteration 6."""
    trainer = make_trainer(tmp_path / 'run', stop_iteration=6)
    trainer.extend(extensions.snapshot(filename='snapshot_iter_{.updater.iteration}'),
                   trigger=(6, 'iteration'))
    trainer.run()
    return trainer, str(tmp_path / 'run' / 'snapshot_iter_6')


def test_load_snapshot_resumes_iteration_and_weights(snapshot_run, tmp_path):
    finished, path = snapshot_run
    resumed = make_trainer(tmp_path / 'resumed', stop_iteration=8)
    assert serializers.load_snapshot(path, resumed) is resumed
    assert resumed.updater.iteration == 6
    _assert_same_parameters(resumed.updater.get_optimizer('main').target,
                            finished.updater.get_optimizer('main').target)


def test_resumed_run_continues_like_an_uninterrupted_one(snapshot_run, tmp_path):
    _, path = snapshot_run
    resumed = serializers.load_snapshot(path, make_trainer(tmp_path / 'r', stop_iteration=8))
    resumed.run()
    straight = make_trainer(tmp_path / 's', stop_iteration=8)
    straight.run()
    _assert_same_parameters(resumed.updater.get_optimizer('main').target,
                            straight.updater.get_optimizer('main').target)


def test_load_snapshot_of_missing_file_warns_and_returns_trainer(tmp_path):
    trainer = make_trainer(tmp_path / 'run')
    # The warning names the file and what is left unchanged.
    with pytest.warns(UserWarning, match=r'nothing_here.*\btrainer\b') as record:
        assert serializers.load_snapshot(str(tmp_path / 'nothing_here'), trainer) is trainer
    assert 'None' not in str(record[0].message)
    _assert_points_at_the_caller(record[0])
    assert trainer.updater.iteration == 0


def test_load_snapshot_of_truncated_file_names_the_file(snapshot_run, tmp_path):
    _, path = snapshot_run
    with open(path, 'rb') as f:
        data = f.read()
    broken = tmp_path / 'broken_snapshot'
    broken.write_bytes(data[:-40])
    with pytest.raises(ValueError, match='broken_snapshot.*truncated'):
        serializers.load_snapshot(str(broken), make_trainer(tmp_path / 'r'))


def test_load_snapshot_rejects_a_non_trainer_naming_what_it_got(snapshot_run):
    _, path = snapshot_run
    model = make_model()
    with pytest.raises(TypeError, match='^trainer must be') as raised:
        serializers.load_snapshot(path, model)
    assert repr(model) in str(raised.value)


def test_load_model_from_snapshot_gets_the_trained_weights(snapshot_run):
    finished, path = snapshot_run
    model = serializers.load_model_from_snapshot(path, make_model(seed=9))
    _assert_same_parameters(model, finished.updater.get_optimizer('main').target)


def test_load_model_from_snapshot_with_predictor_key_loads_the_inner_link(snapshot_run):
    finished, path = snapshot_run
    predictor = serializers.load_model_from_snapshot(path, L.Linear(3, 2),
                                                     key='updater/model:main/predictor')
    _assert_same_parameters(predictor, finished.updater.get_optimizer('main').target.predictor)


def test_load_model_from_snapshot_with_wrong_key_lists_the_models_held(snapshot_run):
    _, path = snapshot_run
    with pytest.raises(KeyError) as raised:
        serializers.load_model_from_snapshot(path, make_model(), key='updater/model:other/')
    message = raised.value.args[0]
    assert path in message and "'updater/model:other/'" in message
    assert re.search(r'\bmodel\b(?!:)', message.replace(path, ''))
    # The one model the snapshot holds, by its prefix (not by one of its arrays' keys).
    assert "'updater/model:main/'" in message and 'predictor' not in message


def test_load_model_from_snapshot_of_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match='nothing_here'):
        serializers.load_model_from_snapshot(str(tmp_path / 'nothing_here'), make_model())


def test_load_model_from_snapshot_rejects_a_non_string_key(snapshot_run):
    _, path = snapshot_run
    with pytest.raises(TypeError, match='^key must be a str, got 3$'):
        serializers.load_model_from_snapshot(path, make_model(), key=3)


# Loading never runs code ----------------------------------------------------

class _MakesMarkerWhenUnpickled(object):
    """An object whose unpickling creates the folder ``path`` (stands for any code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def _with_pickled_object(tmp_path, arrays, key):
    """Writes ``arrays`` plus, under ``key``, an object array whose unpickling leaves a marker."""
    marker = str(tmp_path / 'code_ran')
    arrays = dict(arrays)
    arrays[key] = numpy.array([_MakesMarkerWhenUnpickled(marker)], dtype=object)
    path = str(tmp_path / 'planted.npz')
    with open(path, 'wb') as stream:
        numpy.savez(stream, **arrays)
    return path, marker


def _model_arrays(model):
    return chainer_npz.serialize(model)


def test_load_model_never_unpickles_an_array_the_model_does_not_read(tmp_path):
    path, marker = _with_pickled_object(tmp_path, _model_arrays(make_model()), 'extra')
    with pytest.raises(ValueError, match=r"planted\.npz.*object array.*'extra'"):
        serializers.load_model(path, make_model())
    assert not os.path.exists(marker)


def test_load_model_refuses_a_pickled_object_array_it_would_read(tmp_path):
    arrays = _model_arrays(make_model())
    del arrays['predictor/W']
    path, marker = _with_pickled_object(tmp_path, arrays, 'predictor/W')
    model = make_model(seed=4)
    before = _parameters(model)
    with pytest.raises(ValueError, match=r"planted\.npz.*object array.*'predictor/W'"):
        serializers.load_model(path, model)
    assert not os.path.exists(marker)
    for name, value in before.items():
        numpy.testing.assert_array_equal(_parameters(model)[name], value)


def test_load_snapshot_never_unpickles(snapshot_run, tmp_path):
    _, snapshot = snapshot_run
    with numpy.load(snapshot) as archive:
        arrays = {key: archive[key] for key in archive.files}
    path, marker = _with_pickled_object(tmp_path, arrays, 'extensions/anything')
    with pytest.raises(ValueError, match=r"planted\.npz.*'extensions/anything'"):
        serializers.load_snapshot(path, make_trainer(tmp_path / 'r'))
    assert not os.path.exists(marker)


def test_load_model_from_snapshot_never_unpickles(snapshot_run, tmp_path):
    _, snapshot = snapshot_run
    with numpy.load(snapshot) as archive:
        arrays = {key: archive[key] for key in archive.files}
    path, marker = _with_pickled_object(tmp_path, arrays, 'updater/model:main/extra')
    with pytest.raises(ValueError, match=r"planted\.npz.*'updater/model:main/extra'"):
        serializers.load_model_from_snapshot(path, make_model())
    assert not os.path.exists(marker)


def test_an_object_array_holding_something_other_than_none_is_refused(tmp_path):
    # No code runs for an int, but Chainer only ever writes None in an object array.
    arrays = _model_arrays(make_model())
    arrays['extra'] = numpy.asarray(7, dtype=object)
    path = str(tmp_path / 'int_object.npz')
    numpy.savez(path, **arrays)
    with pytest.raises(ValueError, match=r"int_object\.npz.*'extra'"):
        serializers.load_model(path, make_model())


def test_chainers_none_entries_load(tmp_path):
    # Chainer writes an uninitialized parameter as numpy.asarray(None), a pickled object.
    path = str(tmp_path / 'lazy.npz')
    chainer_npz.save_npz(path, L.Linear(None, 2))
    with numpy.load(path, allow_pickle=True) as archive:
        assert archive['W'].dtype == object and archive['W'][()] is None
    model = serializers.load_model(path, L.Linear(None, 2))
    assert model.W.array is None and model.b.shape == (2,)


def _write_npz_with_large_zero_array(path, arrays, key, size):
    """An npz whose ``key`` holds ``size`` zero bytes, compressed to almost nothing."""
    with zipfile.ZipFile(path, 'w', compression=zipfile.ZIP_DEFLATED) as archive:
        for name, value in arrays.items():
            with archive.open(name + '.npy', 'w') as member:
                numpy.lib.format.write_array(member, numpy.asarray(value))
        with archive.open(key + '.npy', 'w', force_zip64=True) as member:
            numpy.lib.format.write_array_header_1_0(
                member, {'descr': '|u1', 'fortran_order': False, 'shape': (size,)})
            chunk = bytes(1 << 20)
            for _ in range(size >> 20):
                member.write(chunk)


def _peak_memory_of(function):
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_load_model_does_not_decompress_arrays_it_does_not_read(tmp_path):
    path = str(tmp_path / 'padded.npz')
    _write_npz_with_large_zero_array(path, _model_arrays(make_model(seed=5)), 'unused',
                                     200 << 20)
    assert os.path.getsize(path) < (2 << 20)
    model = make_model()

    def load():
        with pytest.warns(UserWarning, match="padded\\.npz.*left unused: 'unused'"):
            serializers.load_model(path, model)

    peak = _peak_memory_of(load)
    _assert_same_parameters(model, make_model(seed=5))
    assert peak < (20 << 20), peak


def test_a_needed_array_of_the_wrong_shape_is_refused_before_its_data_is_read(tmp_path):
    arrays = _model_arrays(make_model())
    del arrays['predictor/W']
    path = str(tmp_path / 'bomb.npz')
    _write_npz_with_large_zero_array(path, arrays, 'predictor/W', 200 << 20)

    def load():
        with pytest.raises(ValueError, match=r"bomb\.npz.*'predictor/W'.*shape"):
            serializers.load_model(path, make_model())

    assert _peak_memory_of(load) < (20 << 20)


# A 1-D array of strings: numpy.savez writes it from a list of names, and no model holds one.

def _with_strings(tmp_path, arrays, key):
    arrays = dict(arrays)
    arrays[key] = numpy.array(['conv1', 'conv2', 'fc'])  # dtype <U5, shape (3,)
    path = str(tmp_path / 'strings.npz')
    numpy.savez(path, **arrays)
    return path


def _snapshot_arrays(path):
    with numpy.load(path, allow_pickle=True) as archive:  # our own file: its None markers
        return {key: archive[key] for key in archive.files}


@pytest.mark.parametrize('key', ['predictor/W', 'layer_names'])
def test_load_model_refuses_a_1d_array_of_strings(tmp_path, key):
    path = _with_strings(tmp_path, _model_arrays(make_model()), key)
    model = make_model(seed=4)
    before = _parameters(model)
    with pytest.raises(ValueError, match=r"strings\.npz.*'{}'.*<U5".format(key)):
        serializers.load_model(path, model)
    for name, value in before.items():
        numpy.testing.assert_array_equal(_parameters(model)[name], value)


@pytest.mark.parametrize('key', ['updater/model:main/predictor/W', 'layer_names'])
def test_snapshot_loaders_refuse_a_1d_array_of_strings(snapshot_run, tmp_path, key):
    _, snapshot = snapshot_run
    path = _with_strings(tmp_path, _snapshot_arrays(snapshot), key)
    message = r"strings\.npz.*'{}'.*<U5".format(key)
    with pytest.raises(ValueError, match=message):
        serializers.load_model_from_snapshot(path, make_model(seed=4))
    with pytest.raises(ValueError, match=message):
        serializers.load_snapshot(path, make_trainer(tmp_path / 'resumed', stop_iteration=8))


def _adam_trainer(out, units, stop_iteration):
    rng = numpy.random.RandomState(1)
    x = rng.standard_normal((16, 3)).astype(numpy.float32)
    iterator = chainer.iterators.SerialIterator(
        chainer.datasets.TupleDataset(x, (x.sum(axis=1) > 0).astype(numpy.int32)), 4)
    optimizer = chainer.optimizers.Adam()
    optimizer.setup(L.Classifier(L.Linear(3, units)))
    updater = chainer.training.updaters.StandardUpdater(iterator, optimizer)
    return chainer.training.Trainer(updater, (stop_iteration, 'iteration'), out=str(out))


@pytest.mark.parametrize('optimizer', ['sgd', 'adam'])
def test_load_snapshot_of_another_architecture_is_refused_before_any_parameter_changes(
        tmp_path, optimizer):
    def build(out, units, stop):
        if optimizer == 'adam':
            return _adam_trainer(out, units, stop)
        return make_trainer(out, stop_iteration=stop, model=L.Classifier(L.Linear(3, units)))

    small = build(tmp_path / 'small', 2, 4)
    small.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    small.run()
    resumed = build(tmp_path / 'large', 8, 8)
    before = _parameters(resumed.updater.get_optimizer('main').target)
    with pytest.raises(ValueError, match=r"snapshot.*'updater/model:main/predictor/[Wb]'.*"
                                         r"is not the shape \(8"):
        serializers.load_snapshot(str(tmp_path / 'small' / 'snapshot'), resumed)
    _assert_unchanged(resumed.updater.get_optimizer('main').target, before)
    assert resumed.updater.iteration == 0


def test_load_snapshot_refuses_optimizer_states_of_another_shape(tmp_path):
    trainer = _adam_trainer(tmp_path / 'run', 2, 4)
    trainer.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    trainer.run()
    path = str(tmp_path / 'run' / 'snapshot')
    arrays = _snapshot_arrays(path)
    arrays['updater/optimizer:main/predictor/W/m'] = numpy.zeros((1, 3), numpy.float32)
    planted = str(tmp_path / 'planted')
    numpy.savez(planted + '.npz', **arrays)
    resumed = _adam_trainer(tmp_path / 'resumed', 2, 8)
    before = _parameters(resumed.updater.get_optimizer('main').target)
    with pytest.raises(ValueError, match=r"planted\.npz.*'updater/optimizer:main/predictor/W/m'"
                                         r".*\(1, 3\).*\(2, 3\).*'/predictor/W'"):
        serializers.load_snapshot(planted + '.npz', resumed)
    _assert_unchanged(resumed.updater.get_optimizer('main').target, before)


def _compress_types(path):
    with zipfile.ZipFile(path) as archive:
        return {info.compress_type for info in archive.infolist()}


def test_save_model_compresses_by_default_and_not_when_told(tmp_path):
    serializers.save_model(str(tmp_path / 'default.npz'), L.Linear(30, 30))
    serializers.save_model(str(tmp_path / 'plain.npz'), L.Linear(30, 30), compression=False)
    assert _compress_types(tmp_path / 'default.npz') == {zipfile.ZIP_DEFLATED}
    assert _compress_types(tmp_path / 'plain.npz') == {zipfile.ZIP_STORED}
    for name in ('default.npz', 'plain.npz'):
        assert serializers.load_model(str(tmp_path / name), L.Linear(30, 30)) is not None


def test_save_model_compression_is_a_bool(tmp_path):
    with pytest.raises(TypeError, match="^compression must be True or False, got 'no'"):
        serializers.save_model(str(tmp_path / 'm.npz'), L.Linear(3, 2), compression='no')
    assert not (tmp_path / 'm.npz').exists()


def test_a_folder_whose_name_is_too_long_is_an_oserror_with_its_errno(tmp_path):
    path = str(tmp_path / ('a' * 300) / 'model.npz')
    with pytest.raises(OSError) as raised:
        serializers.save_model(path, L.Linear(3, 2))
    assert raised.value.errno == errno.ENAMETOOLONG
    assert path in str(raised.value) and 'cannot be created' in str(raised.value)
    # It names the folder that could not be made, and why.
    assert repr(os.path.dirname(path)) in str(raised.value)
    assert os.strerror(errno.ENAMETOOLONG) in str(raised.value)
    assert _folder_entries(tmp_path) == []


# What a hard kill leaves, and who removes it ------------------------------------------------

# Saves a model whose serialize says "writing" and then blocks until standard input closes:
# the temporary file exists (and is locked) meanwhile.
_BLOCKED_SAVE = """
import sys
import chainer.links as L
from researchutils.chainer import serializers

class Blocking(L.Linear):
    def serialize(self, serializer):
        print('writing', flush=True)
        sys.stdin.read()
        super().serialize(serializer)

serializers.save_model(sys.argv[1], Blocking(3, 2), overwrite=True)
print('saved', flush=True)
"""


def _blocked_save(path):
    process = subprocess.Popen([sys.executable, '-c', _BLOCKED_SAVE, str(path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == 'writing\n'
    return process


def _temporaries(folder):
    return [name for name in _folder_entries(folder) if name.endswith('.tmp')]


def test_temporaries_of_writers_killed_outright_are_removed_by_the_next_save(tmp_path):
    path = tmp_path / 'model.npz'
    left = []
    for _ in range(3):
        process = _blocked_save(path)
        process.kill()
        process.communicate()
        # Each save removed what the writer killed before it had left.
        (temporary,) = _temporaries(tmp_path)
        assert temporary.startswith('.model.npz.') and temporary not in left
        left.append(temporary)
    saved = L.Linear(3, 2)
    serializers.save_model(str(path), saved, overwrite=True)
    assert _folder_entries(tmp_path) == ['model.npz']
    _assert_same_parameters(serializers.load_model(str(path), L.Linear(3, 2)), saved)


def test_a_live_writers_temporary_is_never_removed(tmp_path):
    path = tmp_path / 'model.npz'
    process = _blocked_save(path)
    try:
        (live,) = _temporaries(tmp_path)
        serializers.save_model(str(path), L.Linear(3, 2), overwrite=True)
        assert _temporaries(tmp_path) == [live]
    finally:
        process.stdin.close()
        assert process.stdout.read() == 'saved\n'
        process.stdout.close()
    assert process.wait() == 0
    assert _folder_entries(tmp_path) == ['model.npz']


def test_a_temporary_removed_before_its_writer_locked_it_is_made_again(tmp_path, monkeypatch):
    # A sweeper may take a new temporary's free lock in the instant between its creation and
    # its writer's flock, and remove it: the writer must not write into the removed file.
    flock = _files.fcntl.flock
    made = []

    def swept_first(handle, operation):
        if not made:
            made.append(os.readlink('/proc/self/fd/{}'.format(handle)))
            os.remove(made[0])
        return flock(handle, operation)

    monkeypatch.setattr(_files.fcntl, 'flock', swept_first)
    file, path = _files.open_temporary(str(tmp_path), 'model.npz')
    with file:
        assert path != made[0] and os.path.exists(path)
    os.remove(path)


# What the loaders are given -------------------------------------------------------------------

@pytest.mark.parametrize('load', [
    lambda path, model: serializers.load_model(path, model),
    lambda path, model: serializers.load_model_from_snapshot(path, model),
])
def test_the_loaders_refuse_a_model_without_serialize_naming_the_argument(tmp_path, load):
    path = str(tmp_path / 'model.npz')
    serializers.save_model(path, L.Linear(3, 2))
    with pytest.raises(TypeError, match=r'^model must be .*object'):
        load(path, object())


def test_load_model_from_snapshot_strict_is_a_bool(snapshot_run):
    _, path = snapshot_run
    with pytest.raises(TypeError, match="^strict must be True or False, got 'yes'"):
        serializers.load_model_from_snapshot(path, make_model(), strict='yes')


# Names Chainer's serializers take: they drop the slashes around a child's name and before a
# value's ------------------------------------------------------------------------------------

class _TwoInputs(chainer.Chain):
    """A model with a layer per input, X and Y, that also keeps the mean of X under a child
    name given with slashes and a value name with a leading one."""

    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.embedX = L.Linear(3, 2)
            self.embedY = L.Linear(3, 2)
        self.Xmean = numpy.zeros(3, numpy.float32)

    def serialize(self, serializer):
        super().serialize(serializer)
        serializer['/statistics/']('/Xmean', self.Xmean)


def test_a_model_with_such_names_round_trips(tmp_path):
    path = str(tmp_path / 'two_inputs.npz')
    saved = _TwoInputs()
    saved.Xmean[...] = [1, 2, 3]
    serializers.save_model(path, saved)
    with numpy.load(path) as archive:
        assert 'statistics/Xmean' in archive.files and 'embedX/W' in archive.files
    loaded = serializers.load_model(path, _TwoInputs(), strict=True)
    _assert_same_parameters(loaded, saved)
    numpy.testing.assert_array_equal(loaded.Xmean, [1, 2, 3])


class _Statistics(object):
    """Not a Link: any object with Chainer's serialize protocol, holding one value."""

    def __init__(self, value, name='Xmean'):
        self.value = value
        self.name = name

    def serialize(self, serializer):
        self.value = serializer(self.name, self.value)


@pytest.mark.parametrize('name, value', [
    ('/Xmean', numpy.zeros(3, numpy.float32)),
    ('Xmean', numpy.zeros(3, numpy.float32)),
    ('Xmean', chainer.Variable(numpy.zeros(3, numpy.float32))),
])
def test_an_array_of_another_shape_is_refused_for_an_object_that_is_not_a_link(
        tmp_path, name, value):
    # NumPy would broadcast the one value of the file into all three.
    path = str(tmp_path / 'stats.npz')
    numpy.savez(path, Xmean=numpy.ones(1, numpy.float32))
    target = _Statistics(value, name)
    with pytest.raises(ValueError, match=r"stats\.npz.*'Xmean'.*\(1,\).*\(3,\)"):
        serializers.load_model(path, target)
    assert target.value is value
    numpy.testing.assert_array_equal(getattr(value, 'array', value), numpy.zeros(3))


def test_a_list_of_numbers_round_trips(tmp_path):
    # A value with no shape of its own: the file's array decides it (within
    # MAX_UNSIZED_BYTES).
    path = str(tmp_path / 'history.npz')
    serializers.save_model(path, _Statistics([0.5, 0.25, 0.125], 'losses'))
    loaded = serializers.load_model(path, _Statistics([], 'losses'))
    assert [float(loss) for loss in loaded.value] == [0.5, 0.25, 0.125]


@pytest.mark.parametrize('columns, loads', [(100, True), (101, False)])
def test_a_lazy_parameter_takes_an_array_up_to_max_unsized_bytes(tmp_path, monkeypatch,
                                                                  columns, loads):
    # The parameter says nothing of the size it will take: the limit does.
    monkeypatch.setattr(_safe_npz, 'MAX_UNSIZED_BYTES', 800)  # W of (2, 100) float32
    path = str(tmp_path / 'lazy.npz')
    numpy.savez(path, W=numpy.ones((2, columns), numpy.float32), b=numpy.zeros(2, numpy.float32))
    model = L.Linear(None, 2)
    if loads:
        assert serializers.load_model(path, model).W.shape == (2, columns)
    else:
        with pytest.raises(ValueError, match=r"lazy\.npz.*'W'.*MAX_UNSIZED_BYTES\b.*\b800\b"):
            serializers.load_model(path, model)
        assert model.W.array is None


# The list of arrays a message names: the first 8 in key order, then how many more -----------

@pytest.mark.parametrize('count', [8, 9, 10])
def test_the_unused_arrays_a_warning_names(tmp_path, count):
    arrays = _model_arrays(L.Linear(3, 2))
    extra = ['extra{}'.format(i) for i in range(count)]
    arrays.update({key: numpy.zeros(1) for key in extra})
    path = str(tmp_path / 'extra.npz')
    numpy.savez(path, **arrays)
    with pytest.warns(UserWarning) as record:
        serializers.load_model(path, L.Linear(3, 2))
    message = str(record[0].message)
    assert [key for key in extra if repr(key) in message] == extra[:8]
    assert ('{} more'.format(count - 8) in message) == (count > 8)
    assert 'more' in message or count == 8


# Trainer snapshots: what is checked besides the models ---------------------------------------

def _with_array(arrays, key, value, path):
    arrays = dict(arrays)
    if value is None:
        del arrays[key]
    else:
        arrays[key] = value
    numpy.savez(path, **arrays)
    return path


@pytest.mark.parametrize('value, error, says', [
    (numpy.arange(3), ValueError, r'shape \(3,\).*\btrainer\b'),  # refused before reading it
    (numpy.float64(2.5), TypeError, 'float64'),               # Chainer's cast refuses it
    (numpy.asarray('six'), ValueError, "'six'"),              # int('six') fails
])
def test_a_snapshot_value_that_does_not_fit_the_trainers_number_is_refused_naming_it(
        snapshot_run, tmp_path, value, error, says):
    _, snapshot = snapshot_run
    path = _with_array(_snapshot_arrays(snapshot), 'updater/iteration', value,
                       str(tmp_path / 'crafted.npz'))
    with pytest.raises(error, match=r"crafted\.npz.*'updater/iteration'.*" + says) as raised:
        serializers.load_snapshot(path, make_trainer(tmp_path / 'resumed'))
    assert re.search(r'\btrainer\b', str(raised.value).replace(path, ''))


def test_a_snapshot_lacking_a_value_the_trainer_needs_is_refused_naming_it(snapshot_run,
                                                                         tmp_path):
    _, snapshot = snapshot_run
    path = _with_array(_snapshot_arrays(snapshot), 'updater/iterator:main/current_position',
                       None, str(tmp_path / 'lacking.npz'))
    with pytest.raises(KeyError, match=r"lacking\.npz.*'updater/iterator:main/current_position'"
                       ) as raised:
        serializers.load_snapshot(path, make_trainer(tmp_path / 'resumed'))
    assert re.search(r'\btrainer\b', raised.value.args[0].replace(path, ''))


def test_a_snapshot_whose_model_has_arrays_the_trainers_lacks_is_refused(snapshot_run, tmp_path):
    # Strictly, unlike load_model: a resumed run must be the run that was saved.
    _, path = snapshot_run
    resumed = make_trainer(tmp_path / 'resumed',
                           model=L.Classifier(L.Linear(3, 2, nobias=True)))
    model = resumed.updater.get_optimizer('main').target
    before = _parameters(model)
    with pytest.raises(ValueError, match=r"snapshot_iter_6.*'updater/model:main/predictor/b'"):
        serializers.load_snapshot(path, resumed)
    _assert_unchanged(model, before)


def _two_model_trainer(out, stop_iteration):
    """A run whose updater has a second model, 'disc', of another shape than 'main', both
    optimized by Adam (per-parameter states); the names of both are four letters long."""
    rng = numpy.random.RandomState(1)
    x = rng.standard_normal((16, 3)).astype(numpy.float32)
    iterator = chainer.iterators.SerialIterator(
        chainer.datasets.TupleDataset(x, (x.sum(axis=1) > 0).astype(numpy.int32)), 4)
    optimizers = {'main': chainer.optimizers.Adam(), 'disc': chainer.optimizers.Adam()}
    disc = L.Classifier(L.Linear(3, 4))
    optimizers['main'].setup(L.Classifier(L.Linear(3, 2)))
    optimizers['disc'].setup(disc)
    # The updater trains 'main' only; one step of 'disc' gives it states too.
    optimizers['disc'].update(lambda: chainer.functions.sum(disc.predictor(x)))
    updater = chainer.training.updaters.StandardUpdater(iterator, optimizers)
    return chainer.training.Trainer(updater, (stop_iteration, 'iteration'), out=str(out))


def test_the_optimizer_states_of_each_model_are_checked_against_that_model_only(tmp_path):
    trainer = _two_model_trainer(tmp_path / 'run', 4)
    trainer.extend(extensions.snapshot(filename='snapshot'), trigger=(4, 'iteration'))
    trainer.run()
    with numpy.load(str(tmp_path / 'run' / 'snapshot')) as archive:
        assert archive['updater/optimizer:disc/predictor/W/m'].shape == (4, 3)
    resumed = _two_model_trainer(tmp_path / 'resumed', 8)
    serializers.load_snapshot(str(tmp_path / 'run' / 'snapshot'), resumed)
    for name in ('main', 'disc'):
        _assert_same_parameters(resumed.updater.get_optimizer(name).target,
                                trainer.updater.get_optimizer(name).target)
