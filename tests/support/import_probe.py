"""What importing each of many modules loads, each seen from a fresh start, in one interpreter.

:func:`modules_loaded_after` starts one Python of this environment, runs ``prelude`` once
(``import chainer``: about a second of CPU, the cost of every such probe), then for each
module forks a child that imports it and reports which of ``candidates`` are in
``sys.modules`` beyond what the prelude loaded. A forked child starts from exactly the
state a new interpreter has after the prelude, so each answer is the one a separate
``python -c 'prelude; import module'`` gives, for one prelude's cost instead of one each.
Used by tests/test_imports.py; tested by tests/support/test_import_probe.py.
"""
import subprocess
import sys

# The probe itself uses only what every interpreter has loaded at start (sys, os, and the
# builtins), so that the baseline it measures against is the prelude's alone: one line a
# module on stdout, "MODULE<TAB>NAME,NAME" or "MODULE<TAB>!ERROR".
_PROBE = '''
import os, sys
{prelude}
baseline = set(sys.modules)
candidates = sys.argv[2].split(',')
for module in sys.argv[1].split(','):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            __import__(module)
            answer = ','.join(sorted(m for m in candidates
                                     if m in sys.modules and m not in baseline))
        except BaseException as error:
            answer = '!{{}}: {{}}'.format(type(error).__name__, error).replace('\\n', ' ')
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, 'rb') as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    print(module + '\\t' + answer, flush=True)
'''


def modules_loaded_after(prelude, modules, candidates, timeout=300):
    """For each of ``modules``: the names of ``candidates`` that importing it loads, after
    ``prelude`` (Python source) ran in a fresh interpreter.

    Returns:
        dict: module name to a sorted list of names, or to an ``"ExceptionType: message"``
        string when importing the module raised.
    """
    done = subprocess.run(
        [sys.executable, '-c', _PROBE.format(prelude=prelude), ','.join(modules),
         ','.join(candidates)], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = {}
    for line in done.stdout.splitlines():
        module, _, answer = line.partition('\t')
        answers[module] = answer[1:] if answer.startswith('!') else [
            name for name in answer.split(',') if name]
    return answers
