"""How a mutant is judged and reported (tools/mutation.py): mutmut's exit codes, a change
to a message only, the equivalents listed in tests/mutation_equivalent.txt, the score.

Tested by tests/test_mutation_tool.py.
"""
import ast
import os
import sys
import textwrap

from mutation_targets import REPO

EQUIVALENT = os.path.join(REPO, 'tests', 'mutation_equivalent.txt')
# Calls whose string arguments are messages to a person (add_note: an exception's note),
# under these names or a module's private alias of them (_add_note).
_MESSAGE_CALLS = {'warn', 'write', 'warning', 'error', 'info', 'debug', 'print', 'add_note'}
# mutmut's exit codes (mutmut/stats.py) grouped as the report counts them.
KILLED = {1, 3, 37}
SURVIVED = {0}
# mutmut's exit code for a mutant that no test reached (in pytest's own process).
NO_TESTS = 33
TIMED_OUT = {36, 24, -24, 152, 255}


def was_killed(code):
    """Whether mutmut's exit code ``code`` says the tests caught the mutant: they failed,
    or the process running them died of a signal (negative: a signal the tests send, such
    as SIGUSR1, that the mutant left without its handler), other than mutmut's own CPU
    limit (SIGXCPU: timed out)."""
    return code in KILLED or (code is not None and code < 0 and code not in TIMED_OUT)


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


def only_messages(original, mutant):
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
    return line, change, only_messages(original, mutated)


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


def score(report):
    """The share of the counted mutants (made, less messages only and equivalents) that
    were caught: killed, timed out (a user would see the run hang) or killed under mpiexec."""
    counted = report['made'] - len(report['messages_only']) - len(report['equivalent'])
    caught = report['killed'] + report['timed_out'] + report.get('killed_under_mpi', 0)
    return round(100.0 * caught / counted, 1) if counted else 100.0


def sort_survivor(workdir, report, equivalent, mutant, source):
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
