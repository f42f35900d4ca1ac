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
import fnmatch
import json
import os
import subprocess
import sys
import time

# The tool's other modules sit beside this file (tools/ is no package): run as a script, its
# folder is sys.path[0] already; loaded from its path (tests/test_mutation_tool.py), it is
# put there.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from mutation_copy import copy_environment, load_results, prepare, write_conftest  # noqa: E402
from mutation_mpi import count_mpi_verdicts, rerun_under_mpi, unreached  # noqa: E402
from mutation_targets import (  # noqa: E402
    GUARDED_FOLDERS,
    MODULES,
    MPI_TESTS,
    NOT_MUTATED,
    REPO,
    SAMPLE_MODULES,
    SAMPLE_PATTERN,
    mirrored_tests,
    slug,
)
from mutation_verdicts import (  # noqa: E402
    SURVIVED,
    TIMED_OUT,
    format_report,
    only_messages,
    read_equivalent,
    score,
    sort_survivor,
    was_killed,
)

SCRATCH = os.path.join(REPO, 'build', 'mutation')
# What tests/test_mutation_tool.py reads of the tool, wherever it lives.
__all__ = ['GUARDED_FOLDERS', 'MODULES', 'MPI_TESTS', 'NOT_MUTATED', 'SAMPLE_MODULES',
           'SAMPLE_PATTERN', 'count_mpi_verdicts', 'format_report', 'main', 'mirrored_tests',
           'only_messages', 'parse_arguments', 'read_equivalent', 'select', 'was_killed',
           'write_conftest']


def run_module(module, workers, mutants=(), python=sys.executable, resume=False,
               report_only=False, under_mpi=False):
    """Runs mutmut on ``module``; returns the report as a dict. With ``resume``, goes on
    in the copy of an earlier run that stopped (only the mutants not yet checked run)."""
    tests = mirrored_tests(module)
    if not tests:
        raise SystemExit('mutation: no tests mirror {!r} (tests/ mirrors researchutils/): '
                         'add them, or list them in EXTRA_TESTS'.format(module))
    workdir = os.path.join(SCRATCH, slug(module))
    if not ((resume or report_only) and os.path.isdir(os.path.join(workdir, 'mutants'))):
        prepare(module, tests, workdir)
    env = copy_environment()
    started = time.monotonic()
    done = subprocess.CompletedProcess([], 0, '', '')
    if not report_only:
        done = subprocess.run([python, '-m', 'mutmut', 'run', '--max-children', str(workers)]
                              + list(mutants), cwd=workdir, env=env, capture_output=True,
                              text=True)
    minutes = (time.monotonic() - started) / 60
    results = load_results(workdir)
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
        if was_killed(code):
            report['killed'] += 1
        elif code in TIMED_OUT:
            report['timed_out'] += 1
        elif code in SURVIVED:
            sort_survivor(workdir, report, equivalent, mutant, source)
        else:
            report['other'].append({'mutant': mutant, 'file': source, 'exit_code': code})
    report['score'] = score(report)
    if under_mpi:
        rerun_under_mpi(module, workdir, report, python)
        # Those no test reached in one process, and that the tests under mpiexec let
        # through, are survivors like the others: a message, an equivalent, or a gap.
        for entry in unreached(report):
            report['other'].remove(entry)
            sort_survivor(workdir, report, equivalent, entry['mutant'], entry['file'])
        report['score'] = score(report)
    return report


def select(results, patterns):
    """The entries of ``results`` whose mutant name is, or matches (fnmatch), one of
    ``patterns``: what a run of only those mutants reports on."""
    return {name: value for name, value in results.items()
            if any(name == pattern or fnmatch.fnmatchcase(name, pattern)
                   for pattern in patterns)}


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
        base = os.path.join(SCRATCH, slug(module) + ('.sample' if arguments.sample else ''))
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
