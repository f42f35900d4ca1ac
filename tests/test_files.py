"""researchutils.files: real files and folders on disk, and real concurrent processes."""
import argparse
import errno
import fcntl
import json
import multiprocessing
import os
import pathlib
import pickle
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from researchutils import _files, files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('x')
    return path


# search_all_files_under -------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    names = ['a.txt', 'b.md', 'sub/c.txt', 'sub/d.md', 'sub/deeper/e.txt', 'sub/deeper/f',
             'archive.tar.gz']
    for name in names:
        _touch(tmp_path / 'root' / name)
    return tmp_path / 'root', names


def _relative(found, root):
    return sorted(str(path.relative_to(root)) for path in found)


def test_search_finds_every_file_in_every_subfolder(tree):
    root, names = tree
    found = files.search_all_files_under(root)
    assert _relative(found, root) == sorted(names)
    assert all(isinstance(path, pathlib.Path) for path in found)


def test_search_by_extension(tree):
    root, _ = tree
    found = files.search_all_files_under(root, exts=['.txt'])
    assert _relative(found, root) == ['a.txt', 'sub/c.txt', 'sub/deeper/e.txt']


def test_search_by_several_extensions_and_a_double_one(tree):
    root, _ = tree
    found = files.search_all_files_under(str(root), exts=['.md', '.tar.gz'])
    assert _relative(found, root) == ['archive.tar.gz', 'b.md', 'sub/d.md']


def test_search_with_one_extension_as_a_string_matches_it_whole(tree):
    # The original tested `suffix in exts`, so exts='.txt' matched '.t' and files without one.
    root, _ = tree
    found = files.search_all_files_under(root, exts='.txt')
    assert _relative(found, root) == ['a.txt', 'sub/c.txt', 'sub/deeper/e.txt']


def test_search_paths_all_start_with_the_folder_given(tree, monkeypatch):
    root, _ = tree
    monkeypatch.chdir(root.parent)
    found = files.search_all_files_under('root')
    assert all(str(path).startswith('root' + os.sep) for path in found)


def test_search_order_is_sorted(tree):
    root, _ = tree
    found = files.search_all_files_under(root)
    assert found == sorted(found)


def test_search_does_not_loop_through_a_symlinked_folder(tmp_path):
    _touch(tmp_path / 'root' / 'a.txt')
    os.symlink(tmp_path / 'root', tmp_path / 'root' / 'loop')
    found = files.search_all_files_under(tmp_path / 'root')
    assert _relative(found, tmp_path / 'root') == ['a.txt']


def _folder_past_path_max(parent):
    """Makes folders nested under ``parent`` until a path is longer than the system allows.

    A real folder that a search by path cannot read, even as root (who reads any folder
    whatever its permission bits): its scandir fails with ENAMETOOLONG. Made with paths
    relative to an open folder, which have no such limit. Returns the first folder whose
    path is too long.
    """
    limit = os.pathconf(parent, 'PC_PATH_MAX')
    name = 'd' * 200
    folder = pathlib.Path(parent)
    handle = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while len(str(folder)) < limit:
            os.mkdir(name, dir_fd=handle)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=handle)
            os.close(handle)
            handle = inner
            folder = folder / name
        os.close(os.open('lost.txt', os.O_WRONLY | os.O_CREAT, dir_fd=handle))
    finally:
        os.close(handle)
    return folder


def test_search_raises_naming_a_folder_it_cannot_read(tmp_path):
    root = tmp_path / 'root'
    _touch(root / 'a.txt')
    unreadable = _folder_past_path_max(root)
    try:
        with pytest.raises(OSError) as raised:
            files.search_all_files_under(root, exts='.txt')
        assert raised.value.filename == str(unreadable)
        assert str(unreadable) in str(raised.value)
    finally:
        shutil.rmtree(root)  # by open folders, so the long paths are no obstacle


def test_search_does_not_list_a_file_whose_whole_name_is_the_extension(tmp_path):
    for name in ['.txt', 'a.txt', 'sub/.txt', 'sub/.hidden.txt', '.tar.gz']:
        _touch(tmp_path / 'root' / name)
    found = files.search_all_files_under(tmp_path / 'root', exts=['.txt', '.tar.gz'])
    assert _relative(found, tmp_path / 'root') == ['a.txt', 'sub/.hidden.txt']


def test_search_missing_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match='does not exist'):
        files.search_all_files_under(tmp_path / 'missing')


def test_search_of_a_file_is_refused(tmp_path):
    path = _touch(tmp_path / 'a.txt')
    with pytest.raises(ValueError, match='not a folder'):
        files.search_all_files_under(path)


def test_search_extension_without_dot_is_refused(tree):
    with pytest.raises(ValueError, match="'txt'"):
        files.search_all_files_under(tree[0], exts=['txt'])


# file_exists / create_dir_if_not_exist ------------------------------------------------------

def test_file_exists_for_files_and_folders(tmp_path):
    assert files.file_exists(str(_touch(tmp_path / 'a.txt')))
    assert files.file_exists(tmp_path)
    assert not files.file_exists(tmp_path / 'missing')


def test_create_dir_makes_missing_parents(tmp_path):
    target = tmp_path / 'a' / 'b' / 'c'
    files.create_dir_if_not_exist(str(target))
    assert target.is_dir()


def test_create_dir_leaves_an_existing_folder_and_its_files(tmp_path):
    _touch(tmp_path / 'out' / 'keep.txt')
    files.create_dir_if_not_exist(tmp_path / 'out')
    assert (tmp_path / 'out' / 'keep.txt').read_text() == 'x'


def test_create_dir_over_a_file_is_refused_as_the_original_did(tmp_path):
    path = _touch(tmp_path / 'a.txt')
    with pytest.raises(RuntimeError, match='not a directory') as error:
        files.create_dir_if_not_exist(path)
    assert isinstance(error.value, ValueError)


def _create_same_dir(target, barrier, errors):
    barrier.wait()
    try:
        files.create_dir_if_not_exist(target)
    except Exception as e:  # reported to the parent
        errors.put(repr(e))


def test_create_dir_from_concurrent_processes_does_not_fail(tmp_path):
    # The original checked, then created: the second process got FileExistsError.
    context = multiprocessing.get_context('fork')
    barrier, errors = context.Barrier(4), context.Queue()
    target = str(tmp_path / 'shared' / 'out')
    workers = [context.Process(target=_create_same_dir, args=(target, barrier, errors))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert [worker.exitcode for worker in workers] == [0] * 4
    assert errors.empty()
    assert os.path.isdir(target)


# text and pickle files ----------------------------------------------------------------------

def test_text_round_trips_exactly(tmp_path):
    text = 'first line\r\nsecond: caf\u00e9 \u65e5\u672c\nthird\n'
    path = str(tmp_path / 'note.txt')
    files.write_text_to_file(path, text)
    assert files.read_text_from_file(path) == text
    with open(path, 'rb') as f:
        assert f.read() == text.encode('utf-8')


def test_write_text_replaces_a_file(tmp_path):
    path = tmp_path / 'note.txt'
    files.write_text_to_file(path, 'old')
    files.write_text_to_file(path, 'new')
    assert path.read_text() == 'new'


def test_write_text_of_bytes_is_refused_and_leaves_nothing(tmp_path):
    with pytest.raises(TypeError, match='data'):
        files.write_text_to_file(tmp_path / 'note.txt', b'bytes')
    assert os.listdir(tmp_path) == []


def test_write_text_into_a_missing_folder_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match='missing'):
        files.write_text_to_file(tmp_path / 'missing' / 'note.txt', 'text')


def test_read_text_of_a_latin1_file_keeps_the_error_and_names_the_file(tmp_path):
    path = tmp_path / 'notes.txt'
    path.write_bytes('caf\u00e9 au lait'.encode('latin-1'))
    with pytest.raises(UnicodeDecodeError) as error:
        files.read_text_from_file(path)
    assert any(str(path) in note for note in getattr(error.value, '__notes__', []))


def test_pickle_round_trips(tmp_path):
    data = {'name': 'run', 'values': [1, 2.5, None], 'nested': (b'\x00', {'a': 1})}
    path = str(tmp_path / 'data.pkl')
    files.save_pickle(path, data)
    assert files.load_pickle(path) == data
    with open(path, 'rb') as f:
        assert pickle.load(f) == data


def test_failed_pickle_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / 'data.pkl'
    files.save_pickle(path, [1, 2])
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        files.save_pickle(path, [1, lambda: 2])
    assert files.load_pickle(path) == [1, 2]
    assert os.listdir(tmp_path) == ['data.pkl']


def test_load_pickle_of_a_truncated_file_names_the_file(tmp_path):
    path = tmp_path / 'data.pkl'
    files.save_pickle(path, list(range(1000)))
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(Exception) as error:
        files.load_pickle(path)
    assert str(path) in ''.join(getattr(error.value, '__notes__', [])) + str(error.value)


def test_load_pickle_docstring_warns_that_it_runs_code():
    assert 'runs code' in files.load_pickle.__doc__


# prepare_output_dir -------------------------------------------------------------------------

def test_output_dir_holds_the_arguments_and_the_command(tmp_path):
    args = argparse.Namespace(lr=0.1, name='run', layers=[3, 4])
    out = files.prepare_output_dir(str(tmp_path / 'results'), args)
    assert os.path.dirname(out) == str(tmp_path / 'results')
    assert json.loads(files.read_text_from_file(os.path.join(out, 'args.txt'))) == {
        'lr': 0.1, 'name': 'run', 'layers': [3, 4]}
    assert files.read_text_from_file(os.path.join(out, 'command.txt')) == shlex.join(sys.argv)


def test_output_dir_takes_a_dict_and_values_json_cannot_write(tmp_path):
    out = files.prepare_output_dir(tmp_path, {'out': pathlib.Path('a/b'), 'seed': 1})
    args = json.loads(files.read_text_from_file(os.path.join(out, 'args.txt')))
    assert args == {'out': 'a/b', 'seed': 1}


def test_output_dir_is_named_by_the_time_format(tmp_path):
    out = files.prepare_output_dir(tmp_path, {}, time_format='run-%Y')
    assert os.path.basename(out).startswith('run-2')


def test_two_runs_in_the_same_second_get_two_folders(tmp_path):
    first = files.prepare_output_dir(tmp_path, {'run': 1}, time_format='fixed')
    second = files.prepare_output_dir(tmp_path, {'run': 2}, time_format='fixed')
    assert first != second
    assert json.loads((pathlib.Path(first) / 'args.txt').read_text()) == {'run': 1}
    assert json.loads((pathlib.Path(second) / 'args.txt').read_text()) == {'run': 2}


def test_command_is_recorded_quoted_so_it_can_be_rerun(tmp_path):
    script = tmp_path / 'train.py'
    script.write_text('import sys\n'
                      'from researchutils.files import prepare_output_dir\n'
                      'print(prepare_output_dir(sys.argv[1], {"a": 1}))\n')
    argv = [str(script), str(tmp_path / 'out'), '--name', 'two words']
    out = subprocess.run([sys.executable] + argv, check=True, capture_output=True, text=True,
                         cwd=ROOT).stdout.strip()
    command = (pathlib.Path(out) / 'command.txt').read_text()
    assert shlex.split(command) == argv


def test_a_command_with_an_argument_that_is_not_utf8_is_recorded_byte_for_byte(tmp_path):
    script = tmp_path / 'train.py'
    script.write_text('import sys\n'
                      'from researchutils.files import prepare_output_dir\n'
                      'print(prepare_output_dir(sys.argv[1], {"a": 1}))\n')
    latin1 = os.fsencode(str(tmp_path)) + b'/caf\xe9.npz'  # a Latin-1 file name
    done = subprocess.run([sys.executable, str(script), str(tmp_path / 'out'), latin1],
                          capture_output=True, cwd=ROOT,
                          env=dict(os.environ, LC_ALL='C.UTF-8', PYTHONUTF8='1'))
    assert done.returncode == 0, done.stderr.decode(errors='replace')[-2000:]
    out = os.fsdecode(done.stdout.strip())
    command = (pathlib.Path(out) / 'command.txt').read_bytes()
    assert latin1 in command
    assert shlex.split(command.decode('utf-8', 'surrogateescape'))[-1] == os.fsdecode(latin1)


# Each process says it is ready once it has imported researchutils, then waits for the go
# on its stdin: all of them then create their folders at the same moment, however long a
# busy machine takes to start them.
_RUN = ('import sys\n'
        'from researchutils.files import prepare_output_dir\n'
        'print("ready", flush=True)\n'
        'sys.stdin.readline()\n'
        'print(prepare_output_dir(sys.argv[1], {"worker": int(sys.argv[2])}, {!r}))\n')


@pytest.mark.parametrize('time_format', ['%Y-%m-%d-%H%M%S', 'same-%Y'])
def test_concurrent_processes_never_share_a_folder(tmp_path, time_format):
    code = _RUN.replace('{!r}', repr(time_format))
    workers = [subprocess.Popen([sys.executable, '-c', code, str(tmp_path), str(i)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                cwd=ROOT)
               for i in range(6)]
    # A worker that fails before it is ready closes its stdout: readline returns ''.
    assert [worker.stdout.readline() for worker in workers] == ['ready\n'] * 6
    for worker in workers:
        worker.stdin.write('go\n')
        worker.stdin.flush()
    outs = [worker.communicate(timeout=120)[0].strip() for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 6
    assert len(set(outs)) == 6
    recorded = sorted(json.loads((pathlib.Path(out) / 'args.txt').read_text())['worker']
                      for out in outs)
    assert recorded == list(range(6))
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(out) for out in outs)


def test_output_dir_refuses_a_time_format_with_a_separator(tmp_path):
    with pytest.raises(ValueError, match='time_format'):
        files.prepare_output_dir(tmp_path, {}, time_format='%Y/%m')


def test_output_dir_refuses_args_of_another_kind(tmp_path):
    with pytest.raises(TypeError, match='args'):
        files.prepare_output_dir(tmp_path, ['--lr', '0.1'])
    assert os.listdir(tmp_path) == []


class _Unprintable:
    def __str__(self):
        raise RuntimeError('cannot print')


def test_output_dir_is_removed_when_writing_the_arguments_fails(tmp_path):
    with pytest.raises(RuntimeError, match='cannot print'):
        files.prepare_output_dir(tmp_path, {'x': _Unprintable()}, time_format='fixed')
    assert os.listdir(tmp_path) == []


# Paths are a str or an os.PathLike: an int would be a file descriptor (True is standard
# output, 0 standard input), and a NUL byte is refused by name on every Python (3.11's
# os.stat says "embedded null byte" and names nothing).
PATH_CALLS = [
    ('pathstr', lambda path: files.search_all_files_under(path)),
    ('path', lambda path: files.file_exists(path)),
    ('outdir', lambda path: files.create_dir_if_not_exist(path)),
    ('file_path', lambda path: files.write_text_to_file(path, 'text')),
    ('file_path', lambda path: files.read_text_from_file(path)),
    ('file_path', lambda path: files.save_pickle(path, 1)),
    ('file_path', lambda path: files.load_pickle(path)),
    ('base_dir', lambda path: files.prepare_output_dir(path, None)),
]


@pytest.mark.parametrize('name, call', PATH_CALLS)
@pytest.mark.parametrize('path', [True, 0, 1, b'bytes', None])
def test_a_path_that_is_not_a_str_or_pathlike_is_refused_naming_it(name, call, path,
                                                                    tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match='{} must be a path .*got {}'.format(
            name, re.escape(repr(path)))):
        call(path)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('name, call', PATH_CALLS)
def test_a_path_with_a_nul_byte_is_refused_naming_it(name, call, tmp_path):
    with pytest.raises(ValueError, match='{} must not hold a NUL byte'.format(name)):
        call(str(tmp_path / 'with\0nul'))
    assert os.listdir(tmp_path) == []


def test_file_exists_of_true_is_refused_not_standard_output():
    with pytest.raises(TypeError, match='path must be a path'):
        files.file_exists(True)


def test_output_dir_refuses_a_nul_byte_in_the_time_format(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            'time_format must not hold a NUL byte, got {!r}'.format('%Y\0junk'))):
        files.prepare_output_dir(str(tmp_path), None, time_format='%Y\0junk')
    assert os.listdir(tmp_path) == []


def test_output_dir_over_a_file_names_base_dir(tmp_path):
    base_dir = tmp_path / 'runs'
    base_dir.write_text('a file')
    with pytest.raises(ValueError, match="^base_dir '.*runs' exists and is not a directory"):
        files.prepare_output_dir(base_dir, None)


# What the checks name, and the cases they draw a line between -------------------------------

@pytest.mark.parametrize('exts', [b'.txt', {'.txt': True}, 5])
def test_search_refuses_exts_that_are_not_extensions_or_a_list_of_them(tree, exts):
    with pytest.raises(TypeError, match='^exts must be .*got {}'.format(re.escape(repr(exts)))):
        files.search_all_files_under(tree[0], exts=exts)


def test_search_refuses_an_extension_that_is_not_a_str_naming_it(tree):
    with pytest.raises(TypeError, match=r'^exts must be .*got 3$'):
        files.search_all_files_under(tree[0], exts=['.txt', 3])


@pytest.mark.parametrize('ext', ['.', 'txt', ''])
def test_search_refuses_an_extension_without_a_dot_and_a_name(tree, ext):
    with pytest.raises(ValueError, match='^exts must be .*got {}$'.format(re.escape(repr(ext)))):
        files.search_all_files_under(tree[0], exts=[ext])


def test_search_takes_any_iterable_of_extensions(tree):
    root, _ = tree
    found = files.search_all_files_under(root, exts=(ext for ext in ['.md']))
    assert _relative(found, root) == ['b.md', 'sub/d.md']


def test_search_refusals_name_the_folder_given(tmp_path):
    missing = tmp_path / 'missing'
    with pytest.raises(ValueError, match='^pathstr {} does not exist$'.format(
            re.escape(repr(str(missing))))):
        files.search_all_files_under(missing)
    path = _touch(tmp_path / 'a.txt')
    with pytest.raises(ValueError, match='^pathstr {} is not a folder$'.format(
            re.escape(repr(str(path))))):
        files.search_all_files_under(path)


def test_create_dir_over_a_file_names_outdir_and_the_path(tmp_path):
    path = _touch(tmp_path / 'a.txt')
    with pytest.raises(ValueError, match="^outdir {} exists and is not a directory$".format(
            re.escape(repr(str(path))))):
        files.create_dir_if_not_exist(path)


def test_write_text_of_bytes_names_data_and_its_type(tmp_path):
    with pytest.raises(TypeError, match='^data must be a str, got bytes$'):
        files.write_text_to_file(tmp_path / 'note.txt', b'bytes')


def test_write_text_into_a_missing_folder_names_the_folder_and_the_file(tmp_path):
    path = str(tmp_path / 'missing' / 'note.txt')
    with pytest.raises(FileNotFoundError) as raised:
        files.write_text_to_file(path, 'text')
    assert repr(str(tmp_path / 'missing')) in str(raised.value)
    assert repr(path) in str(raised.value)


def test_save_pickle_into_a_missing_folder_is_refused_and_writes_nothing(tmp_path):
    with pytest.raises(FileNotFoundError, match='missing'):
        files.save_pickle(tmp_path / 'missing' / 'data.pkl', [1])
    assert os.listdir(tmp_path) == []


def test_load_pickle_reads_python_2_strings_as_bytes(tmp_path):
    # Python 2's pickle of the str 'abc' (SHORT_BINSTRING): text of unknown encoding.
    path = tmp_path / 'py2.pkl'
    path.write_bytes(b'\x80\x02U\x03abcq\x00.')
    assert files.load_pickle(path) == b'abc'


def test_load_pickle_of_a_missing_file_names_it(tmp_path):
    path = tmp_path / 'absent.pkl'
    with pytest.raises(FileNotFoundError, match='absent.pkl'):
        files.load_pickle(path)


def test_output_dir_without_arguments_writes_null(tmp_path):
    out = files.prepare_output_dir(tmp_path, None)
    assert files.read_text_from_file(os.path.join(out, 'args.txt')) == 'null'


def test_runs_in_the_same_second_are_numbered_from_one(tmp_path):
    outs = [files.prepare_output_dir(tmp_path, {'run': i}, time_format='fixed')
            for i in range(3)]
    assert [os.path.basename(out) for out in outs] == ['fixed', 'fixed-1', 'fixed-2']


@pytest.mark.parametrize('time_format', ['', '.', '..', 'a/b'])
def test_output_dir_refuses_a_time_format_giving_no_folder_name_of_its_own(tmp_path,
                                                                          time_format):
    # The folder name is the time format itself here: it has no % codes.
    with pytest.raises(ValueError, match=re.escape('time_format {!r} gives the folder name {!r}'
                                                   .format(time_format, time_format))):
        files.prepare_output_dir(tmp_path, {}, time_format=time_format)
    assert os.listdir(tmp_path) == []


def test_output_dir_refuses_a_time_format_that_is_not_a_str(tmp_path):
    with pytest.raises(TypeError, match='^time_format '):
        files.prepare_output_dir(tmp_path, {}, time_format=5)
    assert os.listdir(tmp_path) == []


def test_output_dir_refusal_of_args_names_their_type(tmp_path):
    with pytest.raises(TypeError, match='^args must be .*got list$'):
        files.prepare_output_dir(tmp_path, ['--lr', '0.1'])


# _files: the atomic writer under every module that writes files ------------------------------

def _write(path, text):
    _files.write_atomically(str(path), lambda stream: stream.write(text.encode()),
                            overwrite=False)


def test_a_fifo_named_like_a_temporary_is_neither_waited_on_nor_removed(tmp_path):
    # Opened for its lock without blocking: a FIFO with no writer would block a plain open.
    fifo = tmp_path / '.note.txt.0123456789ab.tmp'
    os.mkfifo(fifo)
    files.write_text_to_file(tmp_path / 'note.txt', 'text')
    assert sorted(os.listdir(tmp_path)) == sorted([fifo.name, 'note.txt'])


def _tokens(monkeypatch, *tokens):
    """Makes the temporary names' random parts ``tokens``, in turn, the last one forever."""
    given = list(tokens)
    monkeypatch.setattr(_files.secrets, 'token_hex',
                        lambda size: given.pop(0) if len(given) > 1 else given[0])


def test_a_temporary_name_taken_by_a_live_writer_is_skipped_for_a_free_one(tmp_path,
                                                                          monkeypatch):
    taken = tmp_path / '.note.txt.aaaaaaaaaaaa.tmp'
    with open(taken, 'wb') as live:
        fcntl.flock(live, fcntl.LOCK_EX)  # its writer is alive: no sweep removes it
        _tokens(monkeypatch, 'aaaaaaaaaaaa', 'bbbbbbbbbbbb')
        files.write_text_to_file(tmp_path / 'note.txt', 'text')
        assert (tmp_path / 'note.txt').read_text() == 'text'
        assert sorted(os.listdir(tmp_path)) == [taken.name, 'note.txt']


def test_no_free_temporary_name_is_an_error_naming_the_file_and_folder(tmp_path, monkeypatch):
    taken = tmp_path / '.note.txt.aaaaaaaaaaaa.tmp'
    with open(taken, 'wb') as live:
        fcntl.flock(live, fcntl.LOCK_EX)
        _tokens(monkeypatch, 'aaaaaaaaaaaa')
        with pytest.raises(FileExistsError) as raised:
            files.write_text_to_file(tmp_path / 'note.txt', 'text')
    assert raised.value.errno == errno.EEXIST
    assert repr('note.txt') in str(raised.value) and repr(str(tmp_path)) in str(raised.value)
    assert os.listdir(tmp_path) == [taken.name]


def _without_hard_links(monkeypatch):
    """link() refused as by a file system without hard links (FAT, some network shares)."""
    def refuse(source, target):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(_files.os, 'link', refuse)


def test_a_new_file_is_published_on_a_file_system_without_hard_links(tmp_path, monkeypatch):
    _without_hard_links(monkeypatch)
    _write(tmp_path / 'new.txt', 'text')
    assert os.listdir(tmp_path) == ['new.txt']
    assert (tmp_path / 'new.txt').read_text() == 'text'


def test_an_existing_file_is_kept_on_a_file_system_without_hard_links(tmp_path, monkeypatch):
    (tmp_path / 'taken.txt').write_text('first')
    _without_hard_links(monkeypatch)
    with pytest.raises(FileExistsError, match='taken.txt'):
        _write(tmp_path / 'taken.txt', 'second')
    assert os.listdir(tmp_path) == ['taken.txt']
    assert (tmp_path / 'taken.txt').read_text() == 'first'


def test_a_new_file_never_replaces_one_made_meanwhile(tmp_path):
    path = tmp_path / 'taken.txt'

    def write(stream):
        path.write_text('made meanwhile')
        stream.write(b'second')

    with pytest.raises(FileExistsError):
        _files.write_atomically(str(path), write, overwrite=False)
    assert os.listdir(tmp_path) == ['taken.txt'] and path.read_text() == 'made meanwhile'


@pytest.mark.parametrize('ext', ['.c', '.h'])
def test_search_takes_a_one_letter_extension(tmp_path, ext):
    _touch(tmp_path / 'src' / ('main' + ext))
    _touch(tmp_path / 'src' / 'notes.txt')
    found = files.search_all_files_under(tmp_path / 'src', exts=[ext])
    assert _relative(found, tmp_path / 'src') == ['main' + ext]


def test_text_files_are_utf_8_whatever_the_locale_of_the_process(tmp_path):
    # Under the C locale without UTF-8 mode, open() would use ASCII.
    code = ('import sys\n'
            'from researchutils.files import read_text_from_file, write_text_to_file\n'
            'write_text_to_file(sys.argv[1], "caf\\u00e9")\n'
            'print(ascii(read_text_from_file(sys.argv[1])))\n')
    path = tmp_path / 'note.txt'
    env = dict(os.environ, LC_ALL='C', LANG='C', PYTHONUTF8='0', PYTHONCOERCECLOCALE='0')
    out = subprocess.run([sys.executable, '-c', code, str(path)], env=env, cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == ascii('caf\u00e9')
    assert path.read_bytes() == 'caf\u00e9'.encode('utf-8')
    assert files.read_text_from_file(path) == 'caf\u00e9'  # and here, whatever the locale


def test_output_dir_is_named_by_the_time_by_default(tmp_path):
    out = files.prepare_output_dir(tmp_path, {})
    assert re.fullmatch(r'\d{4}-\d\d-\d\d-\d{6}', os.path.basename(out))


def test_output_dir_is_removed_when_writing_the_command_fails(tmp_path, monkeypatch):
    # The disk fills up after args.txt: the half-written folder goes again.
    write_atomically = files.write_atomically

    def disk_full_at_the_command(path, write, **kwargs):
        if str(path).endswith('command.txt'):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_atomically(path, write, **kwargs)

    monkeypatch.setattr(files, 'write_atomically', disk_full_at_the_command)
    with pytest.raises(OSError) as raised:
        files.prepare_output_dir(tmp_path, {'lr': 0.1}, time_format='fixed')
    assert raised.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []


def test_every_dead_temporary_is_removed_whatever_else_is_named_like_one(tmp_path):
    # Beside the dead (unlocked) temporaries: live ones (locked) and links, which a sweep
    # skips, in whatever order the folder lists them.
    def temporary(i):
        return tmp_path / '.note.txt.{:012x}.tmp'.format(i)

    dead = [temporary(i) for i in range(3)]
    for path in dead:
        path.write_bytes(b'left by a killed writer')
    links = [temporary(i) for i in range(3, 6)]
    for path in links:
        os.symlink(tmp_path / 'elsewhere', path)
    live = [open(temporary(i), 'wb') for i in range(6, 9)]
    try:
        for stream in live:
            fcntl.flock(stream, fcntl.LOCK_EX)
        files.write_text_to_file(tmp_path / 'note.txt', 'text')
        kept = sorted(path.name for path in links + [temporary(i) for i in range(6, 9)])
        assert sorted(os.listdir(tmp_path)) == sorted(kept + ['note.txt'])
    finally:
        for stream in live:
            stream.close()
