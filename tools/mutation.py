"""Mutation testing of the modules that guard data and results: ``make mutation``.

Runs mutmut 3 (``pip install -e '.[mutation]'``) on one module at a time, each in a scratch
copy of this checkout (``build/mutation/<module>``), with the tests of that module only: its
mirrored test files under ``tests/`` (``researchutils/a/b.py`` -> ``tests/a/test_b.py``, a
package -> its folder of tests) and the few listed in ``EXTRA_TESTS``; mutmut then runs, for
each mutant, only those of them that reached the mutated function. Writes per module
``build/mutation/<module>.txt`` (and ``.json``): mutants made, killed, surviving, timed out,
and each survivor's file, line and change. Mutants that change only the wording of a message
(a string inside a ``raise``, a ``warnings.warn`` or a ``write``) are counted apart, and
those listed in ``tests/mutation_equivalent.txt`` (no user can tell them from the original,
one line each says why) are left out of the score.

    python tools/mutation.py [--workers N] [--check PERCENT] [MODULE ...]

MODULE is a path under ``researchutils/`` (``chainer/training/json_values.py``) or a key of
``MODULES``; none: every module of ``MODULES`` in turn (hours on 2 cores). ``--check`` exits
1 when a module's score (killed / (made - messages-only - equivalent)) is below PERCENT.
Figures and the reasons for mutmut: docs/testing.rst ("Mutation testing").
"""
import argparse
import ast
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(REPO, 'build', 'mutation')
EQUIVALENT = os.path.join(REPO, 'tests', 'mutation_equivalent.txt')

#: The modules that guard data and results (issue 33), as paths under researchutils/: one
#: file each, so that each gets its own report and score. GUARDED_FOLDERS are listed whole
#: (every module of theirs with code, or NOT_MUTATED says why not;
#: tests/test_mutation_tool.py checks that none is left out), the rest one by one.
GUARDED_FOLDERS = [
    'chainer/training/_experiment/',
    'chainer/training/_experiment/search/',
    'chainer/data_loading/',
    'chainer/serializers/',
]
#: Modules of GUARDED_FOLDERS left out, and why.
NOT_MUTATED = {
    'chainer/data_loading/sequential_sampler.py': 'mutmut 3 makes no mutant of it',
}
MODULES = [
    'chainer/training/_experiment/checks.py',
    'chainer/training/_experiment/settings.py',
    'chainer/training/_experiment/files.py',
    'chainer/training/_experiment/model.py',
    'chainer/training/_experiment/model_selection.py',
    'chainer/training/_experiment/run_state.py',
    'chainer/training/_experiment/tracking.py',
    'chainer/training/_experiment/trainer.py',
    'chainer/training/_experiment/search/__init__.py',
    'chainer/training/_experiment/search/folders.py',
    'chainer/training/_experiment/search/objective.py',
    'chainer/training/_experiment/search/retries.py',
    'chainer/training/_experiment/search/space.py',
    'chainer/training/_experiment/search/studies.py',
    'chainer/training/_experiment/search/summary.py',
    'chainer/training/_experiment/search/tracking.py',
    'chainer/training/search_space.py',
    'chainer/training/json_values.py',
    'chainer/training/_ownership.py',
    'chainer/data_loading/_batch_iterator.py',
    'chainer/data_loading/_batches.py',
    'chainer/data_loading/abstract_dataset.py',
    'chainer/data_loading/abstract_sampler.py',
    'chainer/data_loading/data_manager.py',
    'chainer/data_loading/random_sampler.py',
    'chainer/training/extensions/preemption_snapshot.py',
    'chainer/training/extensions/_signal_handlers.py',
    'chainer/training/extensions/_slurm_requeue.py',
    'chainer/serializers/npz.py',
    'chainer/serializers/_safe_npz.py',
    'files.py',
    '_files.py',
    '_process_pool.py',
]

_SEARCH_TESTS = ['tests/chainer/training/test_search.py',
                 'tests/chainer/training/test_search_retries.py']
#: Tests beyond the mirrored ones, where a module's behaviour is tested through its user.
EXTRA_TESTS = {
    'chainer/training/_experiment/': ['tests/chainer/training/test_experiment.py'],
    'chainer/training/_experiment/search/': _SEARCH_TESTS,
    # Each of the search's modules is measured with its own tests alone (its mirror; for
    # __init__.py, whose mirror would be test_init__.py, named here): the search's tests run
    # whole searches, often in other processes, whose runs mutmut does not credit, minutes
    # a mutant.
    'chainer/training/_experiment/search/__init__.py': [
        'tests/chainer/training/_experiment/search/test_init.py'],
    'chainer/training/search_space.py': ['tests/chainer/training/_experiment/search/test_space.py',
                                         'tests/chainer/training/test_parameters.py'],
    'chainer/training/json_values.py': ['tests/chainer/training/test_parameters.py',
                                        'tests/chainer/training/test_search_space.py'],
    'chainer/training/extensions/_signal_handlers.py': [
        'tests/chainer/training/extensions/test_preemption_snapshot_handlers.py'],
    'chainer/training/extensions/preemption_snapshot.py': [
        'tests/chainer/training/extensions/test_preemption_snapshot_handlers.py',
        'tests/chainer/training/extensions/test_signal_handlers.py'],
    'chainer/serializers/': ['tests/chainer/training/test_experiment_preemption.py'],
    'chainer/data_loading/_batch_iterator.py': ['tests/chainer/data_loading/test_data_manager.py'],
    'chainer/data_loading/abstract_sampler.py': [
        'tests/chainer/data_loading/test_random_sampler.py',
        'tests/chainer/data_loading/test_sequential_sampler.py'],
    'chainer/data_loading/_batches.py': ['tests/chainer/data_loading/test_data_manager.py'],
    '_files.py': ['tests/test_files.py', 'tests/chainer/serializers/test_npz.py'],
    '_process_pool.py': ['tests/test_lazy_pool.py', 'tests/test_process_worker.py',
                         'tests/test_chunks.py'],
}

#: Tests run only under ``mpiexec`` (ChainerMN): mutmut runs pytest in one process, where
#: they skip, so a module's code for several ranks survives it. ``--under-mpi`` runs each
#: survivor of such a module again with these tests under ``mpiexec -n 2``
#: (:func:`rerun_under_mpi`) and counts those they catch.
MPI_TESTS = {
    'chainer/training/_experiment/trainer.py': [
        'tests/chainer/training/test_experiment_mpi.py',
        'tests/chainer/training/test_experiment_preemption_mpi.py'],
    'chainer/training/_experiment/search/objective.py': [
        'tests/chainer/training/test_search_mpi.py'],
    'chainer/training/_experiment/search/__init__.py': [
        'tests/chainer/training/test_search_mpi.py'],
    'chainer/training/extensions/preemption_snapshot.py': [
        'tests/chainer/training/extensions/test_preemption_snapshot_mpi.py'],
}
_MPIEXEC = ['mpiexec', '--allow-run-as-root', '--oversubscribe', '-n', '2']

#: ``make mutation-sample``, the CI-sized check ``make test`` runs: a fixed tenth of the
#: mutants (SAMPLE_PATTERN: those whose number ends in 0) of modules whose tests take
#: seconds, so a drop in the suite's strength shows in every run, in about two minutes.
SAMPLE_MODULES = [
    'chainer/training/json_values.py',
    'chainer/training/search_space.py',
]
SAMPLE_PATTERN = '*__mutmut_*0'

# What the copy needs: the package, the compat finder, the tests and pytest's settings.
_COPIED = ('researchutils', '_researchutils_chainer_compat', 'tests', 'pyproject.toml',
           'setup.py', 'README.md')
# Calls whose string arguments are messages to a person (add_note: an exception's note),
# under these names or a module's private alias of them (_add_note).
_MESSAGE_CALLS = {'warn', 'write', 'warning', 'error', 'info', 'debug', 'print', 'add_note'}
# mutmut's exit codes (mutmut/stats.py) grouped as the report counts them.
_KILLED = {1, 3, 37}
_SURVIVED = {0}
# mutmut's exit code for a mutant that no test reached (in pytest's own process).
_NO_TESTS = 33
_TIMED_OUT = {36, 24, -24, 152, 255}


def _killed(code):
    """Whether mutmut's exit code ``code`` says the tests caught the mutant: they failed,
    or the process running them died of a signal (negative: a signal the tests send, such
    as SIGUSR1, that the mutant left without its handler), other than mutmut's own CPU
    limit (SIGXCPU: timed out)."""
    return code in _KILLED or (code is not None and code < 0 and code not in _TIMED_OUT)


def mirrored_tests(module):
    """The test files and folders of ``module`` (a path under researchutils/): its mirror
    under tests/ when there is one, and those of EXTRA_TESTS."""
    if module.endswith('/'):
        mirror = [os.path.join('tests', module)]
    else:
        folder, name = os.path.split(module)
        mirror = [os.path.join('tests', folder, 'test_' + name.lstrip('_'))]
        mirror.append(os.path.join('tests', folder, 'test_' + name))
    found = [path for path in mirror + EXTRA_TESTS.get(module, [])
             if os.path.exists(os.path.join(REPO, path))]
    return sorted(set(found))


def _slug(module):
    return module.strip('/').replace('/', '.').replace('.py', '') or 'researchutils'


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


def _prepare(module, tests, workdir):
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
        'also_copy': ['conftest.py'],
    }
    with open(os.path.join(workdir, 'pyproject.toml'), 'a') as stream:
        stream.write('\n[tool.mutmut]\n')
        for key, value in settings.items():
            stream.write('{} = {}\n'.format(key, json.dumps(value)))


def _load_results(workdir):
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


def _function_nodes(tree):
    """(class name or None, function node) of every function of ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.name, item
        elif isinstance(node, ast.Module):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield None, item


def _message_strings(tree):
    """The ids of the string constants of ``tree`` that are messages to a person."""
    found = set()
    for node in ast.walk(tree):
        scope = None
        if isinstance(node, ast.Raise):
            scope = node.exc
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', '')
            if name.lstrip('_') in _MESSAGE_CALLS:
                scope = node
        if scope is not None:
            found.update(id(child) for child in ast.walk(scope)
                         if isinstance(child, ast.Constant) and isinstance(child.value, str))
    return found


def _only_messages(original, mutant):
    """Whether the function ``mutant`` differs from ``original`` only in message strings."""
    try:
        before, after = ast.parse(original), ast.parse(mutant)
    except SyntaxError:
        return False
    nodes_before, nodes_after = list(ast.walk(before)), list(ast.walk(after))
    if len(nodes_before) != len(nodes_after):
        return False
    messages = _message_strings(before)
    changed = False
    for old, new in zip(nodes_before, nodes_after):
        if type(old) is not type(new):
            return False
        if isinstance(old, ast.Constant):
            if old.value != new.value or type(old.value) is not type(new.value):
                if not (isinstance(old.value, str) and id(old) in messages):
                    return False
                changed = True
        else:
            fields_old = [(k, v) for k, v in ast.iter_fields(old)
                          if not isinstance(v, (ast.AST, list))]
            fields_new = [(k, v) for k, v in ast.iter_fields(new)
                          if not isinstance(v, (ast.AST, list))]
            if fields_old != fields_new:
                return False
    return changed


def _describe(workdir, mutant, source):
    """(line, change, messages only) of one mutant: the line in the original file, the
    changed lines of mutmut's diff, and whether only message strings changed."""
    if workdir not in sys.path:
        sys.path.insert(0, workdir)
    import libcst  # noqa: E402 (mutmut's, present where mutmut is)
    from mutmut.mutation import diff_apply  # noqa: E402
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        diff = diff_apply.get_diff_for_mutant(mutant, path=source)
        functions = diff_apply.read_functions_from_index(mutant, source)
        if functions is None:
            module = diff_apply.read_mutants_module(source)
            functions = (diff_apply.read_original_function(module, mutant),
                         diff_apply.read_mutant_function(module, mutant))
    finally:
        os.chdir(cwd)
    original, mutated = (textwrap.dedent(libcst.Module([f]).code) for f in functions)
    removed = [line[1:].strip() for line in diff.splitlines()
               if line.startswith('-') and not line.startswith('---')]
    added = [line[1:].strip() for line in diff.splitlines()
             if line.startswith('+') and not line.startswith('+++')]
    line = _line_of(os.path.join(REPO, source), mutant, original, mutated)
    change = '{} -> {}'.format(' / '.join(removed), ' / '.join(added))
    return line, change, _only_messages(original, mutated)


def _line_of(path, mutant, original, mutated):
    """The line of ``path`` where ``mutant`` (``module.x_f__mutmut_3``,
    ``module.xǁCǁm__mutmut_3``) changes it: the function's first line in the file plus the
    offset of the first line that differs."""
    key = mutant.rsplit('__mutmut_', 1)[0].rsplit('.', 1)[-1]
    if 'ǁ' in key:
        _, cls, name = key.split('ǁ')
    else:
        cls, name = None, key[2:]
    with open(path) as stream:
        tree = ast.parse(stream.read())
    node = next((node for owner, node in _function_nodes(tree)
                 if owner == cls and node.name == name), None)
    if node is None:
        return None
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    before, after = original.strip('\n').splitlines(), mutated.strip('\n').splitlines()
    offset = next((i for i, (old, new) in enumerate(zip(before, after)) if old != new),
                  min(len(before), len(after)))
    return start + offset


def read_equivalent(path=EQUIVALENT):
    """mutant name -> why it is equivalent, from ``tests/mutation_equivalent.txt`` (lines
    ``NAME  # why``; blank lines and lines starting with # are skipped)."""
    listed = {}
    if not os.path.exists(path):
        return listed
    with open(path) as stream:
        for line in stream:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            name, _, why = line.partition('#')
            listed[name.strip()] = why.strip()
    return listed


def _copy_environment():
    """This process's environment for a run in the copy, which is what mutmut imports
    (mutants/ first on sys.path): nothing of the caller's path may stand in its place."""
    return {name: value for name, value in os.environ.items()
            if name not in ('PYTHONPATH', 'PYTHONHOME') and not name.startswith('PYTEST_')}


def _score(report):
    """The share of the counted mutants (made, less messages only and equivalents) that
    were caught: killed, timed out (a user would see the run hang) or killed under mpiexec."""
    counted = report['made'] - len(report['messages_only']) - len(report['equivalent'])
    caught = report['killed'] + report['timed_out'] + report.get('killed_under_mpi', 0)
    return round(100.0 * caught / counted, 1) if counted else 100.0


def _mpi_run(workdir, tests, mutant, python, timeout):
    """Exit code of ``tests`` under ``mpiexec -n 2`` in the copy's ``mutants`` folder with
    ``mutant`` active (mutmut's trampolines read MUTANT_UNDER_TEST in every process), or
    None when they ran past ``timeout`` seconds."""
    env = dict(_copy_environment(), MUTANT_UNDER_TEST=mutant)
    command = _MPIEXEC + [python, '-m', 'pytest', '-m', 'mpi', '-x', '-q', '-p',
                          'no:cacheprovider', '-p', 'no:randomly'] + list(tests)
    try:
        return subprocess.run(command, cwd=os.path.join(workdir, 'mutants'), env=env,
                              capture_output=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return None


def _unreached(report):
    """The report's mutants that no test reached in pytest's own process."""
    return [entry for entry in report['other'] if entry['exit_code'] == _NO_TESTS]


def rerun_under_mpi(module, workdir, report, python=sys.executable):
    """Runs each survivor of ``report``, and each mutant no test reached, with the module's
    MPI_TESTS under mpiexec; those the tests fail on (or that hang) count as
    ``killed_under_mpi``. The verdicts are kept in the copy (``mpi_verdicts.json``) for
    ``--report-only``."""
    tests = MPI_TESTS.get(module)
    if not tests:
        raise SystemExit('mutation: {} has no tests under mpiexec (MPI_TESTS)'.format(module))
    path = os.path.join(workdir, 'mpi_verdicts.json')
    verdicts = {}
    if os.path.exists(path):
        with open(path) as stream:
            verdicts = json.load(stream)
    # The survivors, and those no test reached in one process (code that only the ranks of
    # a ChainerMN run run), not judged yet.
    pending = [entry['mutant'] for entry in report['surviving'] + _unreached(report)
               if entry['mutant'] not in verdicts]
    if pending:
        started = time.monotonic()
        if _mpi_run(workdir, tests, 'none', python, None) != 0:
            raise SystemExit('mutation: {} fail under mpiexec without a mutant'.format(
                ' '.join(tests)))
        # A mutant that makes them run three times as long as they do unchanged hangs
        # (OpenMPI ends every rank when one exits with an error, so a failure is quick).
        timeout = 3 * (time.monotonic() - started) + 30
        for mutant in pending:
            verdicts[mutant] = _mpi_run(workdir, tests, mutant, python, timeout)
            with open(path, 'w') as stream:
                json.dump(verdicts, stream, indent=1)
    count_mpi_verdicts(report, verdicts, tests)


def count_mpi_verdicts(report, verdicts, tests):
    """Moves the survivors and unreached mutants that the tests under mpiexec caught
    (``verdicts``: mutant -> exit code, None for a hang) to ``killed_under_mpi``, and scores
    again."""
    def caught(entry):
        return verdicts.get(entry['mutant'], 0) != 0

    before = len(report['surviving']) + len(report['other'])
    # Of the others, only those no test reached in one process were run (rerun_under_mpi).
    report['surviving'] = [entry for entry in report['surviving'] if not caught(entry)]
    report['other'] = [entry for entry in report['other'] if not caught(entry)]
    report['killed_under_mpi'] = (report.get('killed_under_mpi', 0) + before
                                  - len(report['surviving']) - len(report['other']))
    report['mpi_tests'] = list(tests)
    report['score'] = _score(report)


def run_module(module, workers, mutants=(), python=sys.executable, resume=False,
               report_only=False, under_mpi=False):
    """Runs mutmut on ``module``; returns the report as a dict. With ``resume``, goes on
    in the copy of an earlier run that stopped (only the mutants not yet checked run)."""
    tests = mirrored_tests(module)
    if not tests:
        raise SystemExit('mutation: no tests mirror {!r} (tests/ mirrors researchutils/): '
                         'add them, or list them in EXTRA_TESTS'.format(module))
    workdir = os.path.join(SCRATCH, _slug(module))
    if not ((resume or report_only) and os.path.isdir(os.path.join(workdir, 'mutants'))):
        _prepare(module, tests, workdir)
    env = _copy_environment()
    started = time.monotonic()
    done = subprocess.CompletedProcess([], 0, '', '')
    if not report_only:
        done = subprocess.run([python, '-m', 'mutmut', 'run', '--max-children', str(workers)]
                              + list(mutants), cwd=workdir, env=env, capture_output=True,
                              text=True)
    minutes = (time.monotonic() - started) / 60
    results = _load_results(workdir)
    if mutants:
        results = select(results, mutants)
    if done.returncode != 0 and all(code is None for _, code in results.values()):
        raise SystemExit('mutation: mutmut failed on {}:\n{}\n{}'.format(
            module, done.stdout[-3000:], done.stderr[-3000:]))
    equivalent = read_equivalent()
    report = {'module': module, 'tests': tests, 'minutes': round(minutes, 1),
              'made': len(results), 'killed': 0, 'timed_out': 0, 'surviving': [],
              'messages_only': [], 'equivalent': [], 'other': []}
    for mutant, (source, code) in sorted(results.items()):
        if _killed(code):
            report['killed'] += 1
        elif code in _TIMED_OUT:
            report['timed_out'] += 1
        elif code in _SURVIVED:
            _sort_survivor(workdir, report, equivalent, mutant, source)
        else:
            report['other'].append({'mutant': mutant, 'file': source, 'exit_code': code})
    report['score'] = _score(report)
    if under_mpi:
        rerun_under_mpi(module, workdir, report, python)
        # Those no test reached in one process, and that the tests under mpiexec let
        # through, are survivors like the others: a message, an equivalent, or a gap.
        for entry in _unreached(report):
            report['other'].remove(entry)
            _sort_survivor(workdir, report, equivalent, entry['mutant'], entry['file'])
        report['score'] = _score(report)
    return report


def _sort_survivor(workdir, report, equivalent, mutant, source):
    """Adds the surviving ``mutant`` to the report's equivalent, messages-only or
    surviving ones."""
    line, change, messages = _describe(workdir, mutant, source)
    entry = {'mutant': mutant, 'file': source, 'line': line, 'change': change}
    if mutant in equivalent:
        entry['why'] = equivalent[mutant]
        report['equivalent'].append(entry)
    elif messages:
        report['messages_only'].append(entry)
    else:
        report['surviving'].append(entry)


def select(results, patterns):
    """The entries of ``results`` whose mutant name is, or matches (fnmatch), one of
    ``patterns``: what a run of only those mutants reports on."""
    return {name: value for name, value in results.items()
            if any(name == pattern or fnmatch.fnmatchcase(name, pattern)
                   for pattern in patterns)}


def format_report(report):
    lines = [
        'mutation report: researchutils/{}'.format(report['module']),
        'tests: {}'.format(' '.join(report['tests'])),
        'made {made}, killed {killed}, surviving {surviving}, timed out {timed_out}, '
        'messages only {messages} (surviving, not counted), equivalent {equivalent}, '
        'other {other}; score {score}% in {minutes} min'.format(
            made=report['made'], killed=report['killed'],
            surviving=len(report['surviving']), timed_out=report['timed_out'],
            messages=len(report['messages_only']), equivalent=len(report['equivalent']),
            other=len(report['other']), score=report['score'], minutes=report['minutes']),
    ]
    if 'killed_under_mpi' in report:
        lines.append('killed under mpiexec -n 2 by {}: {} (in the score)'.format(
            ' '.join(report['mpi_tests']), report['killed_under_mpi']))
    for title, key in (('surviving', 'surviving'), ('messages only', 'messages_only'),
                       ('equivalent (tests/mutation_equivalent.txt)', 'equivalent')):
        if report[key]:
            lines.append('')
            lines.append(title + ':')
            for entry in report[key]:
                lines.append('  {file}:{line}  {change}  [{mutant}]'.format(**entry)
                             + ('  # ' + entry['why'] if 'why' in entry else ''))
    for entry in report['other']:
        lines.append('  not run: {mutant} (exit {exit_code})'.format(**entry))
    return '\n'.join(lines) + '\n'


def _module_key(argument):
    argument = argument.strip()
    for prefix in ('./', 'researchutils/'):
        if argument.startswith(prefix):
            argument = argument[len(prefix):]
    if os.path.isdir(os.path.join(REPO, 'researchutils', argument)) and not argument.endswith('/'):
        argument += '/'
    if not os.path.exists(os.path.join(REPO, 'researchutils', argument)):
        raise SystemExit('mutation: no module researchutils/{}'.format(argument))
    return argument


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('modules', nargs='*', help='paths under researchutils/')
    parser.add_argument('--workers', type=int, default=1)
    parser.add_argument('--check', type=float, default=None,
                        help='exit 1 when a score is below this percentage')
    # One value, names or fnmatch patterns separated by commas (repeatable): a list of
    # words would swallow the module named after it, and the run would take every module.
    parser.add_argument('--mutants', action='extend', default=[],
                        type=lambda names: [name for name in names.split(',') if name],
                        help='only these mutants: NAME[,NAME...] (mutmut run NAMES)')
    parser.add_argument('--sample', action='store_true',
                        help='only a fixed tenth of the mutants ({}), of SAMPLE_MODULES '
                             'when no module is named'.format(SAMPLE_PATTERN))
    parser.add_argument('--report-only', action='store_true',
                        help='write the report of the last run again (after editing '
                             'tests/mutation_equivalent.txt)')
    parser.add_argument('--under-mpi', action='store_true',
                        help='run the survivors again with the module\'s MPI_TESTS under '
                             'mpiexec -n 2, counting those they catch')
    parser.add_argument('--resume', action='store_true',
                        help='go on with the copy of a run that stopped (same sources)')
    return parser.parse_args(argv)


def main(argv=None):
    arguments = parse_arguments(argv)
    modules = [_module_key(m) for m in arguments.modules] or (
        SAMPLE_MODULES if arguments.sample else MODULES)
    mutants = list(arguments.mutants) + ([SAMPLE_PATTERN] if arguments.sample else [])
    failed = []
    for module in modules:
        report = run_module(module, arguments.workers, mutants,
                            resume=arguments.resume, report_only=arguments.report_only,
                            under_mpi=arguments.under_mpi)
        base = os.path.join(SCRATCH, _slug(module) + ('.sample' if arguments.sample else ''))
        if arguments.report_only and os.path.exists(base + '.json'):
            # Nothing ran: the time is that of the run reported on.
            with open(base + '.json') as stream:
                report['minutes'] = json.load(stream).get('minutes', report['minutes'])
        text = format_report(report)
        with open(base + '.txt', 'w') as stream:
            stream.write(text)
        with open(base + '.json', 'w') as stream:
            json.dump(report, stream, indent=1)
        sys.stdout.write(text + '(written to {}.txt)\n\n'.format(base))
        if arguments.check is not None and report['score'] < arguments.check:
            failed.append('{} {}%'.format(module, report['score']))
    if failed:
        sys.stdout.write('below {}%: {}\n'.format(arguments.check, ', '.join(failed)))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
