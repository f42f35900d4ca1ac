"""Tests of the npz reader that never unpickles (serializers/_safe_npz.py)."""
import errno
import io
import os
import pickle
import re
import tracemalloc
import zipfile

import chainer
import chainer.links as L
import numpy
import pytest
from chainer.serializers import npz as chainer_npz
from chainer.training import extensions

from researchutils.chainer import serializers
from researchutils.chainer.serializers import _safe_npz
from researchutils.chainer.serializers._safe_npz import (
    UnreadableFile,
    is_chainers_none,
    open_archive,
)
from tests.support.tiny_training import make_model, make_trainer


class _Marker(object):
    """Leaves a file behind when unpickled, so a test can see that nothing was run."""

    path = None

    def __reduce__(self):
        return (open, (self.path, 'w'))


def _npy_pickle(array):
    # What numpy.save writes after the header of an object array.
    return pickle.dumps(array, protocol=3)


def test_the_pickle_of_numpy_asarray_none_is_chainers_none():
    assert is_chainers_none(_npy_pickle(numpy.asarray(None)))


@pytest.mark.parametrize('array', [numpy.asarray('text', dtype=object),
                                   numpy.asarray([None, None], dtype=object),
                                   numpy.asarray(0, dtype=object)])
def test_other_object_arrays_are_not_chainers_none(array):
    assert not is_chainers_none(_npy_pickle(array))


def test_a_pickle_naming_another_callable_is_not_run(tmp_path):
    marker = tmp_path / 'ran'
    _Marker.path = str(marker)
    assert not is_chainers_none(pickle.dumps(numpy.asarray(_Marker(), dtype=object)))
    assert not marker.exists()


def test_archive_knows_every_shape_before_reading_any_array(tmp_path):
    path = str(tmp_path / 'arrays.npz')
    numpy.savez(path, w=numpy.ones((2, 3)), b=numpy.zeros(4))
    with open_archive(path) as archive:
        assert archive.shapes == {'w': (2, 3), 'b': (4,)}
        assert 'w' in archive and 'x' not in archive
        numpy.testing.assert_array_equal(archive['b'], numpy.zeros(4))


def test_archive_reads_chainers_none_as_numpy_asarray_none(tmp_path):
    path = str(tmp_path / 'arrays.npz')
    numpy.savez(path, state=numpy.asarray(None))
    with open_archive(path) as archive:
        assert archive.shapes['state'] is None
        assert archive['state'].dtype == object and archive['state'].item() is None


def test_opening_refuses_a_pickled_object_array_naming_file_and_key(tmp_path):
    path = str(tmp_path / 'arrays.npz')
    numpy.savez(path, w=numpy.ones(2), bad=numpy.asarray(['a', 1], dtype=object))
    with pytest.raises(UnreadableFile, match=r"arrays\.npz.*'bad'"):
        open_archive(path)


def test_a_member_with_a_corrupt_header_is_refused_at_opening_naming_file_and_key(tmp_path):
    path = str(tmp_path / 'arrays.npz')
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('w.npy', numpy.lib.format.magic(1, 0) + b'x' * 10)
    with pytest.raises(UnreadableFile, match=r"arrays\.npz.*'w'"):
        open_archive(path)


def test_open_archive_of_a_file_that_is_not_a_zip_names_it(tmp_path):
    path = tmp_path / 'notes.npz'
    path.write_bytes(b'not a zip archive')
    with pytest.raises(ValueError, match='notes.npz.*not a complete zip archive'):
        open_archive(str(path))


def test_open_archive_of_a_directory_says_so(tmp_path):
    with pytest.raises(IsADirectoryError, match='is a folder'):
        open_archive(os.fspath(tmp_path))


# A crafted npz cannot make the loaders use much more memory than the target holds,
# nor hang.

def _linear_arrays():
    model = L.Linear(3, 2)
    return {'W': model.W.array, 'b': model.b.array}


def _write_member(archive, key, header, data, compress_type=zipfile.ZIP_DEFLATED):
    buffer = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(buffer, header)
    archive.writestr(zipfile.ZipInfo(key + '.npy'), buffer.getvalue() + data,
                     compress_type=compress_type)


def _write_npz(path, arrays, extra=None, compress_type=zipfile.ZIP_DEFLATED):
    """``arrays`` as numpy writes them, plus ``extra``: key -> (header, data bytes)."""
    with zipfile.ZipFile(path, 'w', compression=zipfile.ZIP_DEFLATED) as archive:
        for key, value in arrays.items():
            buffer = io.BytesIO()
            numpy.lib.format.write_array(buffer, numpy.asarray(value))
            archive.writestr(key + '.npy', buffer.getvalue())
        for key, (header, data) in (extra or {}).items():
            _write_member(archive, key, header, data, compress_type)
    return path


# Compression methods and flags -------------------------------------------------------------

def _npz_compressed_by(tmp_path, method):
    """A model file of Linear(3, 2) with one member more, 'junk', compressed by ``method``."""
    return _write_npz(str(tmp_path / 'm.npz'), _linear_arrays(), {'junk': (
        {'descr': '<f8', 'fortran_order': False, 'shape': (0,)}, bytes(1000))},
        compress_type=method)


@pytest.mark.parametrize('method', [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_member_compressed_other_than_deflate_is_refused_naming_file_and_member(tmp_path,
                                                                                 method):
    # zipfile decompresses bzip2 and lzma members whole on the first read.
    path = _npz_compressed_by(tmp_path, method)
    with pytest.raises(ValueError, match=r"m\.npz.*junk.*compress"):
        serializers.load_model(path, L.Linear(3, 2))


def _patched_zip(tmp_path, local_offset, central_offset, value, name):
    buffer = io.BytesIO()
    chainer_npz.save_npz(buffer, L.Linear(3, 2), compression=False)
    data = bytearray(buffer.getvalue())
    for signature, offset in ((b'PK\x03\x04', local_offset), (b'PK\x01\x02', central_offset)):
        at = data.find(signature)
        while at >= 0:
            value(data, at + offset)
            at = data.find(signature, at + 1)
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return str(path)


def test_an_encrypted_member_is_refused_naming_the_file(tmp_path):
    def set_flag(data, at):
        data[at] |= 1

    path = _patched_zip(tmp_path, 6, 8, set_flag, 'encrypted.npz')
    with pytest.raises(ValueError, match=r"encrypted\.npz.*encrypted"):
        serializers.load_model(path, L.Linear(3, 2))


def test_an_unknown_compression_method_is_refused_naming_the_file(tmp_path):
    def set_method(data, at):
        data[at:at + 2] = (99).to_bytes(2, 'little')

    path = _patched_zip(tmp_path, 8, 10, set_method, 'method99.npz')
    with pytest.raises(ValueError, match=r"method99\.npz.*compress"):
        serializers.load_model(path, L.Linear(3, 2))


# Sizes: the header, the member size and the target agree -----------------------------------

def test_a_member_larger_than_its_header_says_is_refused(tmp_path):
    arrays = _linear_arrays()
    path = _write_npz(str(tmp_path / 'long.npz'), {'b': arrays['b']}, {'W': (
        {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}, bytes(24 + 10 ** 6))})
    with pytest.raises(ValueError, match=r"long\.npz.*'W'.*bytes"):
        serializers.load_model(path, L.Linear(3, 2))
    with zipfile.ZipFile(path) as archive:
        size = archive.getinfo('W.npy').file_size
    with pytest.raises(UnreadableFile) as raised:
        open_archive(path)
    # The member's size, and the header's shape, dtype and the size they make.
    message = str(raised.value)
    assert str(size) in message and '(2, 3)' in message and '<f4' in message
    assert re.search(r'\b{}\b'.format(size - 10 ** 6), message)


@pytest.mark.parametrize('descr', ['|V1024', [('a', '<f8'), ('b', '<f8')], '|S8', '<U4',
                                   '<M8[s]'])
def test_an_array_of_a_non_numeric_dtype_is_refused_at_opening(tmp_path, descr):
    dtype = numpy.dtype(descr)
    path = _write_npz(str(tmp_path / 'void.npz'), {'b': numpy.zeros(2, 'f')}, {'W': (
        {'descr': numpy.lib.format.dtype_to_descr(dtype), 'fortran_order': False,
         'shape': (2, 3)}, bytes(6 * dtype.itemsize))})
    with pytest.raises(ValueError, match=r"void\.npz.*'W'.*dtype"):
        serializers.load_model(path, L.Linear(3, 2))
    # At opening, before any target is looked at, naming the dtype.
    with pytest.raises(UnreadableFile, match=r"void\.npz.*'W'") as raised:
        open_archive(path)
    assert dtype.str in str(raised.value)


def test_a_subarray_dtype_is_refused_at_opening(tmp_path):
    path = str(tmp_path / 'sub.npz')
    with zipfile.ZipFile(path, 'w') as archive:
        buffer = io.BytesIO()
        numpy.lib.format.write_array_header_1_0(
            buffer, {'descr': [('', '<f8', (4, 4))], 'fortran_order': False, 'shape': (2, 3)})
        archive.writestr('W.npy', buffer.getvalue() + bytes(6 * 128))
    with pytest.raises(ValueError, match=r"sub\.npz.*'W'.*dtype"):
        serializers.load_model(path, L.Linear(3, 2))


def test_a_wider_numeric_dtype_than_the_parameter_still_loads(tmp_path):
    # Chainer casts on load: float64 arrays load into a float32 model.
    arrays = {key: value.astype(numpy.float64) for key, value in _linear_arrays().items()}
    path = _write_npz(str(tmp_path / 'f8.npz'), arrays)
    model = serializers.load_model(path, L.Linear(3, 2))
    numpy.testing.assert_array_equal(model.W.array, arrays['W'].astype(numpy.float32))


def _snapshot_with(tmp_path, key, value):
    trainer = make_trainer(tmp_path / 'run', stop_iteration=4)
    trainer.extend(extensions.snapshot(filename='snap'), trigger=(4, 'iteration'))
    trainer.run()
    with numpy.load(str(tmp_path / 'run' / 'snap'), allow_pickle=True) as archive:
        arrays = {name: archive[name] for name in archive.files}
    assert key in arrays
    arrays[key] = value
    path = str(tmp_path / 'crafted_snapshot')
    with open(path, 'wb') as stream:
        numpy.savez_compressed(stream, **arrays)
    return path


def test_an_array_where_the_trainer_holds_a_number_is_refused(tmp_path):
    path = _snapshot_with(tmp_path, 'updater/iterator:main/current_position',
                          numpy.zeros(10 ** 5))
    with pytest.raises(ValueError, match=r"crafted_snapshot.*current_position.*shape"):
        serializers.load_snapshot(path, make_trainer(tmp_path / 'resumed'))


def test_chainers_own_snapshot_with_its_log_string_loads(tmp_path):
    trainer = make_trainer(tmp_path / 'run', stop_iteration=4)
    trainer.extend(extensions.LogReport(trigger=(1, 'iteration')))
    trainer.extend(extensions.snapshot(filename='snap'), trigger=(4, 'iteration'))
    trainer.run()
    resumed = make_trainer(tmp_path / 'resumed', stop_iteration=8)
    resumed.extend(extensions.LogReport(trigger=(1, 'iteration')))
    serializers.load_snapshot(str(tmp_path / 'run' / 'snap'), resumed)
    assert resumed.updater.iteration == 4
    assert len(resumed.get_extension('LogReport').log) == 4


def test_an_array_into_a_lazy_parameter_is_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(_safe_npz, 'MAX_UNSIZED_BYTES', 1000)
    path = _write_npz(str(tmp_path / 'lazy.npz'), {'W': numpy.zeros((2, 200), 'f'),
                                                   'b': numpy.zeros(2, 'f')})
    with pytest.raises(ValueError, match=r"lazy\.npz.*'W'.*1000"):
        serializers.load_model(path, L.Linear(None, 2))
    small = _write_npz(str(tmp_path / 'small.npz'), {'W': numpy.ones((2, 100), 'f'),
                                                     'b': numpy.zeros(2, 'f')})
    assert serializers.load_model(small, L.Linear(None, 2)).W.shape == (2, 100)


# Chainer's None is recognised without state that a file can change --------------------------

def _mutator_pickle():
    # GLOBAL numpy.dtype, then BUILD on it: a pickle that calls __setstate__ on what
    # find_class returned.
    return (b'\x80\x02cnumpy\ndtype\n(cnumpy.core.multiarray\n_reconstruct\n)}Ntb.')


def test_a_crafted_none_pickle_leaves_genuine_nones_loadable(tmp_path):
    buffer = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(
        buffer, {'descr': '|O', 'fortran_order': False, 'shape': ()})
    crafted = str(tmp_path / 'mutator.npz')
    with zipfile.ZipFile(crafted, 'w') as archive:
        archive.writestr('W.npy', buffer.getvalue() + _mutator_pickle())
        archive.writestr('b.npy', buffer.getvalue() + _mutator_pickle())
    with pytest.raises(ValueError, match='object array'):
        serializers.load_model(crafted, L.Linear(None, 2))
    genuine = str(tmp_path / 'lazy.npz')
    chainer_npz.save_npz(genuine, L.Linear(None, 2))
    assert serializers.load_model(genuine, L.Linear(None, 2)).W.array is None


@pytest.mark.parametrize('protocol', [2, 3, 4])
def test_numpys_pickles_of_none_are_chainers_none(protocol):
    assert _safe_npz.is_chainers_none(pickle.dumps(numpy.asarray(None), protocol=protocol))


def test_the_none_in_a_real_chainer_snapshot_is_recognised(tmp_path):
    model = L.Classifier(L.Linear(None, 2))
    optimizer = chainer.optimizers.Adam()
    optimizer.setup(model)
    path = str(tmp_path / 'lazy.npz')
    chainer_npz.save_npz(path, model)
    with _safe_npz.open_archive(path) as archive:
        assert archive.shapes['predictor/W'] is None


# Only regular files are opened --------------------------------------------------------------

def test_a_fifo_is_refused_without_blocking(tmp_path):
    path = str(tmp_path / 'model.npz')
    os.mkfifo(path)
    with pytest.raises(ValueError, match=r"model\.npz.*regular file"):
        serializers.load_model(path, make_model())


# The size guard of Chainer's None: exactly the pickle NumPy writes, never a longer payload ----

def _none_pickle_padded_to(size):
    # The unpickler stops at the pickle's STOP: what follows it is never read, so only the
    # size guard tells a padded payload from the real one.
    payload = pickle.dumps(numpy.asarray(None), protocol=3)
    return payload + b'\0' * (size - len(payload))


def test_a_none_pickle_up_to_the_limit_is_chainers_none_and_one_byte_more_is_not():
    assert _safe_npz.is_chainers_none(_none_pickle_padded_to(_safe_npz._MAX_NONE_PICKLE))
    assert not _safe_npz.is_chainers_none(
        _none_pickle_padded_to(_safe_npz._MAX_NONE_PICKLE + 1))


def test_a_0d_object_array_larger_than_the_limit_is_refused_at_opening(tmp_path):
    buffer = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(
        buffer, {'descr': '|O', 'fortran_order': False, 'shape': ()})
    path = str(tmp_path / 'padded_none.npz')
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('W.npy', buffer.getvalue() + _none_pickle_padded_to(4096))
        archive.writestr('b.npy', buffer.getvalue() + _none_pickle_padded_to(100))
    with pytest.raises(ValueError, match=r"padded_none\.npz.*object array.*'W'"):
        serializers.load_model(path, L.Linear(None, 2))


@pytest.mark.parametrize('array', [numpy.asarray([None], dtype=object),
                                   numpy.asarray([[None]], dtype=object),
                                   numpy.asarray(False, dtype=object),
                                   numpy.asarray(None, dtype=object).reshape(1)])
def test_small_object_arrays_near_chainers_none_are_not_chainers_none(array):
    assert not is_chainers_none(_npy_pickle(array))


def test_an_npy_member_in_format_version_2_loads(tmp_path):
    source = L.Linear(3, 2)
    path = str(tmp_path / 'version2.npz')
    with zipfile.ZipFile(path, 'w') as archive:
        for key, value in chainer_npz.serialize(source).items():
            buffer = io.BytesIO()
            numpy.lib.format.write_array(buffer, value, version=(2, 0))
            assert buffer.getvalue()[6:8] == b'\x02\x00'
            archive.writestr(key + '.npy', buffer.getvalue())
    model = serializers.load_model(path, L.Linear(3, 2))
    numpy.testing.assert_array_equal(model.W.array, source.W.array)
    numpy.testing.assert_array_equal(model.b.array, source.b.array)


@pytest.mark.parametrize('module', [b'numpy.core.multiarray', b'numpy._core.multiarray'])
def test_the_none_pickles_of_numpy_1_and_numpy_2_are_chainers_none(module):
    # NumPy 1 names its array rebuilder numpy.core.multiarray._reconstruct, NumPy 2
    # numpy._core.multiarray._reconstruct: a snapshot written under either loads under both.
    payload = pickle.dumps(numpy.asarray(None), protocol=3)
    for written in (b'numpy.core.multiarray', b'numpy._core.multiarray'):
        payload = payload.replace(b'c' + written + b'\n', b'c' + module + b'\n')
    assert b'c' + module + b'\n_reconstruct\n' in payload
    assert is_chainers_none(payload)


def _none_pickle_with(change):
    payload = bytearray(pickle.dumps(numpy.asarray(None), protocol=3))
    change(payload)
    return bytes(payload)


def _replace(old, new):
    def change(payload):
        assert payload.count(old) == 1, (old, bytes(payload))
        at = payload.index(old)
        payload[at:at + len(old)] = new
    return change


def _dtype_flags(align, copy):
    # numpy.dtype('O8', align, copy): the two bools right after the 'O8' and its memo.
    def change(payload):
        at = payload.index(b'O8') + 4
        assert payload[at:at + 2] == b'\x89\x88'
        payload[at:at + 2] = (b'\x88' if align else b'\x89') + (b'\x88' if copy else b'\x89')
    return change


@pytest.mark.parametrize('change', [
    _replace(b'K\x00\x85', b'K\x01\x85'),                       # _reconstruct's shape (1,)
    _replace(b'C\x01b', b'C\x01c'),                             # its type code 'c'
    _replace(b'(K\x01)', b'(K\x02)'),                           # state version 2
    _replace(b'(K\x01)', b'(K\x01K\x01\x85'),                   # shape (1,)
    _replace(b'X\x02\x00\x00\x00O8', b'X\x02\x00\x00\x00O4'),   # dtype O4
    _dtype_flags(align=True, copy=True),
    _dtype_flags(align=False, copy=False),
    _replace(b'X\x01\x00\x00\x00|', b'X\x01\x00\x00\x00<'),     # byte order '<'
    _replace(b'NNNJ', b'NNK\x00J'),                             # dtype fields 0
    _replace(b'NNNJ\xff\xff\xff\xff', b'NNNJ\x00\x00\x00\x00'),  # dtype element size 0
    _replace(b'K?t', b'K>t'),                                   # dtype flags 62
    _replace(b'b\x89]', b'b\x88]'),                             # Fortran order
], ids=['reconstruct-shape', 'reconstruct-code', 'version', 'shape', 'dtype', 'dtype-align',
        'dtype-copy', 'byte-order', 'fields', 'element-size', 'dtype-flags', 'fortran'])
def test_a_pickle_one_field_away_from_numpys_none_is_not_chainers_none(change):
    # Only exactly the pickle of numpy.asarray(None) passes, not one that differs anywhere.
    assert is_chainers_none(pickle.dumps(numpy.asarray(None), protocol=3))
    assert not is_chainers_none(_none_pickle_with(change))


def test_an_archive_refuses_a_key_it_does_not_hold_naming_it(tmp_path):
    path = str(tmp_path / 'arrays.npz')
    numpy.savez(path, w=numpy.ones(2))
    with open_archive(path) as archive:
        with pytest.raises(KeyError, match="'x'"):
            archive['x']


def test_a_corrupt_zip_directory_is_refused_naming_the_file(tmp_path):
    # The end record is intact (so it is a zip file), the directory it points at is not.
    path = tmp_path / 'directory.npz'
    numpy.savez(str(path), w=numpy.ones(2))
    data = bytearray(path.read_bytes())
    at = data.index(b'PK\x01\x02')
    data[at:at + 4] = b'PK\x09\x09'
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"directory\.npz.*truncated or corrupt.*BadZipFile"
                       ) as raised:
        open_archive(str(path))
    assert str(raised.value.__cause__) in str(raised.value)  # zipfile's own words


def _protocol_2_none(change):
    payload = bytearray(pickle.dumps(numpy.asarray(None), protocol=2))
    change(payload)
    return bytes(payload)


def _as_dtype_call(payload):
    # The same arguments and state, given to numpy.dtype instead of the array rebuilder.
    for module in (b'numpy._core.multiarray', b'numpy.core.multiarray'):
        old = b'c' + module + b'\n_reconstruct\n'
        if old in payload:
            at = payload.index(old)
            payload[at:at + len(old)] = b'cnumpy\ndtype\n'
            return
    raise AssertionError(bytes(payload))


@pytest.mark.parametrize('payload', [
    lambda: _none_pickle_with(_as_dtype_call),
    # Protocol 2 writes the type code b'b' as _codecs.encode('b', 'latin1').
    lambda: _protocol_2_none(_replace(b'X\x01\x00\x00\x00b', b'X\x01\x00\x00\x00c')),
    lambda: _protocol_2_none(_replace(b'latin1', b'ascii\x00')),
], ids=['another-call', 'protocol-2-code', 'protocol-2-codec'])
def test_a_pickle_of_another_call_or_code_is_not_chainers_none(payload):
    assert is_chainers_none(pickle.dumps(numpy.asarray(None), protocol=2))
    assert not is_chainers_none(payload())


def test_an_archive_opened_by_its_path_alone_reads_it(tmp_path):
    path = str(tmp_path / 'arrays.npz')
    numpy.savez(path, w=numpy.arange(3.0))
    with _safe_npz.Archive(path) as archive:
        numpy.testing.assert_array_equal(archive['w'], [0, 1, 2])


@pytest.mark.parametrize('method', [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_the_refusal_of_a_compression_method_names_the_member_and_the_method(tmp_path,
                                                                             method):
    path = _npz_compressed_by(tmp_path, method)
    with pytest.raises(UnreadableFile, match=r"m\.npz.*'junk'.*method {}\b".format(method)):
        open_archive(path)


def test_the_refusal_of_an_encrypted_member_names_it(tmp_path):
    def set_flag(data, at):
        data[at] |= 1

    path = _patched_zip(tmp_path, 6, 8, set_flag, 'encrypted.npz')
    with pytest.raises(UnreadableFile, match=r"encrypted\.npz.*'[Wb]'.*encrypted"):
        open_archive(path)


def test_corrupt_array_data_is_refused_when_read_naming_the_key_and_the_error(tmp_path):
    path = tmp_path / 'flipped.npz'
    numpy.savez(str(path), w=numpy.zeros(1000))
    with zipfile.ZipFile(str(path)) as archive:
        info = archive.getinfo('w.npy')
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + 500
    data[start:start + 8] = b'\xff' * 8  # inside the array's data: the header reads fine
    path.write_bytes(bytes(data))
    with open_archive(str(path)) as archive:
        with pytest.raises(UnreadableFile, match=r"flipped\.npz.*'w'.*BadZipFile.*CRC"):
            archive['w']


def test_an_npy_member_in_format_version_3_is_refused_naming_the_version(tmp_path):
    path = str(tmp_path / 'version3.npz')
    with zipfile.ZipFile(path, 'w') as archive:
        buffer = io.BytesIO()
        numpy.lib.format.write_array(buffer, numpy.zeros(2), version=(3, 0))
        archive.writestr('w.npy', buffer.getvalue())
    with pytest.raises(UnreadableFile, match=r"version3\.npz.*'w'.*\(3, 0\)"):
        open_archive(path)


def test_open_archive_of_a_directory_names_it_with_its_errno(tmp_path):
    with pytest.raises(IsADirectoryError) as raised:
        open_archive(os.fspath(tmp_path))
    assert raised.value.errno == errno.EISDIR
    assert repr(os.fspath(tmp_path)) in str(raised.value)


def test_a_large_object_array_is_refused_without_reading_it(tmp_path):
    # Only as many bytes as NumPy's None pickle can have are read of an object array.
    buffer = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(
        buffer, {'descr': '|O', 'fortran_order': False, 'shape': ()})
    path = str(tmp_path / 'object.npz')
    with zipfile.ZipFile(path, 'w', compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open('W.npy', 'w') as member:
            member.write(buffer.getvalue() + pickle.dumps(numpy.asarray(None), protocol=3))
            chunk = bytes(1 << 20)
            for _ in range(64):
                member.write(chunk)
    tracemalloc.start()
    try:
        with pytest.raises(UnreadableFile, match=r"object\.npz.*object array.*'W'"):
            open_archive(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (16 << 20), peak


def test_a_pickle_with_a_persistent_id_is_not_chainers_none():
    # PERSID: an object the unpickler would have to look up outside the pickle.
    assert not is_chainers_none(b'\x80\x02Pnone\n.')
