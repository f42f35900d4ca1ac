"""Tests of the npz reader that never unpickles (serializers/_safe_npz.py)."""
import os
import pickle
import zipfile

import numpy
import pytest

from researchutils.chainer.serializers._safe_npz import (
    UnreadableFile,
    is_chainers_none,
    open_archive,
)


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
    with pytest.raises(IsADirectoryError, match='is a directory'):
        open_archive(os.fspath(tmp_path))
