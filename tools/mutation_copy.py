"""The scratch copy of the checkout that mutmut runs in (tools/mutation.py).

The copy holds the package, the compat finder, the tests and pytest's settings with a
``[tool.mutmut]`` table for one module, and a conftest.py of its own (FORK_SERVER_CONFTEST
says why). Tested by tests/test_mutation_tool.py.
"""
import json
import os
import shutil
import subprocess

from mutation_targets import GUARDED_FOLDERS, REPO

# What the copy needs: the package, the compat finder, the tests and pytest's settings, and
# the examples some tests load (the demo's model).
_COPIED = ('researchutils', '_researchutils_chainer_compat', 'tests', 'pyproject.toml',
           'setup.py', 'README.md', 'examples')


def _checkout_files():
    """The files of the working tree (tracked, and new ones git does not ignore)."""
    listed = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z', '--']
                            + list(_COPIED), cwd=REPO, capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split('\0')
            if name and os.path.isfile(os.path.join(REPO, name))]


#: The copy's own conftest.py (beside its pyproject.toml, so every run of the tests there
#: loads it; the checkout has none). mutmut runs the tests once in its own process to see
#: which tests reach which function, then runs each mutant's tests in a process forked
#: from that one by a bare os.fork(). A multiprocessing fork server started by the first
#: run (the worker-pool tests start one) would be the parent's, not the forked process's
#: child: its next forkserver worker fails to start (waitpid on a process that is not its
#: child: ChildProcessError, in the thread that starts the workers), and every mutant's
#: run fails after the tests' deadline, a mutant caught by nothing. A process forked from
#: one that has a fork server forgets it, and starts its own when it needs one. (Stopping
#: the server at the end of each session instead waits for it to exit, which it does only
#: once every copy of its "alive" pipe is closed: a worker a test left to the interpreter's
#: exit holds one, and the wait never ends.)
FORK_SERVER_CONFTEST = '''\
"""Written by tools/mutation.py into its scratch copy; not part of the suite."""
import multiprocessing.forkserver
import os


def _forget_the_parents_fork_server():
    server = multiprocessing.forkserver._forkserver
    if server._forkserver_pid is None:
        return
    # Its copy of the parent's end of the server's "alive" pipe; the parent keeps its own.
    os.close(server._forkserver_alive_fd)
    server._forkserver_pid = server._forkserver_alive_fd = None
    server._forkserver_address = None


os.register_at_fork(after_in_child=_forget_the_parents_fork_server)
'''


def write_conftest(workdir):
    """Writes FORK_SERVER_CONFTEST as ``workdir/conftest.py``."""
    with open(os.path.join(workdir, 'conftest.py'), 'w') as stream:
        stream.write(FORK_SERVER_CONFTEST)


def prepare(module, tests, workdir):
    """A scratch copy of the checkout in ``workdir``, configured for mutmut."""
    shutil.rmtree(workdir, ignore_errors=True)
    for name in _checkout_files():
        target = os.path.join(workdir, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(REPO, name), target)
    write_conftest(workdir)
    pattern = 'researchutils/' + module + ('*' if module.endswith('/') else '')
    # A listed module inside this one (the search inside the experiment's package) has a
    # run of its own.
    nested = ['researchutils/' + other + '*' for other in GUARDED_FOLDERS
              if other != module and other.startswith(module)]
    settings = {
        'source_paths': ['researchutils'],
        'only_mutate': [pattern],
        'do_not_mutate': nested,
        'pytest_add_cli_args_test_selection': tests,
        # One process per mutant; the markers of other machines (MPI, GPU) stay out.
        'pytest_add_cli_args': ['-p', 'no:cacheprovider', '-p', 'no:randomly', '-q',
                                '-m', 'not mpi and not gpu', '-n', '0'],
        'use_git_change_detection': False,
        # The demo's model (examples/video_prediction), which export and tracing tests load.
        'also_copy': ['conftest.py', 'examples'],
    }
    with open(os.path.join(workdir, 'pyproject.toml'), 'a') as stream:
        stream.write('\n[tool.mutmut]\n')
        for key, value in settings.items():
            stream.write('{} = {}\n'.format(key, json.dumps(value)))


def load_results(workdir):
    """mutant name -> (source path, exit code) from mutmut's .meta files."""
    results = {}
    root = os.path.join(workdir, 'mutants')
    for folder, _, names in os.walk(os.path.join(root, 'researchutils')):
        for name in names:
            if not name.endswith('.py.meta'):
                continue
            with open(os.path.join(folder, name)) as stream:
                meta = json.load(stream)
            source = os.path.relpath(os.path.join(folder, name[:-len('.meta')]), root)
            for mutant, code in meta['exit_code_by_key'].items():
                results[mutant] = (source, code)
    return results


#: What the copy's runs leave out of this process's environment: the caller's import path
#: (mutmut imports mutants/ first on sys.path, and nothing may stand in its place), a pytest
#: run's state, and the file make test records each stack's outcomes in
#: (tests/support/run_record.py), which a mutant's failing tests are no part of.
_NOT_COPIED = ('PYTHONPATH', 'PYTHONHOME', 'RESEARCHUTILS_TEST_RECORD')


def copy_environment():
    """This process's environment for a run in the copy (``_NOT_COPIED`` says what not)."""
    return {name: value for name, value in os.environ.items()
            if name not in _NOT_COPIED and not name.startswith('PYTEST_')}
