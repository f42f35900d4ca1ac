"""Judging again under ``mpiexec -n 2`` the mutants that code for several ranks let through
(``tools/mutation.py --under-mpi``): mutmut runs pytest in one process, where the ChainerMN
tests skip.

Tested by tests/test_mutation_tool.py.
"""
import json
import os
import subprocess
import sys
import time

from mutation_copy import copy_environment
from mutation_targets import MPI_TESTS
from mutation_verdicts import NO_TESTS, score

_MPIEXEC = ['mpiexec', '--allow-run-as-root', '--oversubscribe', '-n', '2']


def _mpi_run(workdir, tests, mutant, python, timeout):
    """Exit code of ``tests`` under ``mpiexec -n 2`` in the copy's ``mutants`` folder with
    ``mutant`` active (mutmut's trampolines read MUTANT_UNDER_TEST in every process), or
    None when they ran past ``timeout`` seconds."""
    env = dict(copy_environment(), MUTANT_UNDER_TEST=mutant)
    command = _MPIEXEC + [python, '-m', 'pytest', '-m', 'mpi', '-x', '-q', '-p',
                          'no:cacheprovider', '-p', 'no:randomly'] + list(tests)
    try:
        return subprocess.run(command, cwd=os.path.join(workdir, 'mutants'), env=env,
                              capture_output=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return None


def unreached(report):
    """The report's mutants that no test reached in pytest's own process."""
    return [entry for entry in report['other'] if entry['exit_code'] == NO_TESTS]


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
    pending = [entry['mutant'] for entry in report['surviving'] + unreached(report)
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
    report['score'] = score(report)
